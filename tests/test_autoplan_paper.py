"""AutoPlan as the paper trains (scripted transcripts on the built-in demo, real SQLite): the three reflection calls
and the messages each is sent, the one-call form as an option; the success/failure reward and, as an option, the
richer one; nucleus sampling sent to the model during training and not at evaluation (a local stand-in server)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from core.config import settings as core_settings
from core.agents.runtime import AgentRuntime
from core.model.run_settings import RunSettings
from core.techniques.autoplan import prompts
from core.techniques.autoplan import train as train_module
from core.cli.autoplan import describe
from core.store.plans import PlanStore
from core.techniques.autoplan.train import TrainSettings, train
from core.llm.client import LLMSettings
from tests.stub_server import completion
from tests.test_llm import KEY, serve  # noqa: F401 - serve is a fixture
from core.model.outcome import RunOutcome

PLAN_ACT = ("Plan: [Step 1: find the nodes flowing into deccan, Step 2: choose the best]\nCurrent step: Step 1\n"
            "Thought: I need the nodes flowing into the home node.\nAction: Relational DB\n"
            "Action input: SELECT source FROM flow WHERE dest = 'deccan'")
FINAL = "Re-plan: N\nThought: I now know the answer.\nFinal answer: Allocate the merchant to doab."
SUMMARY = "1. The agent listed the nodes flowing into deccan. 2. It chose doab."
FLAWS = "Step 2 does not say how to compare the nodes."
REVISION = "Step 2: compare the nodes by the value a merchant would steer to the home node."
UPDATE = ("Plan: [Step 1: Find the nodes flowing into the home node, Step 2: Compare them by the value a merchant "
          "would steer to the home node]")
TRAINING = [PLAN_ACT, FINAL, SUMMARY, FLAWS, REVISION, UPDATE]


def replay(tmp_path, replies) -> str:
    path = tmp_path / "training.json"
    path.write_text(json.dumps(replies))
    return f"replay:{path}"


@pytest.fixture
def recorded(monkeypatch):
    """Every training call's messages (the runs' and the reflections')."""
    calls = []
    opened = train_module.open_llm

    def opener(spec, settings, **kw):
        llm = opened(spec, settings, **kw)
        complete = llm.complete
        llm.complete = lambda messages, stop, **kw: (calls.append(list(messages)), complete(messages, stop, **kw))[1]
        return llm

    monkeypatch.setattr(train_module, "open_llm", opener)
    return calls


def test_three_step_reflection_makes_three_calls_with_the_papers_prompts(tmp_path, recorded):
    settings = TrainSettings("locating", "sqlite", replay(tmp_path, TRAINING), [1], batch_size=1, iterations=1,
                             source="demo")
    (v1,) = train(settings, tmp_path)
    assert len(recorded) == 6  # the run's two calls, three reflection calls, the update
    summary, flaws, revision = recorded[2:5]
    assert [type(m) for m in summary] == [type(m) for m in flaws] == [SystemMessage, HumanMessage]
    assert summary[1].content.endswith("\n\nSummarize the interaction history in steps.")
    assert flaws[1].content.endswith("\n\n" + prompts.FLAW_PROMPT)
    experience = summary[1].content[:-len("Summarize the interaction history in steps.")]
    assert flaws[1].content.startswith(experience)  # both on the same history and reward
    assert "The plan the agent was given:\n(none yet" in experience and PLAN_ACT in experience
    assert "Outcome: success (reward 1): the agent's decision is the best one." in experience
    assert "rank" not in experience and "regret" not in experience  # the paper's reward only
    assert [type(m) for m in revision] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert revision[1].content == flaws[1].content and revision[2].content == FLAWS
    assert revision[3].content == prompts.REVISION_PROMPT
    (reflection,) = v1.reflections
    assert (reflection["summary"], reflection["flaws"], reflection["revision"]) == (SUMMARY, FLAWS, REVISION)
    assert reflection["reflection_calls"] == 3 and v1.history[0]["llm_calls"] == 6
    assert v1.steps[1].startswith("Compare them by the value")
    assert v1.trained_with["reflection"] == "three-step" and v1.trained_with["reward"] == "success"
    assert "reflection three-step (paper); reward success (paper: success/failure)" in describe(v1)
    update = recorded[5][1].content
    assert f"Summary: {SUMMARY}" in update and f"Revision: {REVISION}" in update and "Outcome: success" in update


def test_one_call_reflection_and_the_rich_reward_are_options(tmp_path, recorded):
    one_call = f"Summary: {SUMMARY}\nFlaws: {FLAWS}\nRevision: {REVISION}"
    settings = TrainSettings("locating", "sqlite", replay(tmp_path, [PLAN_ACT, FINAL, one_call, UPDATE]), [1],
                             batch_size=1, iterations=1, source="demo", reflection="one-call", reward="rich")
    (v1,) = train(settings, tmp_path)
    assert len(recorded) == 4 and v1.history[0]["llm_calls"] == 4
    message = recorded[2][1].content
    assert "Reflect on the run in three parts:" in message
    assert "Outcome: correct. The agent chose doab, the best decision (rank 1 of" in message and "regret" in message
    assert v1.reflections[0]["revision"] == REVISION and v1.reflections[0]["reflection_calls"] == 1
    assert "reward rich (label, rank, regret: not the paper)" in describe(v1)


def test_the_success_reward_says_failure_without_naming_the_best_decision():
    outcome = RunOutcome(decision="saxony", label="rheinland", correct=False,
                         placement={"rank": 2, "of": 5, "regret": 0.3})
    paper = prompts.reflection_steps(["a step"], "the run", outcome)
    assert "Outcome: failure (reward 0)" in paper["summary"] and "rheinland" not in paper["summary"]
    rich = prompts.reflection_steps(["a step"], "the run", outcome, reward="rich")
    assert "The best decision is rheinland." in rich["flaws"] and "rank 2 of 5" in rich["flaws"]


def _answers(*texts):
    return [(200, completion(t)) for t in texts]


def test_training_samples_and_evaluation_decodes_greedily(tmp_path, serve, monkeypatch):  # noqa: F811
    server = serve(*_answers(*TRAINING), *_answers(PLAN_ACT, FINAL))
    llm_settings = LLMSettings(model="stand-in", base_url=server.url, api_key=KEY, retry_base_s=0.001)
    settings = TrainSettings("locating", "sqlite", "stand-in", [1], batch_size=1, iterations=1, source="demo",
                             base_url=server.url)
    train(settings, tmp_path, llm_settings=llm_settings)
    training = [r["body"] for r in server.requests]
    assert len(training) == 6
    assert all(b["temperature"] == 1.0 and b["top_p"] == 0.9 for b in training)
    runtime = AgentRuntime(tmp_path, llm_settings=llm_settings)
    try:
        result = runtime.start(RunSettings("locating", 2, "sqlite", "autoplan", "stand-in", base_url=server.url,
                                           source="demo"))
        stored = runtime.store.get(result.run_id, events=False).settings
    finally:
        runtime.close()
    evaluation = [r["body"] for r in server.requests[6:]]
    assert len(evaluation) == 2 and all(b["temperature"] == 0 and "top_p" not in b for b in evaluation)
    assert stored.temperature == 0 and stored.top_p is None
    trained_runs = PlanStore(tmp_path / "plans").load("locating").history[0]["runs"]
    runtime = AgentRuntime(tmp_path)
    try:
        run = runtime.store.get(trained_runs[0], events=False).settings
    finally:
        runtime.close()
    assert (run.temperature, run.top_p) == (1.0, 0.9)  # the training's runs record their sampling


def test_greedy_training_is_a_command_line_option(tmp_path, serve, monkeypatch, capsys):  # noqa: F811
    from core.cli.main import main

    server = serve(*_answers(*TRAINING))
    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code = main(["autoplan", "train", "--scenario", "locating", "--db", "sqlite", "--source", "demo", "--train", "1",
                 "--batch", "1", "--iterations", "1", "--llm", "stand-in", "--base-url", server.url, "--greedy",
                 "--max-reply-tokens", "321"])
    assert code == 0, capsys.readouterr().err
    assert all(r["body"]["temperature"] == 0 and "top_p" not in r["body"] for r in server.requests)
    assert {r["body"].get("max_tokens") for r in server.requests} == {321}  # the server limits are flags here too
    plan = PlanStore(tmp_path / "plans").load("locating")
    assert (plan.trained_with["temperature"], plan.trained_with["top_p"]) == (0.0, None)
    assert "sampling temperature 0 (not as the paper)" in describe(plan)


def test_training_refuses_a_bad_server_limit(tmp_path, monkeypatch, capsys):
    from core.cli.main import main

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    with pytest.raises(SystemExit) as refused:
        main(["autoplan", "train", "--scenario", "locating", "--db", "sqlite", "--source", "demo", "--train", "1",
              "--batch", "1", "--iterations", "1", "--llm", "replay:x.json", "--llm-timeout", "nan"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "error: argument --llm-timeout: the model timeout (seconds) must be a number from 1.0 to 3,600.0, not 'nan'")


@pytest.mark.parametrize("change,message", [({"reflection": "two-step"}, "unknown reflection"),
                                            ({"reward": "regret"}, "unknown reward"),
                                            ({"top_p": 1.5}, "top_p must be above 0")])
def test_the_papers_training_settings_are_checked(change, message):
    settings = TrainSettings("locating", "sqlite", "replay:x.json", [2, 3], batch_size=2, **change)
    with pytest.raises(ValueError, match=message):
        settings.validate()


#: A paper-setting experience run from the empty plan X_0 acts as AutoPlan's agent: thought, action, formalizing.
PAPER_RUN = ["I need the nodes flowing into deccan.", "query the flows",
             "Action: Relational DB\nAction input: SELECT source FROM flow WHERE dest = 'deccan'",
             "Doab sends the most.", "answer doab", "Final answer: Allocate the merchant to doab."]


def test_experience_can_be_collected_with_the_papers_prompts(tmp_path, recorded):
    settings = TrainSettings("locating", "sqlite", replay(tmp_path, PAPER_RUN + TRAINING[2:]), [1], batch_size=1,
                             iterations=1, source="demo", prompts="paper")
    (v1,) = train(settings, tmp_path)
    assert len(recorded) == 6 + 4  # iteration 1 (the empty plan) already three calls a step
    fourth_run_call = recorded[3]  # the second step's thought call
    assert [type(m) for m in fourth_run_call] == [SystemMessage, HumanMessage]
    assert "This was your previous work" in fourth_run_call[1].content
    assert [type(m) for m in recorded[2]] == [HumanMessage]  # the formalizer's call
    assert v1.trained_with["prompts"] == "paper"
    runtime = AgentRuntime(tmp_path)
    try:
        assert runtime.store.get(v1.history[0]["runs"][0], events=False).settings.prompts == "paper"
    finally:
        runtime.close()


def test_the_learned_plans_page_shows_the_training_setting(tmp_path, monkeypatch):
    from tests.page_app import isolate, open_page, shown

    home = isolate(monkeypatch, tmp_path)
    settings = TrainSettings("locating", "sqlite", replay(tmp_path, TRAINING), [1], batch_size=1, iterations=1,
                             source="demo")
    (v1,) = train(settings, home)
    at = open_page("pages/plans.py", question_ref=None)
    assert not at.exception
    assert any("Trained with sampling temperature 1, top-p 0.9 (as the paper); reflection three-step (paper)"
               in shown(c.value) for c in at.caption)
    versions = at.dataframe[0].value
    assert list(versions["batch accuracy"]) == [f"{v1.history[-1]['correct']} of 1 "
                                                f"({100 * v1.history[-1]['correct']:.0f}%)"]


def test_paper_setting_reflects_on_the_task_description_and_updates_with_the_papers_inputs(tmp_path, recorded):
    from core.techniques.autoplan import follow

    steps = [("Step 1: the inflows.", "sql", "Action: SQL\nAction input: SELECT source FROM flow"),
             ("Again.", "x", "Action: Relational DB\nAction input: SELECT x FROM flow"),
             ("Again.", "x", "Action: Relational DB\nAction input: SELECT x FROM flow"),
             ("Done.", "answer", "Final answer: Allocate the merchant to doab.")]
    replies = [text for step in steps for text in step] + [SUMMARY, FLAWS, REVISION, UPDATE]
    settings = TrainSettings("locating", "sqlite", replay(tmp_path, replies), [1], batch_size=1, iterations=1,
                             source="demo", prompts="paper")
    (v1,) = train(settings, tmp_path)
    assert len(recorded) == 16 and v1.trained_with["prompts"] == "paper"
    run_system = recorded[0][0].content
    observed = recorded[9][1].content  # the last step's thought call: its scratchpad, no note on the repeated error
    assert "SQL is not a valid tool, try one of [Relational DB, Self thinking]." in observed
    assert observed.count("An exception occured: ") == 2 and "same error" not in observed
    assert all(not isinstance(m[0], SystemMessage) for m in recorded[12:16])  # equations 6-9: no system message
    summary, flaws, revision, update = (m[-1].content for m in recorded[12:16])
    history = summary.removesuffix("Summarize the interaction history in steps.")
    assert history.startswith(f"{run_system}\n\nQuestion: ")  # H: the task description, the history; no headings
    assert "Action: SQL" in history and history.endswith("Outcome: success (reward 1): the agent's decision is the "
                                                         "best one.\n\n")
    table2 = json.loads((Path(__file__).parent / "data" / "autoplan_paper_prompts.json").read_text(encoding="utf-8"))
    assert summary == history + table2["Summary-prompt"]  # Table 2's words, kept as test data
    assert flaws == history + table2["Flaw-prompt"] and revision == table2["Rev-prompt"]
    assert [type(m) for m in recorded[14]] == [HumanMessage, AIMessage, HumanMessage]  # after the flaws' exchange
    question = recorded[0][1].content.split("\n\n" + "Identify which step")[0].removesuffix("\n\n")
    assert update == "\n\n".join([question, SUMMARY, FLAWS, REVISION, table2["Upd-prompt"],
                                   prompts.PLAN_FORMAT])  # equation 9 with X_0 empty: the plan nowhere twice
    assert "rewrite the current game plan" in update and "Outcome" not in update
    runtime = AgentRuntime(tmp_path)
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(["I am at step 2.", "answer", FINAL]))  # AutoPlan's thought, action, formalizing
    try:
        result = runtime.start(RunSettings("locating", 2, "sqlite", "autoplan", f"replay:{path}", source="demo",
                                           prompts="paper"))
        system = runtime.transcript(result.run_id)[0]["content"]
        events = runtime.store.get(result.run_id).events
    finally:
        runtime.close()
    assert result.status == "finished"  # thought, action, formalizing: tests/test_paper_exact.py has the messages
    assert [e.text for e in events if e.kind == "thought"] == ["I am at step 2.",
                                                                     "Action: answer (to be formalized)"]
    assert follow.THOUGHT_PROMPT not in system  # it ends each thought call's message instead
    plan_part = system.split("\n\n")[-2]  # before the suffix: the learned plan
    assert plan_part.startswith("A plan for questions of this kind:") and "adapting" not in system
    assert "Step 2: Compare them by the value a merchant would steer to the home node" in plan_part


def test_paper_setting_takes_a_reflection_whole(tmp_path, recorded):
    """The reflection and update calls send no stop sequence: the paper setting keeps a reply as the server returned
    it, an ``Observation:`` line and trailing whitespace too (the flaws' reply goes back whole in the revision
    call's exchange)."""
    summary = "1. The agent queried the flows.\nObservation: deccan's inflows.\n2. It chose doab.\n"
    flaws = "Observation: Step 2 does not say how to compare the nodes.\n\n"
    run = ["Done.", "answer", "Final answer: Allocate the merchant to doab."]
    settings = TrainSettings("locating", "sqlite", replay(tmp_path, run + [summary, flaws, REVISION, UPDATE]), [1],
                             batch_size=1, iterations=1, source="demo", prompts="paper")
    train(settings, tmp_path)
    update, exchange = recorded[-1][-1].content, recorded[-2]
    assert summary.strip() in update and flaws.strip() in update
    assert exchange[1].content == flaws


def test_paper_training_sends_the_server_no_request_but_the_models(tmp_path):
    """Training in the paper setting, with a context window to keep to, against a server that reports no usage: no
    tokenizer request before a run's call nor after any reply (its runs and its reflections share one model)."""
    from core.model.run_settings import Limits
    from tests.stub_server import StubServer, not_found, send_json

    replies = iter(["Step 1.", "answer", "Final answer: Allocate the merchant to doab.",
                    SUMMARY, FLAWS, REVISION, UPDATE])

    def answer(handler, body):
        send_json(handler, 200, {k: v for k, v in completion(next(replies)).items() if k != "usage"})

    server = StubServer({"GET *": lambda handler, body: not_found(handler), "POST /v1/chat/completions": answer,
                         "POST *": {"tokens": [1, 2, 3]}})
    try:
        settings = TrainSettings("locating", "sqlite", "stand-in", [1], batch_size=1, iterations=1, source="demo",
                                 base_url=server.url, prompts="paper", limits=Limits(context_tokens=8192))
        train(settings, tmp_path, llm_settings=LLMSettings(model="stand-in", base_url=server.url, api_key=None,
                                                           retry_base_s=0.001))
    finally:
        server.close()
    assert server.asked == [("POST", "/v1/chat/completions")] * 7
