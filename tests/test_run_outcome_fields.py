"""What a run's outcome says, everywhere it goes (issue 45 items 2, 5, 6): ``core run --json`` prints every field of
the typed run outcome; an abandoned attempt's tokens count in the run's figures and budgets, marked as such; a
final answer repeated after the "not queried yet" note counts once and ends the run answered without consulting."""
from __future__ import annotations

import json

import pytest

import core.cli.main as cli_module
from core.model.outcome import RunOutcome
from core.analysis.trace import Trace
from core.llm.client import LLMSettings
from tests.hostile_stub import PacedStream
from tests.test_agents_runtime import ACT, FINAL, make_runtime, replay, settings

UNQUERIED = "Thought: I now know the answer.\nFinal answer: krakow"


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def _cli_run(home, monkeypatch, capsys, llm: str, *extra: str) -> dict:
    import core.agents.runtime as agents

    monkeypatch.setattr(agents, "AgentRuntime", lambda llm_settings: make_runtime(home, llm_settings=llm_settings))
    args = ["run", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--technique", "singlerag",
            "--llm", llm, "--json", *extra]
    cli_module.main(args)
    return json.loads(capsys.readouterr().out)


def test_core_run_json_holds_every_field_of_the_run_outcome(home, tmp_path, monkeypatch, capsys):
    """The issue's repro: two replies answering without a query. ``correct: true`` alone hid that it never
    queried; every outcome field is printed now, ``unconsulted`` among them."""
    report = _cli_run(home, monkeypatch, capsys, replay(tmp_path, [UNQUERIED] * 2))
    assert set(RunOutcome().to_dict()) <= set(report)
    assert report["correct"] is True and report["unconsulted"] is True and report["actions"] == 0
    assert (report["repeats"], report["no_decision"]) == (0, False)
    assert report["tokens"]["failed_attempts"] == 0


@pytest.mark.parametrize("technique, first", [("singlerag", UNQUERIED), ("iterrag", UNQUERIED),
                                              ("planrag", "Plan: [Step 1: decide]\nCurrent step: Step 1: decide\n"
                                                          + UNQUERIED)])
def test_a_final_answer_repeated_after_the_note_counts_once_and_ends_the_run(home, tmp_path, technique, first):
    """Improved setting: the first unqueried answer gets the note, once; the same reply again is taken as the
    answer, answered without consulting, not a repeat the loop guard counts."""
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [first, first, first]), technique))
    events = runtime.store.get(result.run_id).events
    notes = [e for e in events if getattr(e, "error_kind", None) == "unqueried"]
    assert result.status == "finished" and len(notes) == 1
    assert result.outcome.unconsulted and result.outcome.repeats == 0
    assert [e.kind for e in events].count("final") == 1 and result.outcome.llm_calls == 2
    runtime.close()


def test_an_abandoned_attempts_tokens_count_in_the_run_and_its_budget(home):
    """Call 1's first attempt goes silent mid-reply (abandoned at the idle limit); its retry answers. The run's
    tokens hold what the abandoned attempt spent, marked as spent on failed attempts (the outcome, the trace,
    the call's usage)."""
    server = PacedStream([[(0.0, "Thought: look\n"), (30, "more")], [(0.0, ACT)], [(0.0, FINAL)]])
    try:
        runtime = make_runtime(home, llm_settings=LLMSettings(api_key=None, timeout_s=0.3, max_retries=1,
                                                             retry_base_s=0.01))
        result = runtime.start(settings("stand-in", base_url=server.url))
        events = runtime.store.get(result.run_id).events
        runtime.close()
    finally:
        server.close()
    assert result.status == "finished"
    first = next(e.llm for e in events if e.llm)
    assert first.failed_prompt_tokens == 100 and first.failed_completion_tokens == 4  # 14 characters read
    trace = Trace.of(events)
    assert trace.failed_tokens == 104 and trace.prompt_tokens == 100 * 3 and trace.completion_tokens == 10 * 2 + 4
    tokens = result.outcome.tokens
    assert tokens.failed_attempts == 104 and tokens.total == trace.prompt_tokens + trace.completion_tokens


def test_the_outcome_keeps_its_json_shape_and_reads_older_rows():
    """RunOutcome is stored as ``to_dict()``: the keys and JSON types of the dict it replaced, read back equal; a
    row of an older version (only its error, or without the later fields) reads with defaults."""
    stored = {"decision": 2677, "mentions": [2677], "correct": True, "label": 2677, "grade_status": "decided",
              "grade_reason": "2677: named", "best_group": False,
              "placement": {"rank": 1, "of": 91, "regret": 0.0, "gain": 1.5, "tied": 4},
              "final_answer": "Raise building 2677.", "error": None, "llm_calls": 2, "actions": 1,
              "plan": ["look", "decide"], "wall_s": 1.25, "no_decision": False, "unconsulted": False,
              "cost_usd": None, "limit": None, "repeats": 0,
              "tokens": {"prompt": 10, "completion": 5, "total": 15, "estimated": True, "failed_attempts": 0}}
    outcome = RunOutcome.from_dict(json.loads(json.dumps(stored)))
    assert outcome.to_dict() == stored and list(outcome.to_dict()) == list(stored)
    assert (outcome.tokens.total, outcome.placement["tied"], outcome.answered) == (15, 4, True)
    old = RunOutcome.from_dict({"error": "no model"})
    assert (old.error, old.decision, old.llm_calls, old.tokens.total, old.answered) == ("no model", None, 0, 0, False)
    assert RunOutcome.from_dict({"decision": "krakow", "correct": True}).grade_status is None
    assert RunOutcome.from_dict(None) is None
