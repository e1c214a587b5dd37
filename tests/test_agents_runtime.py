"""The agent loop and runtime on a tiny fake database: streaming, limits, errors, reviews, the run store."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import pytest

from core.agents.runtime import AgentRuntime, RunNotPaused
from core.agents.workspace import Workspace
from core.model.run_settings import Limits, Review, RunSettings
from core.model.events import event_from_dict
from core.backends.base import BackendUnavailable, QueryResult, QuerySyntaxError, QueryTimeout, RefusedWrite
from core.llm.client import LLMSettings
from tests.stub_server import completion
from tests.test_llm import KEY, StandIn


@dataclass(frozen=True)
class FakeQuestion:
    text: str = "Where should I allocate my merchant? My goal is maximizing my profit on \"home\"."
    scenario: str = "locating"
    answer: str | None = "krakow"


class FakeBackend:
    """Rows for any read query; errors for queries naming them; ``delay`` seconds per query; with a ``gate``, each
    query waits for the gate to open first (``opened`` records, per query, whether it did)."""

    name = "fake"

    def __init__(self, language: str = "sql", rows: int = 2, delay: float = 0.0,
                 gate: threading.Event | None = None):
        self.language, self.rows, self.delay, self.gate = language, rows, delay, gate
        self.queries: list[str] = []
        self.opened: list[bool] = []

    def schema_text(self) -> str:
        return "CREATE TABLE trade_node (trade_node VARCHAR(30), local_value FLOAT);"

    def query(self, text, *, timeout_s=10.0, row_cap=200):
        self.queries.append(text)
        if self.gate is not None:
            self.opened.append(self.gate.wait(timeout=60))
        time.sleep(self.delay)
        for word, error in (("DELETE", RefusedWrite), ("SLEEP", QueryTimeout), ("SELEKT", QuerySyntaxError),
                            ("OFFLINE", BackendUnavailable)):
            if word in text:
                raise error(f"{word.lower()} failure")
        names = ["krakow", "lubeck", "novgorod"] + [f"node_{i}" for i in range(self.rows)]
        rows = [[n, float(i)] for i, n in enumerate(names[:self.rows])]
        return QueryResult(["trade_node", "local_value"], rows[:row_cap], len(rows), 0.001, text)

    def close(self):
        pass


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def make_runtime(home, backend=None, **kw) -> AgentRuntime:
    backend = backend or FakeBackend()
    return AgentRuntime(home, workspace=lambda s: Workspace(FakeQuestion(), backend, ["krakow", "lubeck", "novgorod"]),
                        **kw)


def replay(tmp_path, replies: list[str]) -> str:
    path = tmp_path / f"replay{len(list(tmp_path.glob('replay*')))}.json"
    path.write_text(json.dumps(replies))
    return f"replay:{path}"


def settings(llm: str, technique: str = "iterrag", **kw) -> RunSettings:
    return RunSettings("locating", 1, "sqlite", technique, llm, **kw)


ACT = "Thought: look\nAction: Relational DB\nAction input: SELECT trade_node FROM trade_node"
FINAL = "Thought: I now know the answer.\nFinal answer: You should allocate the merchant to krakow."
pytestmark = pytest.mark.usefixtures("store_engine")  # every test on both engines (conftest)
PLAN = "Plan: [Step 1: list the nodes, Step 2: choose]\nCurrent step: Step 1: list the nodes\n" + ACT


def kinds(events) -> list[str]:
    return [e.kind for e in events]


def test_events_stream_while_the_query_runs(home, tmp_path):
    # The query cannot finish before the action has reached the listener: the listener opens its gate.
    gate = threading.Event()
    backend = FakeBackend(gate=gate)
    runtime = make_runtime(home, backend)
    seen = []

    def listen(event):
        seen.append((event.kind, gate.is_set()))
        if event.kind == "action":
            gate.set()

    result = runtime.start(settings(replay(tmp_path, [ACT, FINAL])), on_event=listen)
    assert result.status == "finished" and [k for k, _ in seen] == ["thought", "action", "observation", "thought",
                                                                    "final"]
    assert backend.opened == [True]  # the action was delivered while its query was waiting, not after it
    assert seen[2] == ("observation", True)


def test_single_rag_makes_one_query_then_answers_with_the_answer_prompt(home, tmp_path, monkeypatch):
    prompts_seen = []
    import core.agents.runtime as rt

    def recording(*args, **kw):
        llm = rt_open_llm(*args, **kw)
        complete = llm.complete
        llm.complete = lambda messages, stop, **kw: (prompts_seen.append(messages[0].content),
                                                     complete(messages, stop, **kw))[1]
        return llm

    rt_open_llm = rt.open_llm
    monkeypatch.setattr(rt, "open_llm", recording)
    result = make_runtime(home).start(settings(replay(tmp_path, [ACT, "Final answer: krakow"]), "singlerag"))
    assert result.outcome.correct is True and result.outcome.actions == 1
    assert "collect the data to answer the question:" in prompts_seen[0]
    assert "make your Final answer immediately" in prompts_seen[1]


def test_usage_is_on_the_first_event_of_each_call(home, tmp_path):
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [ACT, FINAL])))
    events = runtime.store.get(result.run_id).events
    with_usage = [e for e in events if e.llm]
    assert [e.llm.call for e in with_usage] == [1, 2] and all(e.llm.estimated for e in with_usage)
    assert with_usage[0].llm.reply == ACT
    total = sum(e.llm.prompt_tokens + e.llm.completion_tokens for e in with_usage)
    assert result.outcome.tokens.total == total and result.outcome.tokens.estimated is True
    assert [event_from_dict(e.to_dict()) for e in events] == events


def test_step_limit_asks_for_the_final_answer(home, tmp_path):
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [ACT, ACT, "Final answer: lubeck"]),
                                    limits=Limits(max_llm_calls=3)))
    events = runtime.store.get(result.run_id).events
    limit = [e for e in events if e.kind == "error"]
    assert limit[0].error_kind == "limit" and not limit[0].fatal
    assert result.status == "finished" and result.outcome.decision == "lubeck" and result.outcome.correct is False


def test_token_limit_and_no_answer_at_the_limit_fails(home, tmp_path):
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [ACT, ACT]), limits=Limits(max_tokens=10)))
    events = runtime.store.get(result.run_id).events
    assert "token limit reached" in events[kinds(events).index("error")].message
    assert result.status == "failed" and events[-1].error_kind == "no_answer"


def test_large_results_are_summarised_for_the_llm(home, tmp_path):
    runtime = make_runtime(home, FakeBackend(rows=500))
    result = runtime.start(settings(replay(tmp_path, [ACT, FINAL]), limits=Limits(observation_rows=10, row_cap=100)))
    observation = next(e for e in runtime.store.get(result.run_id).events if e.kind == "observation")
    assert observation.total_rows == 500 and len(observation.rows) == 100
    assert len(observation.text.splitlines()) == 12 and "490 more rows not shown" in observation.text


@pytest.mark.parametrize("query,kind", [("DELETE FROM trade_node", "refused"), ("SELECT SLEEP(100)", "timeout"),
                                        ("SELEKT * FROM trade_node", "syntax")])
def test_query_errors_come_back_as_observations(home, tmp_path, query, kind):
    runtime = make_runtime(home)
    bad = f"Thought: try\nAction: Relational DB\nAction input: {query}"
    result = runtime.start(settings(replay(tmp_path, [bad, ACT, FINAL])))
    observations = [e for e in runtime.store.get(result.run_id).events if e.kind == "observation"]
    assert observations[0].error_kind == kind and observations[0].text.startswith("Query")
    assert observations[1].error is None and result.outcome.correct is True


def test_an_unreachable_database_ends_the_run(home, tmp_path):
    runtime = make_runtime(home)
    bad = "Thought: try\nAction: Relational DB\nAction input: SELECT * FROM OFFLINE"
    result = runtime.start(settings(replay(tmp_path, [bad, FINAL])))
    assert result.status == "failed" and result.outcome.error == "offline failure"
    assert kinds(runtime.store.get(result.run_id).events)[-1] == "error"


def test_replay_running_out_is_an_error_event_keeping_the_trace(home, tmp_path):
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [ACT])))
    events = runtime.store.get(result.run_id).events
    assert result.status == "failed" and kinds(events) == ["thought", "action", "observation", "error"]
    assert events[-1].error_kind == "replay" and "ran out of replies" in events[-1].message
    assert result.outcome.llm_calls == 1 and result.outcome.decision is None


def test_llm_auth_error_ends_the_run_and_the_key_is_stored_nowhere(home, tmp_path):
    server = StandIn([(200, completion(ACT)),
                      (401, {"error": {"message": f"Incorrect API key provided: {KEY}"}})])
    try:
        runtime = make_runtime(home, llm_settings=LLMSettings(api_key=KEY, retry_base_s=0.001))
        result = runtime.start(settings("stand-in", base_url=server.url))
    finally:
        server.close()
    events = runtime.store.get(result.run_id).events
    assert result.status == "failed" and kinds(events) == ["thought", "action", "observation", "error"]
    assert events[-1].error_kind == "auth" and not events[0].llm.estimated
    assert events[0].llm.prompt_tokens == 11
    runtime.close()
    for path in home.iterdir():
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in json.dumps(runtime.store.export())


def test_non_planning_techniques_never_pause(home, tmp_path):
    result = make_runtime(home).start(settings(replay(tmp_path, [ACT, FINAL]), hitl="approve-every-plan"))
    assert result.status == "finished"


def test_reviews_are_validated_and_only_paused_runs_resume(home, tmp_path):
    runtime = make_runtime(home)
    done = runtime.start(settings(replay(tmp_path, [ACT, FINAL])))
    with pytest.raises(RunNotPaused):
        runtime.resume(done.run_id, Review.approve())
    with pytest.raises(ValueError, match="at least one step"):
        runtime.resume(done.run_id, Review.edit(["  "]))
    with pytest.raises(ValueError, match="unknown review mode"):
        runtime.start(settings(replay(tmp_path, [FINAL]), hitl="sometimes"))


def test_pause_approve_edit_reject_on_one_run(home, tmp_path):
    replies = [PLAN,
               "Re-plan: N\nCurrent step: Step 1: list the nodes and their value\n" + ACT,
               "Re-plan: Y\nPlan: [Step 1: compare, Step 2: answer]\nCurrent step: Step 1: compare\n" + ACT,
               "Re-plan: Y\nPlan: [Step 1: compare again, Step 2: answer]\nCurrent step: Step 1\n" + ACT
               + " WHERE local_value > 0",  # not the same query again: the loop guard would not run it
               "Re-plan: N\n" + FINAL]
    runtime = make_runtime(home)
    first = runtime.start(settings(replay(tmp_path, replies), "planrag", hitl="approve-every-plan"))
    assert first.status == "paused" and first.pause.kind == "plan"
    assert first.pause.plan == ["list the nodes", "choose"] and first.pause.old_plan == []
    edited = ["list the nodes and their value", "choose the best"]
    second = runtime.resume(first.run_id, Review.edit(edited, note="be precise"))
    assert second.status == "paused" and second.pause.kind == "replan" and second.pause.old_plan == edited
    third = runtime.resume(first.run_id, Review.reject("keep the plan"))
    assert third.status == "paused" and third.pause.plan == ["compare again", "answer"]
    done = runtime.resume(first.run_id, Review.approve())
    assert done.status == "finished" and done.outcome.plan == ["compare again", "answer"]
    events = runtime.store.get(first.run_id).events
    reviews = [(e.status, e.steps, e.proposed_steps, e.note) for e in events
               if e.kind == "plan" and e.origin == "analyst"]
    assert reviews == [("edited", edited, ["list the nodes", "choose"], "be precise"),
                       ("rejected", ["compare", "answer"], None, "keep the plan"),
                       ("approved", ["compare again", "answer"], None, "")]
    told = [e.text for e in events if e.kind == "observation" and "analyst" in e.text]
    assert "Step 1: list the nodes and their value" in told[0] and "keep the plan" in told[1]
    # the edit and the rejection dropped the actions of the replies proposing those plans
    assert done.outcome.actions == 2


def test_run_store_lists_filters_exports(home, tmp_path):
    runtime = make_runtime(home)
    a = runtime.start(settings(replay(tmp_path, [ACT, FINAL])))
    b = runtime.start(settings(replay(tmp_path, [ACT, "Final answer: lubeck"]), "singlerag"))
    store = runtime.store
    assert [r.id for r in store.list()] == [b.run_id, a.run_id]
    assert [r.id for r in store.list(technique="singlerag")] == [b.run_id]
    assert [r.id for r in store.list(correct=True)] == [a.run_id]
    assert store.list(status="finished", scenario="locating", limit=1)[0].id == b.run_id
    with pytest.raises(ValueError, match="cannot filter"):
        store.list(colour="red")
    record = store.get(a.run_id)
    assert record.settings.technique == "iterrag" and record.settings.llm.startswith("replay:/")
    assert record.outcome.final_answer.endswith("krakow.") and kinds(record.events)[-1] == "final"
    out = tmp_path / "runs.json"
    assert store.export_json(out, technique="iterrag") == 1
    assert json.loads(out.read_text())[0]["id"] == a.run_id
    store.delete(a.run_id)
    with pytest.raises(KeyError):
        store.get(a.run_id)
