"""The run's events are stored as dicts and read back typed (core.model.events): every shape an older version
stored reads, an unknown kind is kept as an UnknownEvent rather than failing the run's views."""
from __future__ import annotations

import json

import pytest

from core.analysis.trace import Trace, step_summary
from core.model.events import (ActionEvent, FinalEvent, LLMUsage, ObservationEvent, PlanEvent, UnknownEvent,
                               event_from_dict)
from core.store.runs import RunStore
from core.model.run_settings import Limits, RunSettings


def test_every_kind_reads_back_typed_and_stores_the_same():
    events = [PlanEvent(steps=["a", "b"], step=1, llm=LLMUsage(call=1, prompt_tokens=3, completion_tokens=4,
                                                              latency_s=0.5, estimated=True, reply="Plan")),
              ActionEvent(tool="Relational DB", query="SELECT 1", language="sql", step=1),
              ObservationEvent(text="1", columns=["x"], rows=[[1]], total_rows=1, step=1),
              FinalEvent(answer="a", step=2)]
    assert [event_from_dict(e.to_dict()) for e in events] == events


@pytest.mark.usefixtures("store_engine")  # on both engines (conftest)
def test_older_and_unknown_shapes_are_read_not_refused(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    store.create("r", RunSettings("locating", 1, "sqlite", "iterrag", "x"))
    stored = [
        # an older usage record without the later fields, and a field this version no longer has
        {"kind": "action", "tool": "Relational DB", "query": "SELECT 1", "language": "sql", "step": 1, "at": 5.0,
         "llm": {"call": 1, "prompt_tokens": 10, "completion_tokens": 2, "latency_s": 0.1}, "retired": True},
        {"kind": "vote", "step": 1, "at": 6.0, "ballots": [1, 2]},  # a kind this version does not know
        {"kind": "final", "step": 2, "at": 7.0},  # a known kind missing a field it needs
        {"kind": "final", "step": 2, "at": 8.0, "answer": "krakow"}]
    with store.db.transaction() as con:
        for i, e in enumerate(stored, 1):
            con.execute("INSERT INTO events VALUES ('r', ?, ?, ?)", (i, e["kind"], json.dumps(e)))
        con.execute("INSERT INTO events VALUES ('r', 5, 'x', 'not json')")
    events = store.get("r").events
    action, vote, partial, final, broken = events
    assert isinstance(action, ActionEvent) and action.llm.prompt_tokens == 10 and action.llm.reply == ""
    assert isinstance(vote, UnknownEvent) and vote.data == stored[1] and (vote.step, vote.at) == (1, 6.0)
    assert isinstance(partial, UnknownEvent) and partial.to_dict() == stored[2]
    assert isinstance(final, FinalEvent) and final.answer == "krakow"
    assert isinstance(broken, UnknownEvent) and broken.data["text"] == "not json"
    trace = Trace.of(events)
    assert (trace.queries, trace.llm_calls, trace.prompt_tokens, trace.finished) == (1, 1, 10, True)
    assert step_summary(events) == "sql: SELECT 1 · answer: krakow"
    assert store.export(["r"])[0]["events"][1] == stored[1]  # exported as stored
    assert [e.kind for e in store.events("r", after=3)] == ["final", "unknown"]  # read on from a cursor


@pytest.mark.usefixtures("store_engine")  # on both engines (conftest)
def test_stored_settings_read_typed_whatever_version_wrote_them(tmp_path):
    """A run's settings read back as RunSettings: a row from before ``seed``, ``endpoint`` and ``context_source``
    existed takes their defaults, and a setting a later version added is left out."""
    store = RunStore(tmp_path / "runs.sqlite")
    store.create("r", RunSettings("locating", 1, "sqlite", "planrag", "x"))
    older = {"scenario": "building", "question": 2, "db": "mysql", "technique": "planrag", "llm": "m",
             "hitl": "approve-replans", "source": "demo", "limits": {"max_llm_calls": 5, "retired": 1},
             "prompts": "paper", "later_setting": True}
    with store.db.transaction() as con:
        con.execute("UPDATE runs SET settings = ? WHERE id = 'r'", (json.dumps(older),))
    settings = store.get("r").settings
    assert settings == RunSettings("building", 2, "mysql", "planrag", "m", hitl="approve-replans", source="demo",
                                   limits=Limits(max_llm_calls=5), prompts="paper")
    assert store.list()[0].settings == settings and store.export(["r"])[0]["settings"] == settings.to_dict()


def test_a_step_in_one_line_reads_in_words():
    """Issue 40: "Step 4 · error: repeat", "1 rows"."""
    from core.analysis.trace import row_count
    from core.model.events import ErrorEvent

    repeated = ObservationEvent(text="same query", error="repeated", error_kind="repeat")
    assert step_summary([repeated]) == "repeated an earlier query"
    assert step_summary([ErrorEvent(message="stopped by the analyst", error_kind="stopped")]) == "stopped by the analyst"
    assert (row_count(1), row_count(1200)) == ("1 row", "1,200 rows")
