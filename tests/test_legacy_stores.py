"""Stores written by the code before the restructure of issue 24 (tests/data/legacy, see its README) open and
display the same: the run store (a finished run with a grade override, a paused run, a benchmark's runs), its
LangGraph checkpoints (the paused run resumes from them), the override store, a benchmark folder and a learned
plan. ``expected.json`` is what ``snapshot`` gave on that code."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

LEGACY = Path(__file__).parent / "data" / "legacy"
PAUSED = "048b9b9ecaa6"


def _plain(value):
    """``value`` as JSON would give it back (tuples as lists, keys as text)."""
    return json.loads(json.dumps(value, default=str))


def snapshot(home: Path) -> dict:
    """What the History, Run, Compare, Benchmark and Learned plans views read from the stores under ``home``."""
    from core.analysis import evidence, summary
    from core.store.plans import PlanStore
    from core.benchmark import reports
    from core.benchmark.results import read_all
    from core.benchmark.trace import read_trace
    from core.store.overrides import OverrideStore
    from core.store.runs import RunStore
    from core.analysis.trace import Trace, step_summary

    overrides = OverrideStore(home).all()
    runs = {}
    for record in RunStore(home / "runs.sqlite").list():
        record = RunStore(home / "runs.sqlite").get(record.id)
        trace = Trace.of(record.events)
        coverage = evidence.of_run(record.settings, record.events)
        runs[record.id] = {
            "history": summary.gaps_as_text([summary.outcome_row(record, overrides.get(record.id))])[0],
            "compare": summary.compare_row(record),
            "trace": {"plan": trace.plan, "steps": trace.step_states(), "replans": trace.replans,
                      "queries": trace.queries, "llm_calls": trace.llm_calls, "finished": trace.finished,
                      "tokens": [trace.prompt_tokens, trace.completion_tokens], "proposed": trace.proposed},
            "step_summary": step_summary(record.events),
            "benchmark_trace": read_trace(record.events, record.settings.scenario,
                                          record.outcome and record.outcome.decision).to_dict(),
            "evidence": coverage.to_dict() if coverage else None,
            "pause": record.pause, "status": record.status, "events": len(record.events)}
    results = read_all(home / "bench" / "smoke", home=home)
    return _plain({"runs": runs, "overrides": {k: vars(v) for k, v in overrides.items()},
                   "bench": {"results": results, "accuracy": reports.accuracy(results).to_dict("records")},
                   "plan": PlanStore(home / "plans").load("depot").to_dict()})


WRITTEN_IN = "/work/wt-core-layout/"  # the checkout the legacy home was written in (see data/legacy/README.md)


def _rebase_replays(runs: Path) -> None:
    """Point the runs' replay files (stored as absolute paths, so that a resume from another directory finds them)
    at this checkout's ``assets/replays``, as a user moving a project home to another checkout would."""
    root = str(Path(__file__).resolve().parents[1]) + "/"
    with sqlite3.connect(runs) as db:
        db.execute("UPDATE runs SET llm = replace(llm, ?, ?), settings = replace(settings, ?, ?)",
                   (WRITTEN_IN, root, WRITTEN_IN, root))
    db.close()


@pytest.fixture
def legacy_home(tmp_path, monkeypatch):
    """A copy of the legacy project home, used as DATA_HOME (the stores may be migrated on first open)."""
    from tests.page_app import isolate

    home = tmp_path / "home"
    shutil.copytree(LEGACY / "home", home)
    _rebase_replays(home / "runs.sqlite")
    isolate(monkeypatch, home)
    monkeypatch.setenv("PLANRAG_SCENARIOS", str(tmp_path / "scenarios"))
    return home


def test_legacy_stores_open_and_read_the_same(legacy_home):
    expected = json.loads((LEGACY / "expected.json").read_text())
    assert snapshot(legacy_home) == expected["snapshot"]


def test_a_paused_legacy_run_resumes_from_its_checkpoint(legacy_home, capsys):
    from core.cli.main import main

    expected = json.loads((LEGACY / "expected.json").read_text())["resumed"]
    assert main(["run", "--resume", PAUSED, "--pause", "p1", "--approve", "--json"]) == 3  # paused at its next plan
    out = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in expected} == expected
