"""Where a run's time went (issue 40, Langfuse's timeline): the LLM calls, queries and waits for review of a run's
events on its clock (core.analysis.timeline), shown on the Run page for an opened run once its expander is opened."""
from __future__ import annotations

import pytest

import core.jobs.runs as jobs
from core.analysis.timeline import LLM, QUERY, REVIEW, timeline
from core.model.events import (ActionEvent, FinalEvent, LLMUsage, ObservationEvent, PlanEvent, QueryReviewEvent,
                               ThoughtEvent)
from core.model.run_settings import RunSettings
from core.model.outcome import RunOutcome
from tests.page_app import isolate, open_page
from ui.timeline import OPEN


def usage(call: int, wait: float, tokens: int = 100) -> LLMUsage:
    return LLMUsage(call=call, prompt_tokens=tokens - 10, completion_tokens=10, latency_s=wait, estimated=False,
                    reply="", wait_s=wait)


T0 = 1_700_000_000.0
EVENTS = [  # a plan proposed after a 2 s call, reviewed 30 s later; a query of 0.5 s, one reviewed for 10 s
    PlanEvent(step=1, at=T0 + 2, llm=usage(1, 2.0), steps=["a", "b"], status="proposed"),
    PlanEvent(step=1, at=T0 + 32, steps=["a", "b"], origin="analyst", status="approved", reviewer="ana"),
    ThoughtEvent(step=2, at=T0 + 35, llm=usage(2, 3.0, 200), text="t"),
    ActionEvent(step=2, at=T0 + 35, tool="Relational DB", query="SELECT 1", language="sql"),
    ObservationEvent(step=2, at=T0 + 35.5, text="1", latency_s=0.5, executed="SELECT 1"),
    ActionEvent(step=3, at=T0 + 37, llm=usage(3, 1.5), tool="Self-thinking", query="so", language="self"),
    ObservationEvent(step=3, at=T0 + 37, text="so"),
    ActionEvent(step=4, at=T0 + 40, llm=usage(4, 2.5), tool="Relational DB", query="SELECT 2", language="sql"),
    QueryReviewEvent(step=4, at=T0 + 50, status="approved", query="SELECT 2", proposed="SELECT 2", reviewer="ben"),
    ObservationEvent(step=4, at=T0 + 50.25, text="2", latency_s=0.25),
    FinalEvent(step=5, at=T0 + 52, llm=usage(5, 1.0), answer="x"),
]


def test_a_runs_time_is_split_into_llm_calls_queries_and_review_waits():
    line = timeline(EVENTS)
    assert line.total_s == 50.0  # first event (the end of call 1) to the last
    assert (line.count(LLM), line.count(QUERY), line.count(REVIEW)) == (5, 2, 2)  # Self-thinking is no query
    assert line.seconds(LLM) == pytest.approx(2.0 - 2.0 + 3 + 1.5 + 2.5 + 1)  # call 1 began before the first event
    assert line.seconds(QUERY) == pytest.approx(0.75) and line.seconds(REVIEW) == pytest.approx(40.0)
    assert line.tokens == 100 + 200 + 100 + 100 + 100
    reviews = [s for s in line.spans if s.kind == REVIEW]
    assert [(s.label, s.start) for s in reviews] == [("plan approved by ana", 0.0), ("query approved by ben", 38.0)]
    assert line.other_s == pytest.approx(50 - line.seconds(LLM) - 0.75 - 40)
    assert timeline([]).spans == [] and timeline([]).total_s == 0


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def test_the_run_page_shows_where_an_opened_runs_time_went(home):
    store = jobs.open_store()
    store.create("timed", RunSettings("locating", 1, "sqlite", "planrag", "replay:x", source="demo"))
    for event in EVENTS:
        store.add_event("timed", event)
    store.update("timed", "finished", outcome=RunOutcome(wall_s=10.0))
    at = open_page("pages/run.py")
    at.session_state["run_id"] = "timed"
    at.run()
    [where] = [e for e in at.expander if e.label.endswith("Where the time went")]
    # closed, it draws nothing: no chart (Plotly's JavaScript), no table, no metric
    assert not where.get("plotly_chart") and not where.dataframe and not where.metric
    at.session_state[OPEN] = True  # the analyst opens it: the page runs again and draws it
    at.run()
    [where] = [e for e in at.expander if e.label.endswith("Where the time went")]
    assert len(where.get("plotly_chart")) == 1
    metrics = {m.label: (m.value, m.proto.body) for m in where.metric}
    assert metrics["Waiting for review"][0] == "40.0 s" and metrics["In queries"][0] == "0.8 s"
    assert "5 calls, 600 tokens" in str(where.metric[0].proto)
    assert list(where.dataframe[0].value["what"]) == [LLM, REVIEW, LLM, QUERY, LLM, LLM, REVIEW, QUERY, LLM]
