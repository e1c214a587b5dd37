"""Issue 27, section 3: every CSV the workbench writes opens safely in a spreadsheet (OWASP CSV injection: a
cell starting with = + - @ tab or carriage return gets a leading '), numbers (negative ones too) stay numbers,
and the JSON beside it stays exact."""
from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from core.benchmark import fidelity, reports
from core.llm.prices import DEFAULT_PRICES
from core.spreadsheet import csv_text, safe_cell
from tests.test_benchmark_reports import result

HOSTILE = {"=": "=cmd|' /C calc'!A0", "+": "+1+cmd|' /C calc'!A0", "-": "-2+3+cmd|' /C calc'!A0",
           "@": "@SUM(1+1)*cmd|' /C calc'!A0", "tab": "\t=1+1", "cr": "\r=1+1"}


@pytest.mark.parametrize("lead", list(HOSTILE))
def test_each_formula_lead_is_neutralised(lead):
    text = HOSTILE[lead]
    assert safe_cell(text) == "'" + text
    frame = pd.DataFrame({"decision": [text], "n": [1]})
    cells = next(csv.DictReader(io.StringIO(csv_text(frame))))
    assert cells["decision"] == "'" + text and cells["n"] == "1"


def test_numbers_stay_numbers():
    frame = pd.DataFrame({"regret": [-2.5, 0.0, 3.0], "rank": [-1, 2, 3], "text": ["-12.5", "+3", "1e-3"],
                          "name": ["krakow", "a=b", "-x"]})
    back = pd.read_csv(io.StringIO(csv_text(frame)))
    assert back["regret"].tolist() == [-2.5, 0.0, 3.0] and back["rank"].tolist() == [-1, 2, 3]
    assert back["text"].tolist() == [-12.5, 3.0, 0.001]  # plain numbers written as text are left alone
    assert back["name"].tolist() == ["krakow", "a=b", "'-x"]
    assert safe_cell(None) is None and safe_cell(-3) == -3


def test_a_column_name_that_is_a_formula_is_neutralised():
    assert csv_text(pd.DataFrame({"=HYPERLINK(\"http://x\")": [1]})).splitlines()[0] == "\"'=HYPERLINK(\"\"http://x\"\")\""


def test_the_benchmark_reports_are_safe_and_their_json_exact(tmp_path):
    """items.csv (and every other report) carries the model's text neutralised; report.json keeps it as written."""
    hostile = [result("sqlite", "iterrag", i + 1, False, decision=text, label="@SUM(1+1)", final_answer=text,
                      error="=1+1", failure="CAN", regret=-1.5) for i, text in enumerate(HOSTILE.values())]
    reports.export(hostile, DEFAULT_PRICES, tmp_path, not_run=[{"scenario": "locating", "question": 9, "db": "sqlite",
                                                               "technique": "iterrag", "model": "=evil()",
                                                               "error_kind": "llm", "error": "-1+cmd"}])
    for path in tmp_path.glob("*.csv"):
        for row in csv.reader(io.StringIO(path.read_text())):
            for cell in row:
                assert not cell.startswith(("=", "+", "@", "\t", "\r")), (path.name, cell)
                assert not cell.startswith("-") or pd.api.types.is_number(float(cell)), (path.name, cell)
    items = pd.read_csv(tmp_path / "items.csv")
    assert items["decision"].tolist() == ["'" + t for t in HOSTILE.values()]
    assert (items["label"] == "'@SUM(1+1)").all() and (items["regret"] == -1.5).all()
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["decision"] for r in report["items"]] == list(HOSTILE.values())
    assert pd.read_csv(tmp_path / "not_run.csv")["model"].tolist() == ["'=evil()"]


def test_the_fidelity_reports_are_safe(tmp_path):
    hostile = [{**result("sqlite", "iterrag", 1, True), "model": "=cmd|' /C calc'!A0"}]
    for path in fidelity.export(hostile, tmp_path):
        text = path.read_text()
        assert "\n=" not in text and ",=" not in text and not text.startswith("=")


def test_the_tables_own_unsafe_csv_export_is_off():
    """Streamlit's table toolbar writes cells unchanged (CSV download, clipboard copy): the app turns it off."""
    import tomllib

    from tests.conftest import ROOT

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["disableDataExport"] is True
