"""Every count of a run agrees across its views (issue 43 section 2): the Run page's live counter and plan box fold
the run's events (core.analysis.trace.Trace), its outcome metrics and the History and Compare tables read its stored
outcome; for runs stopped, interrupted (their process stopping), resumed and branched, the outcome's LLM calls,
tokens and cost are those of the fold."""
from __future__ import annotations

import threading

import pytest

from core.agents.guards import call_cost
from core.analysis.summary import compare_row, outcome_row
from core.analysis.trace import Trace
from core.llm.client import ChatLLM
from core.store.runs import RunRecord
from tests.test_agents_runtime import ACT, FINAL, make_runtime, settings
from tests.test_run_control import Hanging

pytestmark = pytest.mark.usefixtures("store_engine")  # every test on both engines (conftest)
PRICE = [2.0, 8.0]  # USD per 1M prompt and completion tokens


def agree(record: RunRecord) -> None:
    """The run's counts as each view shows them are one."""
    trace = Trace.of(record.events)
    o = record.outcome
    counter = (trace.llm_calls, trace.prompt_tokens + trace.completion_tokens,
               call_cost(PRICE, trace.prompt_tokens, trace.completion_tokens))  # the live counter, the plan box
    metrics = (o.llm_calls, o.tokens.total, o.cost_usd)  # the outcome's metrics
    history = outcome_row(record)
    compare = compare_row(record)
    assert counter[:2] == metrics[:2] == (history["LLM calls"], history["tokens"]) == (compare["LLM calls"],
                                                                                      compare["tokens"])
    assert counter[2] == pytest.approx(metrics[2])
    assert (o.tokens.prompt, o.tokens.completion) == (trace.prompt_tokens, trace.completion_tokens)
    assert trace.llm_calls == len({u.call for u in trace.usage})  # no call counted twice


def test_counts_agree_for_runs_stopped_interrupted_resumed_and_branched(tmp_path, monkeypatch):
    release = threading.Event()

    def opener(spec, llm_settings, skip=0):  # a new connection to the server each time the run is driven
        return ChatLLM(Hanging(messages=iter([ACT, FINAL][skip:]), release=release, answers=1 - skip), "hanging",
                       estimate_usage=True)

    runtime = make_runtime(tmp_path / "home", llm_opener=opener)
    monkeypatch.setattr(runtime, "price", lambda llm: PRICE)
    store = runtime.store

    def driven(run_id: str, then) -> None:
        """Start ``run_id``; once its second call hangs, ``then()`` (a stop, an interrupt)."""
        events = []
        worker = threading.Thread(target=runtime.start, args=(settings("stub", "iterrag"),),
                                  kwargs={"on_event": events.append, "run_id": run_id})
        worker.start()
        while not any(e.kind == "observation" for e in events):
            worker.join(0.05)
        then()
        worker.join(30)
        assert not worker.is_alive()

    driven("stopped", lambda: runtime.stop("stopped"))
    stopped = store.get("stopped")
    assert stopped.status == "stopped"
    agree(stopped)

    driven("interrupted", lambda: runtime.interrupt_all("the server stopped"))
    interrupted = store.get("interrupted")
    assert interrupted.status == "interrupted" and interrupted.events[-1].message == "the server stopped"
    runtime._interrupting = ""  # the next process: it takes work again
    release.set()
    for run_id in ("stopped", "interrupted"):  # resumed from their last checkpoint
        assert runtime.proceed(run_id).status == "finished"
        agree(store.get(run_id))

    branch = runtime.branch("interrupted", 2, note="look again")
    assert branch.status == "finished"
    agree(store.get(branch.run_id))
