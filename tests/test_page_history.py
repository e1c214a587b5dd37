"""The History page (Streamlit AppTest): stored runs filtered, exported as JSON, and opened in the Run view."""
from __future__ import annotations

import json
import sqlite3

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from core.llm.replays import replays
from tests.page_app import button, isolate, open_page


@pytest.fixture
def home(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    runtime = jobs.open_runtime()
    for scenario, technique in (("locating", "iterrag"), ("locating", "planrag"), ("building", "planrag")):
        spec = replays("demo", scenario, 1, "sql", technique)[0].spec
        runtime.start(RunSettings(scenario, 1, "sqlite", technique, spec, source="demo"))
    runtime.close()
    return tmp_path


@pytest.fixture
def downloads(monkeypatch) -> dict:
    """The data makers of download buttons (the export is made when clicked), by file id."""
    makers = {}
    add_deferred = MediaFileManager.add_deferred

    def recording(self, data_callable, *args, **kwargs):
        file_id = add_deferred(self, data_callable, *args, **kwargs)
        makers[file_id] = data_callable
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", recording)
    return makers


def test_filter_export_and_open_a_run(home, downloads):
    at = open_page("pages/history.py", question_ref=None)
    assert len(at.dataframe[0].value) == 3
    at.selectbox(key="history_Technique").set_value("planrag").run()
    table = at.dataframe[0].value
    assert list(table["question"]) == ["demo/building/1", "demo/locating/1"]
    at.selectbox(key="history_Scenario").set_value("locating").run()
    [row] = at.dataframe[0].value.to_dict("records")
    assert (row["technique"], row["decision"], row["correct"], row["rank"]) == ("PlanRAG", "doab", True, "1 of 9")

    [download] = at.get("download_button")
    [run] = json.loads(downloads[download.proto.deferred_file_id]())
    assert run["id"] == row["run"] and run["settings"]["technique"] == "planrag"
    assert run["outcome"]["decision"] == "doab" and [e["kind"] for e in run["events"]][-1] == "final"
    assert download.proto.label == "Export 1 run as JSON"

    assert not at.metric and not at.get("button")  # no run is opened below the table until asked for (issue 41)
    at.selectbox(key="history_run").set_value(row["run"]).run()
    assert {m.label: m.value for m in at.metric}["Decision"] == "doab"  # the run shown below the table
    assert at.query_params["run"] == row["run"]
    at.selectbox(key="history_Technique").set_value("iterrag").run()  # IterRAG ran on Locating only
    at.selectbox(key="history_Scenario").set_value("building").run()
    assert at.dataframe[0].value.empty and "No run matches" in at.info[0].value
    at.selectbox(key="history_Scenario").set_value("locating").run()
    assert at.selectbox(key="history_Correct").options == ["any", "correct"]  # the values the runs have
    at.selectbox(key="history_Correct").set_value(True).run()
    [iterrag] = at.dataframe[0].value.to_dict("records")
    at.selectbox(key="history_run").set_value(iterrag["run"]).run()

    button(at, "Open in the Run view").click().run()
    assert at.session_state["run_id"] == iterrag["run"]
    assert at.session_state["question_ref"] == ("demo", "locating", 1)
    assert at.title[0].value == "Run" and {m.label: m.value for m in at.metric}["Rank"] == "1 of 9"


def test_an_override_shows_as_such_in_the_table(home):
    from core.analysis.grading import make_override
    from core.store.overrides import OverrideStore

    run = next(r for r in jobs.open_store().list(limit=None) if r.settings.technique == "iterrag")
    OverrideStore(home).put(run.id, make_override("ganges", "doab", by="ana", note="reads ganges"))
    at = open_page("pages/history.py", question_ref=None)
    rows = {r["run"]: r for r in at.dataframe[0].value.to_dict("records")}
    assert (rows[run.id]["decision"], rows[run.id]["correct"], rows[run.id]["grade"]) == (
        "ganges", False, "overridden by ana")
    assert rows[run.id]["rank"] == "–"  # the analyst's decision has no stored rank
    assert {r["grade"] for k, r in rows.items() if k != run.id} == {"decided"}


def test_many_runs_show_a_page_of_rows_at_a_time(home):
    con = sqlite3.connect(home / "runs.sqlite")  # the three runs copied to 230, each older than the last
    columns = [c[1] for c in con.execute("PRAGMA table_info(runs)")]
    seeded = con.execute("SELECT * FROM runs").fetchall()
    for i in range(227):
        row = dict(zip(columns, seeded[i % 3]))
        row["id"], row["created"] = f"copy{i:04d}", row["created"] - 60 * (i + 1)
        con.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    con.commit()
    con.close()
    at = open_page("pages/history.py", question_ref=None)
    assert len(at.dataframe[0].value) == 100
    assert at.selectbox(key="history_rows").options == ["1–100 of 230", "101–200 of 230", "201–230 of 230"]
    assert at.get("download_button")[0].proto.label == "Export 230 runs as JSON"  # every run the filters keep
    seen = list(at.dataframe[0].value["run"])
    for first in (100, 200):
        at.selectbox(key="history_rows").set_value(first).run()
        seen += list(at.dataframe[0].value["run"])
    assert len(seen) == len(set(seen)) == 230 and seen[-1] == "copy0226"  # each run once, the oldest last


def test_the_table_of_record_says_who_started_each_run_orders_it_and_links_each(home):
    """Issue 40 (Inspect's log viewer): History as a table of record, sortable and filterable by who started a run,
    with a link that opens each."""
    store = jobs.open_store()
    runs = {r.settings.technique + "/" + r.settings.scenario: r.id for r in store.list(limit=None)}
    store.record_start(runs["planrag/locating"], "ana")
    store.record_start(runs["iterrag/locating"], "benchmark smoke")
    at = open_page("pages/history.py", question_ref=None)
    table = at.dataframe[0]
    order = list(table.proto.column_order)
    assert order.index("started") < order.index("started by") and "open" in order
    by_run = {r["run"]: r for r in table.value.to_dict("records")}
    assert by_run[runs["planrag/locating"]]["started by"] == "ana"
    assert by_run[runs["planrag/building"]]["open"] == f"run?run={runs['planrag/building']}"
    at.selectbox(key="history_Started by").set_value("ana").run()
    assert list(at.dataframe[0].value["run"]) == [runs["planrag/locating"]]
    at.selectbox(key="history_Started by").set_value("any").run()
    at.selectbox(key="history_order").set_value("started by").run()
    assert list(at.dataframe[0].value["started by"])[:2] == ["ana", "benchmark smoke"]  # A to Z, gaps last
    at.selectbox(key="history_order").set_value("tokens").run()
    tokens = list(at.dataframe[0].value["tokens"])
    assert tokens == sorted(tokens, reverse=True)
