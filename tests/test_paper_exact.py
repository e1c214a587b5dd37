"""The exact messages the ``paper`` prompt setting sends, technique by technique, for scripted conversations on the
built-in demo's Locating question on a real Ladybug graph (the figures' GDB case) and SQLite: each system prompt
checked against the text of the PlanRAG paper's Figures 8-11 (transcribed below, their template's doubled braces
rendered), each user message against the original implementation's form; a non-answer, a repeated error and an
invalid tool get nothing the original did not send."""
from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from core.agents.runtime import AgentRuntime
from core.model.run_settings import Limits, RunSettings
from core.agents import paper_prompts
from tests.test_paper_settings import Recorder

#: The figures' "Tool descriptions" part, rendered (the Locating GDB case).
FIGURE_TOOLS = (
    "Graph DB: Useful for when you need to collect the data that follows the following schema (You MUST generate a "
    "Cypher query statement to interact with this tool):\n"
    "(n:Trade_node {name, local_value, is_inland, total_power, outgoing, ingoing});\n"
    "(m:Country {name, home_node, development});\n"
    "(Trade_node)-[r:source {flow}]->[Trade_node]\n"
    "(Country)-[NodeCountry{is_home, has_merchant, base_trading_power, calculated_trading_power}]->(Trade_node), "
    "args: {{'tool_input': {{'type': 'string'}}}}\n"
    "Self thinking: Useful for when there is no available tool., args: {{'tool_input': {{'type': 'string'}}}}")
ACTION_LINES = ("Action: a suitable database name, MUST be one of ['Graph DB', 'Self-thinking'].\n"
                "Action input: a syntactically correct query statement only, MUST be written by Cypher query "
                "language.\n")
ANSWER_LINES = "Thought: I now know the answer.\nFinal answer: the final answer to the question based on the observed data."
SUFFIX = "Begin! Keep in mind that Your response MUST follow the valid format above."
FIGURE_8 = "\n\n".join([
    "You are a decision-making agent answering a given question.\nYou should collect the data to answer the question:",
    FIGURE_TOOLS,
    "Use the following Strict format:\n\nQuestion: the input question you must answer.\nThought: you should always "
    "think about what to do.\n" + ACTION_LINES + "Observation: the result of the action.\n" + ANSWER_LINES,
    SUFFIX])
FIGURE_9 = "\n\n".join([
    "You are a decision-making agent answering a given question.\nYou have already collected the data to answer the "
    "question.\nIndeed, you should make your Final answer immediately.:",
    FIGURE_TOOLS,
    "Use the following Strict format:\n\nFinal answer: the final answer to the question based on the observed data.",
    "Begin!"])
FIGURE_10 = "\n\n".join([
    "You are a decision-making agent answering a given question.\nYou should collect the data to answer the question."
    "\nKeep in mind that the question can require to access following databases multiple times:",
    FIGURE_TOOLS,
    "Use the following Strict format:\n\nQuestion: the input question you must answer.\nThought: you should always "
    "think about what to do.\n" + ACTION_LINES + "Observation: the result of the action.\n... (a process of Thought, "
    "Action, Action input, and Observation can repeat together N times)\n" + ANSWER_LINES,
    SUFFIX])
FIGURE_11 = "\n\n".join([
    "You are a decision-making agent answering a given question.\nYou should collect the data to answer the question."
    "\nTo this end, firstly, you need to plan which data would be needed in what order.\nKeep in mind that the "
    "question can require to access following databases multiple times:",
    FIGURE_TOOLS,
    "Use the following Strict format:\n\nQuestion: the input question you must answer.\nPlan: [Step 1: requirement 1, "
    "Step 2: requirement 2, ..., Step N: requirement N].\nCurrent step: the current Step in the Plan.\nThought: you "
    "should always think about the Current step.\n" + ACTION_LINES + "Observation: the data from the database.\n"
    "Re-plan: respond with 'Y' and change your Plan if you think a current Plan is not helpful, otherwise respond "
    "with 'N' and continue a process based on the current Plan.\n... (a process of Plan, Current step, Thought, "
    "Action, Action input, Observation, and Re-plan can repeat N times)\n" + ANSWER_LINES,
    SUFFIX])
#: PlanRAG w/o RP has no figure: Figure 11 without its Re-plan line, with the authors' code's repeat line.
NORP = FIGURE_11.replace(
    "Re-plan: respond with 'Y' and change your Plan if you think a current Plan is not helpful, otherwise respond "
    "with 'N' and continue a process based on the current Plan.\n... (a process of Plan, Current step, Thought, "
    "Action, Action input, Observation, and Re-plan can repeat N times)",
    "... (a process of Plan, Current step, Thought, Action, Action input, and Observation can repeat N times)")
HEAD = "This was your previous work (but I haven't seen any of it! I only see what you return as final answer):"

INFLOWS = "MATCH (u:Trade_node)-[:source]->(d:Trade_node {name: 'deccan'}) RETURN u.name"
BROKEN = "MATCH (t:Trade_node RETURN t.name"
INVALID = "Thought: I need the nodes that flow into deccan.\nAction: SQL\nAction input: SELECT source FROM flow"
ERROR = f"Thought: Use the graph.\nAction: Graph DB\nAction input: {BROKEN}"
THINK = "Thought: Compare them.\nAction: Self thinking\nAction input: which of them sends the most value?"
QUERY = f"Thought: Now the inflows.\nAction: Graph DB\nAction input: {INFLOWS}"
ANSWER = "Thought: I now know the answer.\nFinal answer: Allocate the merchant to doab."


def run(tmp_path, replies, technique, db="ladybug", **kw):
    path = tmp_path / f"replay{len(list(tmp_path.glob('replay*')))}.json"
    path.write_text(json.dumps(replies))
    recorder = Recorder()
    runtime = AgentRuntime(tmp_path / "home", llm_opener=recorder)
    try:
        result = runtime.start(RunSettings("locating", 1, db, technique, f"replay:{path}", source="demo",
                                           prompts="paper", **kw))
        record = runtime.store.get(result.run_id)
    finally:
        runtime.close()
    return result, record, recorder.calls


def observations(record) -> list[str]:
    return [e.text for e in record.events if e.kind == "observation"]


def scratchpad(pairs) -> str:
    return HEAD + "\n" + "".join(f"{reply}\nObservation:{observed}\n" for reply, observed in pairs)


def test_iterrag_sends_figure_10_and_the_scratchpad_with_no_note_on_an_invalid_tool_or_a_repeated_error(tmp_path):
    replies = [INVALID, ERROR, ERROR, THINK, QUERY, ANSWER]
    result, record, calls = run(tmp_path, replies, "iterrag")
    assert result.status == "finished" and result.outcome["final_answer"] == "Allocate the merchant to doab."
    assert len(calls) == 6 and record.settings["prompts"] == "paper"
    observed = observations(record)
    assert observed[0] == "SQL is not a valid tool, try one of [Graph DB, Self thinking]."
    assert observed[1].startswith("An exception occured: ") and observed[2] == observed[1]  # no repeat note
    assert observed[3] == ""  # the original's Self thinking tool returned nothing
    table = observed[4].split("\n")
    assert table[0] == "" and table[1].split() == ["0"] and table[2].split()[0] == "0"  # pandas, numbered column
    question = calls[0][0][1].content
    assert question.startswith("Question: ") and question.endswith("\n\n")
    for i, (messages, stop) in enumerate(calls):
        assert [type(m) for m in messages] == [SystemMessage, HumanMessage] and stop == ["Observation:"]
        assert messages[0].content == FIGURE_10
        expected = question + (scratchpad(zip(replies[:i], observed[:i])) if i else "")
        assert messages[1].content == expected


def test_planrag_sends_figure_11_and_ends_at_a_non_answer_without_asking_again(tmp_path):
    plan = ("Plan: [Step 1: the nodes flowing into deccan, Step 2: choose the best]\nCurrent step: Step 1\n"
            f"Thought: I need the inflows.\nAction: Graph DB\nAction input: {BROKEN}")
    again = f"Re-plan: N\nCurrent step: Step 1\nThought: Again.\nAction: Graph DB\nAction input: {BROKEN}"
    ramble = "Re-plan: N\nI think deccan receives value from several nodes."
    result, record, calls = run(tmp_path, [plan, again, ramble, ANSWER], "planrag")
    assert result.status == "failed" and len(calls) == 3  # the ramble ends the run; nothing is sent after it
    error = [e for e in record.events if e.kind == "error"][-1]
    assert error.error_kind == "format" and "no correction is asked for" in error.message
    observed = observations(record)
    assert len(observed) == 2 and observed[0] == observed[1] and "same error" not in observed[1]
    question = calls[0][0][1].content
    for i, (messages, _) in enumerate(calls):
        assert messages[0].content == FIGURE_11
        assert messages[1].content == question + (scratchpad(zip([plan, again][:i], observed[:i])) if i else "")


def test_planrag_without_replanning_sends_figure_11_without_its_replan_line(tmp_path):
    _, _, calls = run(tmp_path, ["Plan: [Step 1: the inflows]\nCurrent step: Step 1\nThought: x\n" + ANSWER[9:]],
                      "planrag-norp")
    assert calls[0][0][0].content == NORP


def test_singlerag_sends_figure_8_then_figure_9_with_the_query_and_the_data_and_takes_any_reply(tmp_path):
    wrong_tool = f"Thought: I need the inflows.\nAction: Graph DBs\nAction input: {INFLOWS}"
    non_answer = f"Action: Graph DB\nAction input: {INFLOWS}"
    result, record, calls = run(tmp_path, [wrong_tool, non_answer, ANSWER], "singlerag")
    assert len(calls) == 2  # one retrieval call, one answer call: no second retrieval, no second answer request
    (retrieve, stop1), (answer, stop2) = calls
    assert stop1 is None and stop2 is None  # the original's SingleRAG chains sent no stop sequence
    assert [m.content for m in retrieve] == [FIGURE_8, retrieve[1].content]
    question = retrieve[1].content.removeprefix("Question: ")
    assert retrieve[1].content == f"Question: {question}" and "\n\n" not in retrieve[1].content
    data = observations(record)[0]  # the query ran although the Action named no tool of the run, as it did there
    assert data.startswith("\n") and data.split("\n")[1].split() == ["0"]
    assert answer[0].content == FIGURE_9
    assert answer[1].content == f"Question: \n{question}\nRetrieving query: {INFLOWS}\nRetrieved data: {data}        \n"
    assert result.status == "finished" and result.outcome["final_answer"] == non_answer  # printed as it came


def test_singlerag_with_no_action_input_fails_without_a_second_call(tmp_path):
    result, record, calls = run(tmp_path, ["Thought: the answer is doab.", ANSWER], "singlerag")
    assert result.status == "failed" and len(calls) == 1
    assert "no Action input" in [e for e in record.events if e.kind == "error"][-1].message


def test_relational_results_and_errors_come_back_as_the_original_tool_printed_them(tmp_path):
    broken = "Thought: x\nAction: Relational DB\nAction input: SELECT nosuch FROM flow"
    rows = "Thought: x\nAction: Relational DB\nAction input: ```sql\nSELECT source FROM flow WHERE dest = 'deccan'\n```"
    result, record, calls = run(tmp_path, [broken, rows, ANSWER], "iterrag", db="sqlite")
    assert result.status == "finished"
    error, table = observations(record)
    assert error.startswith("\nAn exception occured: ")
    assert table.split("\n")[:2] == ["", table.split("\n")[1]] and table.split("\n")[1].split() == ["source"]
    action = [e for e in record.events if e.kind == "action"][1]
    assert action.query == "SELECT source FROM flow WHERE dest = 'deccan'"  # fence lines dropped, as there


def test_the_original_executors_iteration_limit_ends_the_run_without_an_answer(tmp_path):
    result, record, calls = run(tmp_path, [QUERY] * 20, "iterrag")
    assert len(calls) == paper_prompts.MAX_ITERATIONS == 15  # the same action 15 times: no loop guard either
    assert result.status == "failed" and result.outcome["limit"] == "iterations"
    error = [e for e in record.events if e.kind == "error"][-1]
    assert error.message.startswith(paper_prompts.STOPPED) and "original agent executor" in error.message
    assert "Figure 9" not in str(calls) and all(m[0].content == FIGURE_10 for m, _ in calls)


def test_a_workbench_safety_limit_ends_the_run_and_says_it_is_not_the_papers(tmp_path):
    result, record, calls = run(tmp_path, [QUERY] * 5, "iterrag", limits=Limits(max_llm_calls=3))
    assert len(calls) == 3 and result.status == "failed" and result.outcome["limit"] == "llm_calls"
    message = [e for e in record.events if e.kind == "error"][-1].message
    assert "a workbench safety limit, not the paper's" in message and "no final answer is asked for" in message


@pytest.mark.parametrize("reply", ["Thought: x\nAction: Graph DB\nAction input: MATCH (n) RETURN n\nFinal answer: doab",
                                   ""])
def test_a_reply_the_original_parser_could_not_read_ends_the_run(tmp_path, reply):
    result, _, calls = run(tmp_path, [reply, ANSWER], "iterrag")
    assert result.status == "failed" and len(calls) == 1


def test_reaper_paper_setting_prompts_in_the_papers_structure_plans_once_and_does_not_ask_again(tmp_path):
    plan = "\n".join([
        'Step 1: the nodes in a sheet - #E1 = spreadsheet("nodes")',  # an invalid tool
        'Step 2: the flows - #E2 = relational_db("SELECT nosuch FROM flow")',
        'Step 3: the flows again - #E3 = relational_db("SELECT nosuch FROM flow")',  # the same error again
        "Step 4: the inflows - #E4 = relational_db(\"SELECT source FROM flow WHERE dest = 'deccan'\")"])
    non_answer = "Step 5: the values - #E5 = relational_db(\"SELECT * FROM trade_node\")"
    result, record, calls = run(tmp_path, [plan, non_answer, ANSWER], "reaper", db="sqlite")
    assert len(calls) == 2  # one planning call (no re-plan after the failed steps), one answer call (not asked again)
    assert result.status == "failed" and "no final answer" in result.outcome["error"]
    assert record.settings["prompts"] == "paper"
    (planner, _), (answer, _) = calls
    system, question = planner[0].content, planner[1].content
    # section 4.1's prompt: the role, the system instruction, the tool with its name, signature, description and an
    # example usage, then m in-context examples as Figure 2's "# Input: Context ... Question ... # Answer:"
    assert system.startswith("### Role:\nYou are an AI assistant to a decision-maker.")
    assert ("### System Instruction:\nYour goal is to generate a step by step plan using the tools listed below to get "
            "the information needed to answer a question. The output of one tool can be fed to another in a "
            "sequential manner. Each step may use only one tool.\n\nThe set of the candidate tools, their "
            "definitions, example usages are:\n1. relational_db - Tool: Runs one MySQL query") in system
    assert "Signature: relational_db(query: str)\nExample usage: #E1 = relational_db(\"SELECT * FROM" in system
    assert system.count("# Input:\nContext: {}\nQuestion: \"") == 3 and system.count("\n# Answer:\nStep 1: ") == 3
    assert '- #E1 = relational_db("SELECT' in system and "Relational DB[" not in system
    assert question.startswith('# Input:\nContext: {}\nQuestion: "') and question.endswith('"\n# Answer:')
    assert answer[0].content == paper_prompts.answer_prompt("sql", record_schema(tmp_path))
    observed = observations(record)
    assert len(observed) == 4 and "spreadsheet" in observed[0]
    assert observed[1].split(": ", 1)[1] == observed[2].split(": ", 1)[1]  # the same error, no note on it
    assert "same error" not in observed[2]


def record_schema(tmp_path) -> str:
    """The demo Locating database's schema, as the runs read it."""
    from core.agents.workspace import open_catalog_workspace

    ws = open_catalog_workspace(RunSettings("locating", 1, "sqlite", "reaper", "x", source="demo"))
    try:
        return ws.backend.schema_text()
    finally:
        ws.backend.close()


def test_reaper_paper_setting_refuses_a_replan_and_zero_shot_has_no_examples(tmp_path):
    with pytest.raises(ValueError, match="REAPER's paper setting plans once"):
        RunSettings("locating", 1, "sqlite", "reaper", "x", prompts="paper", replan_on_failure=True).validate()
    _, _, calls = run(tmp_path, ['Step 1: x - #E1 = relational_db("SELECT source FROM flow")', ANSWER], "reaper",
                      db="sqlite", reaper_planner="zero-shot")
    assert "# Input:" not in calls[0][0][0].content  # m = 0 examples


@pytest.mark.parametrize("setting, message", [
    ({"reaper_planner": "zero-shot"}, "PlanRAG has no REAPER planner"),
    ({"replan_on_failure": False}, "PlanRAG has no re-planning after failed steps to turn off")])
def test_a_setting_a_technique_does_not_have_is_refused(setting, message):
    with pytest.raises(ValueError, match=message):
        RunSettings("locating", 1, "sqlite", "planrag", "x", **setting).validate()


#: The AutoPlan paper's formalizer prompt (its Figure 6), with the run's valid actions.
FORMALIZER = ("Valid action formats are as follows:\nAction: Graph DB\nAction input: a Cypher query statement\n"
              "Action: Self thinking\nAction input: your thought\nFinal answer: the final answer to the question\n\n"
              "Formalize the following action strictly into the above valid action formats. If there are multiple "
              "actions, formalize the first one.\n\nAction to formalize: {}\nFormalized action:")
THOUGHT = ("Identify which step of plan you are at. Show your thought about the one next action. Your thought should "
           "be faithful to the plan step.")


def test_autoplan_paper_setting_thinks_then_acts_then_formalizes_each_step(tmp_path):
    """AutoPlan's agent (its equations 2-5): per step a thought call ending with the Thought-prompt, an action call
    continuing the thought after ``Action:``, the formalizer's call; the history keeps each thought and formalized
    action with its observation; an invalid tool and a repeated error get no note; the formalized final answer
    ends the run."""
    plan = ["Find the trade nodes flowing into the home node", "Choose the one steering the most value"]
    steps = [  # (thought, raw action, formalized action)
        ("I am at step 1. I need the nodes flowing into deccan.", f"query the graph: {INFLOWS}",
         f"Action: Graph DB\nAction input: {INFLOWS}"),
        ("Still step 1: check the flows in a table.", "SQL SELECT source FROM flow",
         "Action: SQL\nAction input: SELECT source FROM flow"),
        ("Step 1 again, in the graph.", BROKEN, f"Action: Graph DB\nAction input: {BROKEN}"),
        ("Step 1 again.", BROKEN, f"Action: Graph DB\nAction input: {BROKEN}"),
        ("I am at step 2: doab steers the most value.", "answer doab",
         "Final answer: Allocate the merchant to doab."),
    ]
    replies = [text for step in steps for text in step]
    result, record, calls = run(tmp_path, replies, "planrag", initial_plan=plan)
    assert result.status == "finished" and result.outcome["final_answer"] == "Allocate the merchant to doab."
    assert len(calls) == 15
    observed = observations(record)
    assert observed[1] == "SQL is not a valid tool, try one of [Graph DB, Self thinking]."
    assert observed[2].startswith("An exception occured: ") and observed[3] == observed[2]  # no repeat note
    system = FIGURE_11.replace("\n\n" + SUFFIX, "\n\nA plan for questions of this kind:\nStep 1: Find the trade nodes "
                               "flowing into the home node\nStep 2: Choose the one steering the most value\n\n" + SUFFIX)
    question = calls[0][0][1].content.removesuffix(THOUGHT)
    assert question.startswith("Question: ") and question.endswith("\n\n")
    history = ""
    for i, (thought, raw, formal) in enumerate(steps):
        (think, stop1), (act, stop2), (formalize, stop3) = calls[3 * i:3 * i + 3]
        pad = f"{HEAD}\n{history}" if history else ""
        assert [m.content for m in think] == [system, question + pad + THOUGHT] and stop1 == ["\nAction:", "Observation:"]
        assert [m.content for m in act] == [system, f"{question}{HEAD}\n{history}{thought}\nAction:"]
        assert stop2 == ["Observation:"]
        assert [type(m) for m in formalize] == [HumanMessage] and stop3 is None
        assert formalize[0].content == FORMALIZER.format(raw)
        if i < len(observed):
            history += f"{thought}\n{formal}\nObservation:{observed[i]}\n"
    thoughts = [e.text for e in record.events if e.kind == "thought"]
    assert thoughts[:2] == [steps[0][0], f"Action: {steps[0][1]} (to be formalized)"]
    actions = [e for e in record.events if e.kind == "action"]
    assert [a.tool for a in actions] == ["Graph DB", "Graph DB", "Graph DB"]


def test_autoplan_paper_setting_counts_a_step_of_three_calls_as_one_iteration(tmp_path):
    step = ["I am at step 1.", f"Graph DB {INFLOWS}", QUERY.split("\n", 1)[1]]
    result, _, calls = run(tmp_path, step * 16, "planrag", initial_plan=["look"], limits=Limits(max_llm_calls=100))
    assert len(calls) == 3 * paper_prompts.MAX_ITERATIONS and result.outcome["limit"] == "iterations"
