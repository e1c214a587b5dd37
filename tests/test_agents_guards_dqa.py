"""The loop guard, corrections and the no-answer check on real DQA data (Locating 1) with scripted transcripts
(tests/transcripts/guards, hand-written after what small local models did in issues 19 and 20), on SQLite and
Ladybug."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.agents.runtime import AgentRuntime
from core.model.run_settings import Limits, RunSettings
from core.backends.registry import unavailable
from tests.conftest import require

GUARDS = Path(__file__).parent / "transcripts" / "guards"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory, dqa_dir):
    runtime = AgentRuntime(tmp_path_factory.mktemp("guards_home"))
    yield runtime
    runtime.close()


def run(runtime, db: str, technique: str, transcript: str, **kw):
    reason = unavailable(db)
    if reason:
        require(db, reason)
    result = runtime.start(RunSettings("locating", 1, db, technique, f"replay:{GUARDS / transcript}", **kw))
    return result, runtime.store.get(result.run_id).events


def test_iterrag_sending_the_same_failing_query_ends_stuck_after_three_repeats(runtime):
    result, events = run(runtime, "sqlite", "iterrag", "locating_sql_iterrag_loop.json")
    # of the 20 the loop used in the issue: 4, and the one request for the final answer (the loop answers it with
    # its query again, so the run ends stuck with no answer)
    assert result.status == "stuck" and result.outcome.llm_calls == 5
    assert sum(e.kind == "action" for e in events) == 1  # the query ran once
    first = next(e for e in events if e.kind == "observation")
    assert "no such column: T1.local_value" in first.error
    repeat = next(e for e in events if getattr(e, "error_kind", None) == "repeat")
    assert "no such column: T1.local_value" in repeat.text and "LLM call 1" in repeat.text
    assert result.outcome.error.startswith("the agent repeated itself 3 times")


def test_a_higher_repeat_limit_lets_the_loop_go_on_longer(runtime):
    result, _ = run(runtime, "sqlite", "iterrag", "locating_sql_iterrag_loop.json", limits=Limits(max_repeats=5))
    assert result.status == "stuck" and result.outcome.llm_calls == 7


def test_ladybug_queries_in_the_action_line_and_a_bare_replan_y_recover(runtime):
    result, events = run(runtime, "ladybug", "planrag", "locating_cypher_planrag_recover.json")
    assert result.status == "finished" and result.outcome.decision == "krakow"
    actions = [e for e in events if e.kind == "action"]
    assert [a.tool for a in actions] == ["Graph DB", "Graph DB"]
    assert "calculated_trading_power" in actions[1].query
    told = [e.text for e in events if e.kind == "observation" and e.error_kind == "format"]
    assert len(told) == 1 and "you answered Re-plan: Y but wrote no new Plan" in told[0]
    assert all(not e.error for e in events if e.kind == "observation" and e.error_kind != "format")


def test_reaper_bare_steps_multiline_queries_and_a_renumbered_replan_run(runtime):
    result, events = run(runtime, "sqlite", "reaper", "reaper_locating_sql_bare.json")
    plan = next(e for e in events if e.kind == "plan").steps
    assert plan[1] == "the nodes flowing into it - #E2 = Relational DB[SELECT source\n  FROM flow\n  WHERE dest = #E1]"
    replan = next(e for e in events if e.kind == "replan").new_plan
    assert replan[0].startswith("their values again - #E4 = Relational DB[")  # #E1 again: a new result
    queries = [e.query for e in events if e.kind == "action"]
    assert len(queries) == 4 and 'WHERE dest = "baltic_sea"' in queries[1]
    said = [e.text for e in events if e.kind == "observation" and e.error_kind == "format"]
    assert any("not a final answer (it has replan)" in t for t in said)  # Re-plan: Y is not the final answer
    assert result.status == "finished" and result.outcome.decision == "krakow"


def test_core_run_takes_the_limits_and_says_the_run_was_stuck(tmp_path, dqa_dir):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "PLANRAG_HOME": str(tmp_path), "DQA_DIR": str(dqa_dir)}
    args = [sys.executable, "-m", "core", "run", "--scenario", "locating", "--question", "1", "--db", "sqlite",
            "--technique", "iterrag", "--llm", f"replay:{GUARDS / 'locating_sql_iterrag_loop.json'}"]
    done = subprocess.run([*args, "--max-repeats", "2"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("stuck: the agent repeated itself 2 times (last: the same action as at LLM call 1: SELECT")
    assert last.endswith("asked once for its final answer, it gave none (your reply is not a final answer (it has "
                         "action, action input)); 4 LLM calls, " + last.rsplit(", ", 1)[1])
    bad = subprocess.run([*args, "--max-cost", "-1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "argument --max-cost: the cost limit (USD) must be a number from 0.0 to" in bad.stderr
