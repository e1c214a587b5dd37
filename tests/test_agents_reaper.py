"""REAPER: the retrieval plan's parsing and ``#E`` substitution; the technique on real DQA questions (SQLite and
Ladybug) with replayed transcripts (tests/transcripts/reaper): one call for the plan and one for the answer, a
failing step with and without the re-plan, a malformed plan; reviews of its plans on a fake database."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.agents.runtime import AgentRuntime
from core.model.run_settings import Limits, Review, RunSettings
from core.techniques.reaper.plan import UnusableResult, parse_plan, parse_steps, substitute
from tests.test_agents_dqa import backend
from tests.test_agents_runtime import FakeBackend, make_runtime, replay, settings

TRANSCRIPTS = Path(__file__).parent / "transcripts" / "reaper"
KINDS = {"plan", "replan", "action", "observation", "thought", "final", "error"}


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def test_plan_forms_and_problems_are_read():
    text = """Here is the plan:
**Step 1:** the home node - #E1 = Relational DB[SELECT home_node FROM country WHERE country_name = "SWE"]
Step 2: its sources - #E2 = relational db("SELECT source FROM flow WHERE dest = #E1")
Step 3: Compare them and choose the best.
Step 4: in the graph - #E4 = Graph DB[MATCH (n) RETURN n]
Step 5: think - #E5 = Self-thinking[compare]
Step 6: a later result - #E6 = Relational DB[SELECT * FROM flow WHERE source IN (#E7)]
Step 7: again - #E2 = Relational DB[SELECT 1]
Step 8: unclosed - #E8 = Relational DB[SELECT 1
This plan first finds the home node."""
    steps = parse_plan(text, "sql")
    # Step 7 assigns #E2 again: read as a new result, with the next free label (issue 20)
    assert [s.label for s in steps] == [1, 2, None, 4, 5, 6, 9, 8]
    assert steps[0].purpose == "the home node" and steps[0].problem is None and steps[0].refs == []
    assert steps[1].query == "SELECT source FROM flow WHERE dest = #E1" and steps[1].tool == "Relational DB"
    assert steps[1].refs == [1] and steps[1].problem is None
    problems = [s.problem for s in steps[2:]]
    assert "runs no query" in problems[0] and "there is no Graph DB here" in problems[1]
    assert "Self-thinking cannot be a step" in problems[2] and "uses #E7, which no earlier step gives" in problems[3]
    assert problems[4] is None and "not closed with ']'" in problems[5]
    # ReWOO's form, a re-plan using a result of the plan before it
    rewoo = parse_plan("Plan: the sources\n#E3 = Graph DB[MATCH (a)-[:source]->(b) WHERE b.name = #E1 RETURN a.name]",
                       "cypher", known={1, 2})
    assert [(s.label, s.purpose, s.problem) for s in rewoo] == [(3, "the sources", None)]
    assert parse_plan("Thought: look\nAction: Relational DB\nAction input: SELECT 1", "sql") == []


def test_rendered_steps_parse_back():
    steps = parse_plan('Step 1: a - #E1 = Relational DB[SELECT x FROM t WHERE y = "[1]"]\n'
                       "Step 2: b - #E2 = Relational DB[SELECT z FROM u WHERE x IN (#E1)]", "sql")
    rendered = [s.render() for s in steps]
    assert rendered[1] == "b - #E2 = Relational DB[SELECT z FROM u WHERE x IN (#E1)]"
    assert parse_steps(rendered, "sql") == steps
    assert "runs no query" in parse_steps(["just look at it"], "sql")[0].problem


def result(columns, rows, total=None):
    return {"columns": columns, "rows": rows, "total_rows": len(rows) if total is None else total}


def test_references_are_substituted_as_literals():
    results = {"E1": result(["name"], [['say "hi"']]), "E2": result(["v"], [[1], [2.5], [None], [True]]),
               "E3": result(["a", "b"], [[1, 2]]), "E4": result(["a"], []), "E5": result(["a"], [[1]], total=300)}
    assert (substitute("SELECT 1 WHERE a = #E1 AND b = '#E1' AND c IN (#E2)", results, "sql")
            == 'SELECT 1 WHERE a = "say ""hi""" AND b = "say ""hi""" AND c IN (1, 2.5, NULL, TRUE)')
    assert substitute("WHERE n.a = #E1 AND n.b IN [#E2]", results, "cypher") == \
        'WHERE n.a = "say \\"hi\\"" AND n.b IN [1, 2.5, null, true]'
    for label, message in ((3, "has 2 columns"), (4, "has no rows"), (5, "300 rows, more than the 1 kept")):
        with pytest.raises(UnusableResult, match=message):
            substitute(f"SELECT #E{label}", results, "sql")


# --- on a fake database: reviews of the plan, a result a step cannot use -----------------------------------

PLAN = "Step 1: the nodes - #E1 = Relational DB[SELECT trade_node FROM trade_node]"
ANSWER = "Thought: I now know the answer.\nFinal answer: krakow"


def events_of(runtime, result_) -> list[dict]:
    return runtime.store.get(result_.run_id).events


def test_review_edit_is_checked_reject_asks_again_and_an_edit_runs(home, tmp_path):
    fake = FakeBackend()
    runtime = make_runtime(home, fake)
    second = "Step 1: the values - #E1 = Relational DB[SELECT trade_node, local_value FROM trade_node]"
    first = runtime.start(settings(replay(tmp_path, [PLAN, second, ANSWER]), "reaper", hitl="approve-every-plan"))
    assert first.status == "paused" and first.pause.kind == "plan" and first.pause.old_plan == []
    assert first.pause.plan == ["the nodes - #E1 = Relational DB[SELECT trade_node FROM trade_node]"]
    with pytest.raises(ValueError, match="the edited plan cannot run: step 1: it runs no query"):
        runtime.resume(first.run_id, Review.edit(["list the nodes with SELECT trade_node FROM trade_node"]))
    assert runtime.result(first.run_id).status == "paused" and fake.queries == []
    again = runtime.resume(first.run_id, Review.reject("take their values too"))
    assert again.status == "paused" and again.pause.plan[0].startswith("the values - #E1")
    edited = ["the values - #E1 = Relational DB[SELECT trade_node, local_value FROM trade_node WHERE local_value > 0]"]
    done = runtime.resume(first.run_id, Review.edit(edited, note="only valued nodes"))
    assert done.status == "finished" and done.outcome.correct is True and done.outcome.llm_calls == 3
    assert fake.queries == ["SELECT trade_node, local_value FROM trade_node WHERE local_value > 0"]
    events = events_of(runtime, done)
    reviews = [(e.status, e.note) for e in events if e.kind == "plan" and e.origin == "analyst"]
    assert reviews == [("rejected", "take their values too"), ("edited", "only valued nodes")]
    told = runtime.transcript(first.run_id)[-2]["content"]
    assert "The analyst edited your plan. Their note: only valued nodes." in told and "WHERE local_value > 0" in told


def test_a_paused_plan_resumes_after_a_restart(home, tmp_path):
    fake = FakeBackend()
    first = make_runtime(home, fake)
    paused = first.start(settings(replay(tmp_path, [PLAN, ANSWER]), "reaper", hitl="approve-every-plan"))
    first.close()
    second = make_runtime(home, fake)
    done = second.resume(paused.run_id, Review.approve())
    assert done.status == "finished" and done.outcome.llm_calls == 2 and fake.queries == [
        "SELECT trade_node FROM trade_node"]
    assert [e.llm.call for e in events_of(second, done) if e.llm] == [1, 2]


def test_approve_replans_pauses_only_at_the_replan(home, tmp_path):
    runtime = make_runtime(home)
    failing = "Step 1: the nodes - #E1 = Relational DB[SELEKT trade_node FROM trade_node]"
    replan = "Step 2: the nodes again - #E2 = Relational DB[SELECT trade_node FROM trade_node]"
    paused = runtime.start(settings(replay(tmp_path, [failing, replan, ANSWER]), "reaper", hitl="approve-replans"))
    assert paused.status == "paused" and paused.pause.kind == "replan"
    assert paused.pause.old_plan == [failing[len("Step 1: "):]] and paused.pause.plan == [replan[len("Step 2: "):]]
    done = runtime.resume(paused.run_id, Review.approve())
    assert done.status == "finished" and done.outcome.plan == paused.pause.old_plan + paused.pause.plan
    observations = [e for e in events_of(runtime, done) if e.kind == "observation"]
    assert [o.error_kind for o in observations] == ["syntax", None]


def test_a_result_a_step_cannot_use_is_an_error_observation(home, tmp_path):
    runtime = make_runtime(home)  # the fake database gives two columns
    plan = PLAN + "\nStep 2: their flows - #E2 = Relational DB[SELECT * FROM flow WHERE source IN (#E1)]"
    result_ = runtime.start(settings(replay(tmp_path, [plan, ANSWER]), "reaper", replan_on_failure=False))
    observations = [e for e in events_of(runtime, result_) if e.kind == "observation"]
    assert observations[1].error_kind == "reference" and "#E1 has 2 columns" in observations[1].text
    assert result_.outcome.llm_calls == 2 and result_.outcome.actions == 1


def test_at_the_call_limit_it_answers_without_replanning(home, tmp_path):
    runtime = make_runtime(home)
    failing = "Step 1: the nodes - #E1 = Relational DB[SELEKT trade_node FROM trade_node]"
    result_ = runtime.start(settings(replay(tmp_path, [failing, ANSWER]), "reaper", limits=Limits(max_llm_calls=2)))
    events = events_of(runtime, result_)
    assert [e.error_kind for e in events if e.kind == "error"] == ["limit"]
    assert result_.status == "finished" and result_.outcome.llm_calls == 2


def test_initial_plans_are_for_the_loop_techniques(home, tmp_path):
    with pytest.raises(ValueError, match="REAPER writes its own plan"):
        make_runtime(home).start(settings(replay(tmp_path, [PLAN]), "reaper", initial_plan=["look"]))


# --- on DQA --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dqa_runtime(tmp_path_factory, dqa_dir):
    runtime = AgentRuntime(tmp_path_factory.mktemp("reaper_home"))
    yield runtime
    runtime.close()


def run(runtime, scenario: str, language: str, transcript: str, **kw):
    spec = f"replay:{TRANSCRIPTS / transcript}.json"
    result_ = runtime.start(RunSettings(scenario, 1, backend(language), "reaper", spec, **kw))
    return result_, events_of(runtime, result_)


@pytest.mark.parametrize("language", ["sql", "cypher"])
def test_one_call_plans_and_one_answers(dqa_runtime, language):
    result_, events = run(dqa_runtime, "locating", language, f"locating_{language}")
    outcome = result_.outcome
    assert result_.status == "finished" and outcome.decision == "krakow" and outcome.correct is True
    assert outcome.llm_calls == 2 and outcome.actions == 4 and outcome.placement["rank"] == 1
    assert outcome.wall_s > 0 and len(outcome.plan) == 4
    assert {e.kind for e in events} <= KINDS and [e.llm.call for e in events if e.llm] == [1, 2]
    assert events[0].kind == "plan" and events[0].status == "adopted" and events[-1].kind == "final"
    actions = [e.query for e in events if e.kind == "action"]
    observations = [e for e in events if e.kind == "observation"]
    assert all(o.error is None and o.rows for o in observations)
    sources = [row[0] for row in observations[1].rows]
    assert set(sources) == {"krakow", "novgorod"}
    home_node = '= "baltic_sea"' if language == "sql" else '{name: "baltic_sea"}'
    listed = ", ".join(f'"{s}"' for s in sources)
    assert home_node in actions[1] and "#E" not in " ".join(actions)
    assert (f"IN ({listed})" if language == "sql" else f"IN [{listed}]") in actions[2]
    conversation = dqa_runtime.transcript(result_.run_id)
    assert [m["role"] for m in conversation] == ["system", "human", "ai", "human", "ai"]
    assert "#EN stands for" in conversation[0]["content"] and conversation[3]["content"].startswith("Observation: #E1")


def test_a_failed_step_is_replanned_once(dqa_runtime):
    result_, events = run(dqa_runtime, "building", "sql", "building_sql_failing")
    assert result_.outcome.decision == 1485 and result_.outcome.correct is True
    assert result_.outcome.llm_calls == 3 and result_.outcome.actions == 3
    observations = [(e.text.split(" ")[0], e.error_kind) for e in events if e.kind == "observation"]
    assert observations == [("#E1", None), ("#E2", "error"), ("#E3", "skipped"), ("#E4", None)]
    replan = next(e for e in events if e.kind == "replan")
    assert replan.replan and len(replan.old_plan) == 3 and replan.new_plan[0].startswith("Find the furniture")
    request = dqa_runtime.transcript(result_.run_id)[3]["content"]
    assert "#E2, #E3 gave no result. Re-plan" in request and "from Step 4 with #E4" in request


def test_without_replan_the_answer_comes_from_what_ran(dqa_runtime):
    result_, events = run(dqa_runtime, "building", "sql", "building_sql_failing_noreplan", replan_on_failure=False)
    assert result_.status == "finished" and result_.outcome.llm_calls == 2 and result_.outcome.decision is None
    assert "replan" not in {e.kind for e in events}
    assert [e.error_kind for e in events if e.kind == "observation"] == [None, "error", "skipped"]


def test_a_malformed_plan_is_a_clear_error_observation(dqa_runtime):
    result_, events = run(dqa_runtime, "locating", "cypher", "locating_cypher_malformed")
    assert (events[0].kind, events[0].steps) == ("plan", [])
    assert events[1].kind == "observation" and events[1].error_kind == "format"
    assert events[1].text.startswith("Your plan has no steps. Write each step as 'Step N: what it retrieves - #EN = "
                                        "Graph DB[Cypher query]'")
    assert result_.outcome.correct is True and result_.outcome.llm_calls == 3


def test_cli_runs_reaper(tmp_path, dqa_dir, monkeypatch, capsys):
    import core.cli.main as cli
    from core.config import settings as core_settings

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    spec = f"replay:{TRANSCRIPTS / 'building_sql_failing_noreplan.json'}"
    code = cli.main(["run", "--scenario", "building", "--question", "1", "--db", backend("sql"), "--technique",
                     "reaper", "--llm", spec, "--no-replan", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["llm_calls"] == 2 and report["status"] == "finished"


def test_a_step_identical_to_an_earlier_one_is_not_run_again(home, tmp_path):
    """Issue 29: REAPER re-ran a failed step identical to an earlier one (#E13 = #E7); the loop guard's note instead,
    the earlier result standing for the step (its error, or its rows for the steps that use it)."""
    fake = FakeBackend()
    runtime = make_runtime(home, fake)
    failing = ("Step 1: the nodes - #E1 = Relational DB[SELEKT trade_node FROM trade_node]\n"
               "Step 2: the values - #E2 = Relational DB[SELECT trade_node FROM trade_node]")
    replan = ("Step 3: the nodes again - #E3 = Relational DB[selekt  trade_node FROM trade_node]\n"
              "Step 4: the values again - #E4 = Relational DB[SELECT trade_node FROM trade_node]")
    done = runtime.start(settings(replay(tmp_path, [failing, replan, ANSWER]), "reaper"))
    assert fake.queries == ["SELEKT trade_node FROM trade_node", "SELECT trade_node FROM trade_node"]  # once each
    observations = [e for e in events_of(runtime, done) if e.kind == "observation"]
    assert [o.error_kind for o in observations] == ["syntax", None, "repeat", "repeat"]
    assert "not run: the same query as #E1, which gave: " in observations[2].text
    assert "not run: the same query as #E2" in observations[3].text and "krakow" in observations[3].text
    actions = [e for e in events_of(runtime, done) if e.kind == "action"]
    assert len(actions) == 2 and done.outcome.repeats == 2 and done.outcome.actions == 2
    assert done.status == "finished" and done.outcome.unconsulted is False
