"""The paper-faithful settings against the project's improved ones, with scripted transcripts on the built-in demo
(real SQLite and Ladybug databases): the exact messages sent in the ``paper`` prompt setting and in the
``improved`` one; no correction in the paper setting; REAPER's planner with and without its example plans."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from core.agents.runtime import AgentRuntime
from core.model.run_settings import Limits, RunSettings
from core.agents import paper_prompts
from core.techniques.reaper.examples import all_examples
from core.techniques.reaper.plan import parse_plan
from core.backends.cypher_dialect import LADYBUG_DIALECT_NOTE
from core.llm.client import open_llm

PLAN_ACT = ("Plan: [Step 1: find the nodes flowing into deccan, Step 2: choose the best]\nCurrent step: Step 1\n"
            "Thought: I need the nodes flowing into the home node.\nAction: Relational DB\n"
            "Action input: SELECT source FROM flow WHERE dest = 'deccan'")
FINAL = "Re-plan: N\nThought: I now know the answer.\nFinal answer: Allocate the merchant to doab."


class Recorder:
    """Opens the model as the runtime would, and keeps every call's messages and stop sequences."""

    def __init__(self):
        self.calls: list[tuple[list, list]] = []

    def __call__(self, spec, settings, skip=0):
        llm = open_llm(spec, settings, skip=skip)
        complete = llm.complete

        def recording(messages, stop, **kw):
            self.calls.append((list(messages), stop))
            return complete(messages, stop, **kw)

        llm.complete = recording
        return llm


def replay(tmp_path, replies: list[str]) -> str:
    path = tmp_path / f"replay{len(list(tmp_path.glob('replay*')))}.json"
    path.write_text(json.dumps(replies))
    return f"replay:{path}"


def run(tmp_path, replies, technique="planrag", db="sqlite", scenario="locating", **kw):
    recorder = Recorder()
    runtime = AgentRuntime(tmp_path / "home", llm_opener=recorder)
    try:
        settings = RunSettings(scenario, 1, db, technique, replay(tmp_path, replies), source="demo", **kw)
        result = runtime.start(settings)
        record = runtime.store.get(result.run_id)
    finally:
        runtime.close()
    return result, record, recorder.calls


def test_paper_setting_sends_the_question_and_the_scratchpad_in_one_message(tmp_path):
    result, record, calls = run(tmp_path, [PLAN_ACT, FINAL], prompts="paper")
    assert result.status == "finished" and result.outcome.decision == "doab" and result.outcome.correct
    assert record.settings.prompts == "paper"
    assert [(e.kind, getattr(e, "replan", None)) for e in record.events if e.kind in ("plan", "replan")] == [
        ("plan", None), ("replan", False)]  # the trace counts plans and re-plans as in the improved setting
    (first, stop1), (second, stop2) = calls
    assert stop1 == stop2 == ["Observation:"]
    assert [type(m) for m in first] == [type(m) for m in second] == [SystemMessage, HumanMessage]
    question = first[1].content
    assert question.startswith("Question: ") and question.endswith('profit on home node, "deccan".\n\n')
    observed = [e for e in record.events if e.kind == "observation"][0].text
    assert second[1].content == (f"{question}This was your previous work (but I haven't seen any of it! I only see "
                                 f"what you return as final answer):\n{PLAN_ACT}\nObservation:{observed}\n")
    system = first[0].content
    assert system == second[0].content
    assert system.split("\n\n")[0].endswith("access following databases multiple times: ")  # the authors' space
    assert ("Self thinking: \n            Useful for when there is no available tool.\n            , args: "
            "{{'tool_input': {{'type': 'string'}}}}" in system)
    assert "MUST be one of [Relational DB, Self thinking]." in system
    assert "Use the following Strict format:\n\nQuestion: the input question you must answer." in system
    assert "CREATE TABLE flow\n(\n    source    VARCHAR(30),\n" in system  # the authors' schema text


def test_improved_setting_sends_each_reply_and_observation_as_its_own_message(tmp_path):
    result, record, calls = run(tmp_path, [PLAN_ACT, FINAL])
    assert result.status == "finished" and record.settings.prompts == "improved"
    second, stop = calls[1]
    assert [type(m) for m in second] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert second[2].content == PLAN_ACT and second[3].content.startswith("Observation: ")
    assert stop == ["\nObservation:", "\nobservation:"] and "This was your previous work" not in str(second)
    assert "Self-thinking: Useful for" in second[0].content


def test_paper_graph_schema_lists_property_names_without_types_headings_or_dialect_note(tmp_path):
    act = ("Plan: [Step 1: list the nodes]\nCurrent step: Step 1\nThought: list them\nAction: Graph DB\n"
           "Action input: MATCH (t:Trade_node) RETURN t.name")
    _, _, paper = run(tmp_path, [act, FINAL], db="ladybug", prompts="paper")
    _, _, improved = run(tmp_path, [act, FINAL], db="ladybug")
    system, typed = paper[0][0][0].content, improved[0][0][0].content
    # the authors' schema text, as their template rendered it (its doubled braces halved)
    assert ("(n:Trade_node {name, local_value, is_inland, total_power, outgoing, ingoing});\n"
            "(m:Country {name, home_node, development});\n\n(Trade_node)-[r:source {flow}]->[Trade_node]\n"
            "(Country)-[NodeCountry{is_home, has_merchant,base_trading_power,calculated_trading_power}]->"
            "(Trade_node)\n, args:") in system
    assert "Nodes:" not in system and "STRING" not in system and "DOUBLE" not in system
    assert "Nodes:\n(:Trade_node {name: STRING" in typed
    note = LADYBUG_DIALECT_NOTE.strip().splitlines()[0]
    assert note in typed and note not in system  # the improved prompt carries the Ladybug dialect note


def test_paper_setting_adds_no_correction_and_the_improved_one_does(tmp_path):
    ramble = "I believe the answer depends on the flows into deccan."
    result, record, calls = run(tmp_path, [ramble, FINAL], prompts="paper")
    assert result.status == "failed" and len(calls) == 1
    error = [e for e in record.events if e.kind == "error"][-1]
    assert error.error_kind == "format" and "no correction" in error.message
    result, record, calls = run(tmp_path, [ramble, PLAN_ACT, FINAL])
    assert result.status == "finished" and len(calls) == 3
    sent = calls[1][0]  # the improved setting answers the ramble with a corrective observation
    assert [type(m) for m in sent[-2:]] == [AIMessage, HumanMessage] and sent[-2].content == ramble
    assert sent[-1].content.startswith("Observation: ") and len(sent[-1].content) > len("Observation: ")


def test_paper_setting_observes_an_unknown_tool_as_the_original_executor(tmp_path):
    wrong = "Thought: look\nAction: Spreadsheet\nAction input: list the nodes"
    result, _, calls = run(tmp_path, [wrong, "Thought: I now know the answer.\nFinal answer: doab"], "iterrag",
                           prompts="paper")
    assert result.status == "finished"
    assert calls[1][0][1].content.endswith(
        f"{wrong}\nObservation:Spreadsheet is not a valid tool, try one of [Relational DB, Self thinking].\n")


def test_paper_answer_prompt_for_singlerag_is_the_authors_answering_template(tmp_path):
    act = "Thought: look\nAction: Relational DB\nAction input: SELECT source FROM flow WHERE dest = 'deccan'"
    result, _, calls = run(tmp_path, [act, "Final answer: doab"], "singlerag", prompts="paper")
    assert result.status == "finished"
    assert calls[0][0][0].content.split("\n\n")[0].endswith("collect the data from the following databases: ")
    assert calls[1][0][0].content == paper_prompts.ANSWER_PROMPT and "Relational DB:" not in paper_prompts.ANSWER_PROMPT


def test_prompt_settings_are_checked():
    with pytest.raises(ValueError, match="unknown prompt setting 'exact'; choose one of improved, paper"):
        RunSettings("locating", 1, "sqlite", "planrag", "x", prompts="exact").validate()
    with pytest.raises(ValueError, match="unknown REAPER planner 'few'"):
        RunSettings("locating", 1, "sqlite", "reaper", "x", reaper_planner="few").validate()
    old = RunSettings("locating", 1, "sqlite", "planrag", "x").to_dict()
    for key in ("prompts", "reaper_planner", "top_p"):
        old.pop(key)
    assert RunSettings.from_dict(old).prompts == "improved"  # a run recorded before the setting existed


REAPER_PLAN = ("Step 1: the nodes flowing into deccan - #E1 = Relational DB[SELECT source FROM flow WHERE "
               "dest = 'deccan']")


@pytest.mark.parametrize("planner", ["examples", "zero-shot"])
def test_reaper_planner_prompt_with_and_without_example_plans(tmp_path, planner):
    result, record, calls = run(tmp_path, [REAPER_PLAN, "Final answer: doab"], "reaper", reaper_planner=planner)
    assert result.status == "finished" and record.settings.reaper_planner == planner
    system = calls[0][0][0].content
    example = all_examples()[("locating", "sql")][1]
    if planner == "examples":
        assert "An example of a good plan, for another question of this kind:\nQuestion: " in system
        assert example in system and system.index(example) < system.index("Write only the plan")
    else:
        assert "An example of a good plan" not in system and example not in system


@pytest.mark.parametrize("key", [("locating", "sql"), ("locating", "cypher"), ("building", "sql"),
                                 ("building", "cypher")])
def test_every_example_plan_parses_and_names_only_the_schema(key):
    scenario, language = key
    question, plan = all_examples()[key]
    steps = parse_plan(plan, language)
    assert steps and not [s.problem for s in steps if s.problem]
    assert "deccan" not in plan and "furniture" not in plan  # invented names, not a question's


def test_a_schema_the_scenario_does_not_give_is_laid_out_as_the_authors_texts_are():
    sql = "CREATE TABLE goods (goods_name VARCHAR(30), code INT);"
    assert paper_prompts.schema("sql", sql) == f"\n{sql}\n"
    graph = "(:Goods {name: STRING})\n(:Building {id: INT64})\n(:Goods)-[:Demand {max_demand: DOUBLE}]->(:Building)"
    assert paper_prompts.schema("cypher", graph) == ("\n(n:Goods {name});\n(m:Building {id});\n\n"
                                                     "(Goods)-[r:Demand {max_demand}]->[Building]\n")


ITER_ACT = "Thought: look\nAction: Relational DB\nAction input: SELECT source FROM flow"
ITER_FINAL = "Thought: I now know the answer.\nFinal answer: Allocate the merchant to nowhere."
REAPER_STEPS = "Step 1: the flows - #E1 = Relational DB[SELECT source, dest FROM flow]"


def _bench_replays(folder):
    folder.mkdir()
    for q in (1, 2):
        (folder / f"locating-{q}-sqlite-iterrag.json").write_text(json.dumps([ITER_ACT, ITER_ACT, ITER_FINAL]))
        (folder / f"locating-{q}-sqlite-reaper.json").write_text(json.dumps([REAPER_STEPS, ITER_FINAL]))
    return f"replay:{folder}"


def test_benchmark_records_the_setting_and_reports_it_beside_the_paper(tmp_path, dqa_dir, capsys):
    from core.benchmark import fidelity
    from core.benchmark.items import BenchError
    from core.benchmark.runner import Bench, BenchConfig
    from core.cli.main import main

    llm = _bench_replays(tmp_path / "replays")
    out = tmp_path / "out"
    args = ["bench", "--scenario", "locating", "--db", "sqlite", "--technique", "iterrag", "--technique", "reaper",
            "--questions", "1-2", "--llm", llm, "--out", str(out), "--prompts", "paper", "--no-cache"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "locating  sqlite   iterrag       prompts paper     0.0% [0.0–65.8], n=2  vs paper 37.5 of n=200 " \
           "(PlanRAG Table 5 (RDB); prompts paper (Figures 8-11), GPT-4, temperature 0, zero-shot)" in printed
    assert "  locating  sqlite   reaper        prompts paper, planner examples 0.0% [0.0–65.8], n=2  vs no paper " \
           "figure\n" in printed
    assert "REAPER's plan call beside IterRAG (per question):" in printed
    from core.benchmark.results import read_results

    results = read_results(out)
    iterrag = [r for r in results if r["technique"] == "iterrag"]
    reaper = [r for r in results if r["technique"] == "reaper"]
    assert {r["prompts"] for r in iterrag} == {"paper"} and {r["setting"] for r in iterrag} == {"prompts paper"}
    assert {r["reaper_planner"] for r in reaper} == {"examples"} and {r["prompts"] for r in reaper} == {"paper"}
    assert {r["setting"] for r in reaper} == {"prompts paper, planner examples"}  # REAPER's paper setting
    assert all(len(r["call_latencies_s"]) == r["llm_calls"] for r in results)
    comparison = (out / "report" / "paper_comparison.csv").read_text()
    assert "iterrag,replay:" in comparison and ",prompts paper,2,0,0.0,0.0,65.8,37.5,200,PlanRAG Table 5 (RDB)," in comparison
    cost = fidelity.planner_cost(results).set_index("technique")
    assert cost.loc["iterrag", "calls_per_question"] == 3 and cost.loc["reaper", "calls_per_question"] == 2
    assert cost.loc["reaper", "plan_call_latency_s"] is not None
    assert (out / "report" / "planner_cost.csv").exists()
    with pytest.raises(BenchError, match=r"other parameters \(prompts 'paper' -> None"):
        Bench(BenchConfig(["iterrag"], llm, scenario="locating", questions="1-2", out=out, dqa_root=dqa_dir))
    with pytest.raises(ValueError, match="unknown prompt setting"):
        Bench(BenchConfig(["iterrag"], llm, scenario="locating", questions="1-2", out=tmp_path / "o2",
                          dqa_root=dqa_dir, prompts="exact"))


def test_results_from_before_settings_were_recorded_read_as_the_old_defaults():
    from core.benchmark import fidelity

    old = [{"scenario": "locating", "db": "sqlite", "language": "sql", "technique": t, "model": "m", "correct": c,
            "llm_calls": n} for t, c, n in (("planrag", True, 4), ("reaper", False, 2))]
    table = fidelity.paper_comparison(old).set_index("technique")
    assert table.loc["planrag", "setting"] == "prompts improved" and table.loc["planrag", "paper"] == 64.5
    assert table.loc["reaper", "setting"] == "planner zero-shot" and pd.isna(table.loc["reaper", "paper"])
    cost = fidelity.planner_cost(old)
    assert list(cost["technique"]) == ["reaper"] and cost.loc[0, "plan_call_latency_s"] is None


def test_only_results_on_dqas_questions_stand_beside_the_papers_figure():
    from core.benchmark import fidelity

    rows = [{"set": qset, "source": source, "scenario": "locating", "db": "sqlite", "language": "sql",
             "technique": "planrag", "model": "m", "correct": True, "llm_calls": 4, "prompts": "paper"}
            for qset, source in (("DQA", "dqa"), ("demo", "demo"), ("fresh", "dqa"))]
    table = fidelity.paper_comparison(rows).set_index("set")
    assert table.loc["DQA", "paper"] == 64.5 and table.loc["DQA", "n"] == 1
    assert table.loc[["demo", "fresh"], "paper"].isna().all()  # a demo or generated set has other questions
    assert "vs no paper figure (set fresh: not the paper's questions)" in "\n".join(fidelity.summary_lines(rows))


def test_comparison_with_the_paper_has_n_and_interval_and_only_dqas_questions_get_the_paper_figure():
    """Issue 10: every accuracy with n and its 95% Wilson interval; a demo or generated set is not the paper's."""
    from core.benchmark import fidelity

    def items(qset, source, right):
        return [{"set": qset, "source": source, "scenario": "locating", "db": "sqlite", "language": "sql",
                 "technique": "planrag", "model": "m", "correct": c, "status": "error" if c is None else "finished"}
                for c in right]

    table = fidelity.paper_comparison(items("DQA", "dqa", [True, True, False, None])
                                      + items("fresh", "dqa", [True]) + items("demo", "demo", [True]))
    dqa, fresh, demo = table.to_dict("records")
    assert (dqa["n"], dqa["correct"], dqa["accuracy"], dqa["ci95_low"], dqa["ci95_high"]) == (4, 2, 50.0, 15.0, 85.0)
    assert (dqa["paper"], dqa["paper_n"]) == (64.5, 200)
    assert [fresh["set"], demo["set"]] == ["fresh", "demo"]
    assert all(pd.isna(r["paper"]) and pd.isna(r["paper_n"]) and r["n"] == 1 for r in (fresh, demo))
    lines = fidelity.summary_lines(items("fresh", "dqa", [True, False]))
    assert "50.0% [9.5–90.5], n=2  vs no paper figure (set fresh: not the paper's questions)" in lines[1]
    # issue 29: no REAPER run, no line on REAPER's plan call; no result (a budget-stopped run), no empty heading
    assert not any("REAPER" in line for line in lines)
    iterrag = [{**r, "technique": "iterrag"} for r in items("DQA", "dqa", [True])]
    assert not any("REAPER" in line for line in fidelity.summary_lines(iterrag))
    assert any("REAPER's plan call" in line for line in fidelity.summary_lines(
        iterrag + [{**r, "technique": "reaper"} for r in items("DQA", "dqa", [True])]))
    assert fidelity.summary_lines([]) == []


@pytest.mark.parametrize("usage", [True, False])
def test_the_paper_setting_sends_the_server_no_request_but_the_models(tmp_path, usage):
    """No window probe before the first call, no tokenizer request before each, nor after a reply whose usage the
    server did not report (the improved setting makes all three)."""
    from core.llm.client import LLMSettings
    from tests.stub_server import StubServer, completion, not_found, send_json

    pages = {"/props": {"default_generation_settings": {"n_ctx": 8192}}}
    reply = completion(FINAL) if usage else {k: v for k, v in completion(FINAL).items() if k != "usage"}
    server = StubServer({
        "GET *": lambda handler, body: (send_json(handler, 200, pages[handler.path]) if handler.path in pages
                                        else not_found(handler)),
        "POST /v1/chat/completions": lambda handler, body: send_json(handler, 200, reply),
        "POST *": {"tokens": [1, 2, 3]}})
    runtime = AgentRuntime(tmp_path / "home", llm_settings=LLMSettings(api_key=None))
    try:
        asked = {}
        for setting, limits in (("paper", None), ("paper", Limits(context_tokens=8192)), ("improved", None)):
            server.asked.clear()
            result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=server.url,
                                               source="demo", prompts=setting, **({"limits": limits} if limits else {})))
            assert result.status == "finished"
            asked[(setting, limits is None)] = list(server.asked)
    finally:
        runtime.close()
        server.close()
    assert asked[("paper", True)] == asked[("paper", False)] == [("POST", "/v1/chat/completions")]
    assert ("GET", "/props") in asked[("improved", True)] and ("POST", "/tokenize") in asked[("improved", True)]
