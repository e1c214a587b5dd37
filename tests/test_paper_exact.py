"""Every message the ``paper`` prompt setting sends, compared byte for byte with what the PlanRAG authors' code at
its head sent (their prompt texts kept as test data in tests/data/planrag_authors_prompts.json, assembled here as
their template and agent assembled them), for AutoPlan's acting with the AutoPlan paper's prompts
(tests/data/autoplan_paper_prompts.json), for REAPER with its paper's prompt elements
(tests/data/reaper_paper_prompts.json): SingleRAG, IterRAG, PlanRAG, PlanRAG w/o RP, REAPER and AutoPlan, on DQA's
Locating q1 and Building q1, on SQLite and Ladybug, with scripted replies. A difference fails unless
docs/paper-deviations.md lists it (``LISTED``, each by the words the document uses)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from core.agents.runtime import AgentRuntime
from core.model.run_settings import Limits, RunSettings
from core.agents import paper_prompts
from tests.test_paper_settings import Recorder

ROOT = Path(__file__).resolve().parent.parent
AUTHORS = json.loads((ROOT / "tests" / "data" / "planrag_authors_prompts.json").read_text(encoding="utf-8"))
AUTOPLAN = json.loads((ROOT / "tests" / "data" / "autoplan_paper_prompts.json").read_text(encoding="utf-8"))
REAPER = json.loads((ROOT / "tests" / "data" / "reaper_paper_prompts.json").read_text(encoding="utf-8"))
DOC = (ROOT / "docs" / "paper-deviations.md").read_text(encoding="utf-8")
AGENT = AUTHORS["agent"]
#: The differences from the authors' text that docs/paper-deviations.md lists, by the words it lists them with.
LISTED = {
    "singlerag_tool_names": "SingleRAG's format line names its tools",
    "autoplan_plan": "A plan for questions of this kind:",
    "reaper_answer": "REAPER's answer call",
    "reaper_question": '"a question" for "a customer question"',
    "reaper_capabilities": "the instruction's last sentence",
    "reaper_context": "no page context here",
}
KINDS = {"sqlite": "relational", "ladybug": "graph"}
#: Per scenario and database: a query that returns rows, and one the database refuses.
QUERIES = {("locating", "sqlite"): ("SELECT source FROM flow LIMIT 3", "SELECT nosuch FROM flow"),
           ("locating", "ladybug"): ("MATCH (n:Trade_node) RETURN n.name LIMIT 3", "MATCH (n:Trade_node RETURN n"),
           ("building", "sqlite"): ("SELECT goods_name FROM goods LIMIT 3", "SELECT nosuch FROM goods"),
           ("building", "ladybug"): ("MATCH (g:Goods) RETURN g.name LIMIT 3", "MATCH (g:Goods RETURN g")}
CASES = [(scenario, db) for scenario in ("locating", "building") for db in ("sqlite", "ladybug")]
ANSWER = "Thought: I now know the answer.\nFinal answer: the answer."


def listed(key: str) -> None:
    """A difference the test allows: the document must list it."""
    assert LISTED[key] in DOC, f"docs/paper-deviations.md does not list: {LISTED[key]}"


def authors_question(question) -> str:
    """The question as the authors' loader joined it (the fields from the DQA file, the joining rule theirs)."""
    return AUTHORS["schemas"][question.scenario]["question"].format(
        business_rules=question.business_rules, question=question.question, goal=question.goal)


def authors_tools(scenario: str, db: str) -> list[tuple[str, str]]:
    tool = AUTHORS["tools"][KINDS[db]]
    info = AUTHORS["schemas"][scenario]["GDB_INFO" if db == "ladybug" else "RDB_INFO"]
    return [(tool["name"], tool["description"] + info), (AUTHORS["tools"]["self"]["name"],
                                                          AUTHORS["tools"]["self"]["description"])]


def authors_system(technique: str, scenario: str, db: str) -> str:
    """The system message as the authors' create_prompt built it and their prompt template rendered it."""
    texts, tools = AUTHORS["techniques"][technique], authors_tools(scenario, db)
    args = re.sub("}", "}}}}", re.sub("{", "{{{{", AUTHORS["tools"]["args"]))
    formatted = "\n".join(f"{name}: {description}, args: {args}" for name, description in tools)
    names = ", ".join(name for name, _ in tools)
    if technique == "singlerag":  # their SingleRAG never fills {tool_names}: its template cannot be rendered
        listed("singlerag_tool_names")
    fmt = texts["FORMAT_INSTRUCTIONS"].format(tool_names=names)
    return "\n\n".join([texts["PREFIX"], formatted, fmt, texts["SUFFIX"]]).format()


def served(reply: str, stop: list[str]) -> str:
    """A reply as an OpenAI-compatible server returns it given the stop sequences: up to the first one, which is left
    out, nothing stripped."""
    cuts = [reply.find(s) for s in stop if s in reply]
    return reply[:min(cuts)] if cuts else reply


def scratchpad(steps: list[tuple[str, str]]) -> str:
    """The authors' agent's scratchpad: each reply as the server returned it at their stop sequence and their parser
    logged it, the observation prefix, what the tool returned."""
    if not steps:
        return ""
    text = "".join(f"{served(reply, AGENT['stop']).replace(AGENT['human_removed'], '')}\n"
                   f"{AGENT['observation_prefix']}{observed}\n{AGENT['llm_prefix']}" for reply, observed in steps)
    return AGENT["scratchpad_head"] + text


def human(technique: str, question: str, steps) -> str:
    return AUTHORS["techniques"][technique]["HUMAN_MESSAGE_TEMPLATE"].format(
        input=question, agent_scratchpad=scratchpad(steps))


def invalid_tool(requested: str, scenario: str, db: str) -> str:
    return AGENT["invalid_tool"].format(requested_tool_name=requested, available_tool_names_str=", ".join(
        name for name, _ in authors_tools(scenario, db)))


@pytest.fixture(scope="module")
def runner(tmp_path_factory, dqa_dir):
    """Runs a scripted conversation in the paper setting on DQA and returns (result, record, calls, question)."""
    home = tmp_path_factory.mktemp("paper-exact")
    recorder = Recorder()
    runtime = AgentRuntime(home / "home", llm_opener=recorder)
    count = iter(range(10_000))

    def run(scenario, db, technique, replies, **kw):
        path = home / f"replay{next(count)}.json"
        path.write_text(json.dumps(replies))
        recorder.calls.clear()
        result = runtime.start(RunSettings(scenario, 1, db, technique, f"replay:{path}", source="dqa",
                                           prompts="paper", **kw))
        record = runtime.store.get(result.run_id)
        from core.scenarios.dqa.source import dqa_benchmark

        return result, record, list(recorder.calls), dqa_benchmark(dqa_dir).question(scenario, 1)

    yield run
    runtime.close()


def observations(record) -> list[str]:
    return [e.text for e in record.events if e.kind == "observation"]


def loop_replies(technique: str, scenario: str, db: str) -> list[str]:
    """An invalid tool, a query (a ``Human: `` and a newline after ``Action input:`` in it, an ``Observation:`` the
    model wrote after it, where the server stops the reply), a refused query, a Self thinking step, the answer."""
    ok, bad = QUERIES[(scenario, db)]
    tool = AUTHORS["tools"][KINDS[db]]["name"]
    plan = "Plan: [Step 1: the data, Step 2: decide]\nCurrent step: Step 1\n" if technique.startswith("planrag") else ""
    again = "Re-plan: N\nCurrent step: Step 1\n" if technique == "planrag" else (
        "Current step: Step 1\n" if plan else "")
    return [f"{plan}Thought: look.\nAction: SQL\nAction input: {ok}",
            f"Human: {again}Thought: query.\nAction: {tool}\nAction input:\n{ok}\nObservation: made up\nThought: x",
            f"{again}Thought: again.\nAction: {tool}\nAction input: {bad}",
            f"{again}Thought: think.\nAction: Self thinking\nAction input: which is best?",
            ANSWER]


@pytest.mark.parametrize("scenario, db", CASES)
@pytest.mark.parametrize("technique", ["iterrag", "planrag", "planrag-norp"])
def test_the_loop_techniques_send_what_the_authors_agent_sent(runner, technique, scenario, db):
    replies = loop_replies(technique, scenario, db)
    result, record, calls, question = runner(scenario, db, technique, replies)
    assert result.status == "finished" and result.outcome.final_answer == "the answer."
    observed = observations(record)
    assert observed[0] == invalid_tool("SQL", scenario, db)  # the executor's words for a tool it does not have
    assert observed[1].startswith("\n") and observed[3] == ""  # a printed frame; Self thinking returned nothing
    assert "An exception occured: " in observed[2]
    assert len(calls) == len(replies)
    system = authors_system(technique, scenario, db)
    for i, (messages, stop) in enumerate(calls):
        assert [type(m) for m in messages] == [SystemMessage, HumanMessage]
        assert messages[0].content == system
        assert messages[1].content == human(technique, authors_question(question), list(zip(replies, observed))[:i])
        assert stop == AGENT["stop"]


SINGLE_REPLIES = {  # the reply after ``Action input:``, and what the authors' SingleRAG ran of it
    "observation line": ("Action input: {ok}\nObservation: made up", " {ok}\n"),
    "no observation": ("Action input: {ok}", " {ok}"),
    "trailing spaces": ("Action input:  {ok}  \n\n", "  {ok}  \n\n"),
    "newline first": ("Action input:\n{ok}\n  Observation: made up", "\n{ok}\n  "),
    "two inputs": ("Action input: {ok}\nObservation: x\nAction input: SELECT 2", " {ok}\n"),
}


@pytest.mark.parametrize("form", SINGLE_REPLIES)
@pytest.mark.parametrize("scenario, db", CASES)
def test_singlerag_sends_what_the_authors_two_chains_sent(runner, scenario, db, form):
    """Their two chains: the retrieval call, then the answer call given ``Q\n\nRetrieved data`` when the reply wrote a
    line break before its ``Observation`` (their query ran from the reply's first ``Action input:`` up to any
    ``Observation``, whitespace and all: row 14 of issue 39)."""
    ok, _ = QUERIES[(scenario, db)]
    tool = AUTHORS["tools"][KINDS[db]]["name"]
    after, expected = (part.format(ok=ok) for part in SINGLE_REPLIES[form])
    reply = f"Thought: one query.\nAction: {tool}\n{after}"
    result, record, calls, question = runner(scenario, db, "singlerag", [reply, "Final answer: the answer."])
    assert result.status == "finished" and len(calls) == 2
    texts, text = AUTHORS["techniques"]["singlerag"], authors_question(question)
    (retrieve, stop1), (answer, stop2) = calls
    assert stop1 is None and stop2 is None  # their chains sent no stop sequence
    assert [m.content for m in retrieve] == [authors_system("singlerag", scenario, db),
                                             texts["HUMAN_MESSAGE_TEMPLATE"].format(input=text)]
    data = observations(record)[0]
    query = reply.split("Action input:")[1].split("Observation")[0]  # their cut
    assert query == expected and data.startswith("\n")  # the rows printed: the query ran
    chain_input = texts["CHAIN_INPUT"].format(question=text, query=query, retrieved_data=data)
    answering = "\n\n".join([texts["PREFIX_AFTER_RETRIEVE"], texts["FORMAT_INSTRUCTIONS_AFTER_RETRIEVE"],
                             texts["SUFFIX_AFTER_RETRIEVE"]]).format()
    assert [m.content for m in answer] == [answering, texts["HUMAN_MESSAGE_TEMPLATE"].format(input=chain_input)]


@pytest.mark.parametrize("scenario, db", CASES)
def test_autoplan_acts_as_its_papers_agent_on_the_authors_prompt(runner, scenario, db):
    """AutoPlan's agent (its equations 2-5) on the authors' PlanRAG prompt with the plan: per step the thought call
    (H, then Table 2's Thought-prompt), the action call (H, the thought, ``Action:``), the formalizer (Figure 6)."""
    ok, bad = QUERIES[(scenario, db)]
    tool = AUTHORS["tools"][KINDS[db]]["name"]
    plan = ["Find the data the decision depends on", "Decide"]
    steps = [("Step 1: the data.", f"query {ok}", f"Action: {tool}\nAction input: {ok}"),
             ("Step 1 in a table.", "SQL", f"Action: SQL\nAction input: {ok}"),
             ("Step 1 again.", bad, f"Action: {tool}\nAction input: {bad}"),
             ("Step 2.", "answer", "Final answer: the answer.")]
    result, record, calls, question = runner(scenario, db, "planrag", [t for step in steps for t in step],
                                             initial_plan=plan)
    assert result.status == "finished" and len(calls) == 3 * len(steps)
    observed = observations(record)
    assert observed[1] == invalid_tool("SQL", scenario, db)
    listed("autoplan_plan")  # where the plan X stands in the task description: the workbench's words
    system = authors_system("planrag", scenario, db).replace(
        "\n\nBegin!", "\n\nA plan for questions of this kind:\nStep 1: " + plan[0] + "\nStep 2: " + plan[1]
        + "\n\nBegin!")
    text, history = authors_question(question), []
    formats = (f"Action: {tool}\nAction input: a {'MySQL' if db == 'sqlite' else 'Cypher'} query statement\n"
               "Action: Self thinking\nAction input: your thought\nFinal answer: the final answer to the question")
    for i, (thought, raw, formal) in enumerate(steps):
        (think, stop1), (act, stop2), (formalize, stop3) = calls[3 * i:3 * i + 3]
        h = human("planrag", text, [])
        pad = scratchpad([]) if not history else AGENT["scratchpad_head"] + "".join(history)
        assert [m.content for m in think] == [system, h + pad + AUTOPLAN["Thought-prompt"]]
        assert [m.content for m in act] == [system, h + AGENT["scratchpad_head"] + "".join(history) + thought
                                            + "\nAction:"]
        assert [type(m) for m in formalize] == [HumanMessage] and stop3 is None
        assert formalize[0].content == AUTOPLAN["formalizer"].format(formats=formats, raw_action=raw)
        assert stop1 == ["\nAction:", "Observation:"] and stop2 == AGENT["stop"]
        if i < len(observed):
            history.append(f"{thought}\n{formal}\n{AGENT['observation_prefix']}{observed[i]}\n")


@pytest.mark.parametrize("scenario, db", CASES)
def test_reaper_sends_no_stop_sequence_and_no_correction(runner, scenario, db):
    """REAPER's paper setting: one planning call and one answer call, no stop sequence (its paper gives none); a plan
    with no steps is told nothing (the answer call gets no corrective message)."""
    result, record, calls, question = runner(scenario, db, "reaper", ["I would look at the data first.",
                                                                      "Final answer: the answer."])
    assert len(calls) == 2 and all(stop is None for _, stop in calls)
    (planner, _), (answer, _) = calls
    listed("reaper_context")  # Figure 2's input form; the context is empty: no page here
    assert planner[1].content == REAPER["input"].format(context="{}", question=question.text.strip())
    listed("reaper_question")
    listed("reaper_capabilities")
    instruction = REAPER["instruction"].replace("a customer question", "a question").removesuffix(
        " Some parameters of a tool can be generated with help of provided capabilities.")
    tool = "relational_db" if db == "sqlite" else "graph_db"
    system = planner[0].content
    assert system.startswith(REAPER["role_heading"] + "\n")
    assert f"\n\n{REAPER['instruction_heading']}\n{instruction}\n\n{REAPER['tools_heading']}\n" \
           f"{REAPER['tool_line'].format(name=tool)}" in system
    sent = "\n".join(m.content for m in answer)
    assert "no steps" not in sent and "Write each step" not in sent
    listed("reaper_answer")  # its paper gives no answer prompt: the authors' PlanRAG answering prompt stands in
    texts = AUTHORS["techniques"]["singlerag"]
    assert answer[0].content == "\n\n".join([texts["PREFIX_AFTER_RETRIEVE"], texts["FORMAT_INSTRUCTIONS_AFTER_RETRIEVE"],
                                             texts["SUFFIX_AFTER_RETRIEVE"]]).format()
    assert result.status == "finished"


def test_the_original_executors_iteration_limit_ends_the_run_without_an_answer(runner):
    ok, _ = QUERIES[("locating", "sqlite")]
    query = f"Thought: again.\nAction: Relational DB\nAction input: {ok}"
    result, record, calls, _ = runner("locating", "sqlite", "iterrag", [query] * 20)
    assert len(calls) == paper_prompts.MAX_ITERATIONS == AGENT["max_iterations"]  # no loop guard either
    assert result.status == "failed" and result.outcome.limit == "iterations"
    error = [e for e in record.events if e.kind == "error"][-1]
    assert error.message.startswith(paper_prompts.STOPPED) and "original agent executor" in error.message


def test_a_workbench_safety_limit_ends_the_run_and_says_it_is_not_the_papers(runner):
    ok, _ = QUERIES[("locating", "sqlite")]
    query = f"Thought: again.\nAction: Relational DB\nAction input: {ok}"
    result, record, calls, _ = runner("locating", "sqlite", "iterrag", [query] * 5, limits=Limits(max_llm_calls=3))
    assert len(calls) == 3 and result.status == "failed" and result.outcome.limit == "llm_calls"
    message = [e for e in record.events if e.kind == "error"][-1].message
    assert "a workbench safety limit, not the paper's" in message and "no final answer is asked for" in message


@pytest.mark.parametrize("reply", ["Thought: x\nAction: Relational DB\nAction input: SELECT 1\nFinal answer: doab", ""])
def test_a_reply_the_original_parser_could_not_read_ends_the_run(runner, reply):
    result, _, calls, _ = runner("locating", "sqlite", "iterrag", [reply, ANSWER])
    assert result.status == "failed" and len(calls) == 1


def test_the_authors_parser_reads_around_its_colons_and_drops_human():
    assert paper_prompts.read_reply("Human: Thought: x\nAction :\n Graph DB \nAction input :\n\nMATCH (n) RETURN n") \
        == ("action", "Graph DB", "MATCH (n) RETURN n")
    assert paper_prompts.read_reply('Action: Graph DB\nAction input: "MATCH (n) RETURN n"')[2] == "MATCH (n) RETURN n"
    assert paper_prompts.read_reply('Action: Relational DB\nAction input: SELECT "a"')[2] == 'SELECT "a"'
    assert paper_prompts.read_reply("Human: Final answer: Human: doab") == ("final", "doab", "")


@pytest.mark.parametrize("setting, message", [
    ({"reaper_planner": "zero-shot"}, "PlanRAG has no REAPER planner"),
    ({"replan_on_failure": False}, "PlanRAG has no re-planning after failed steps to turn off")])
def test_a_setting_a_technique_does_not_have_is_refused(setting, message):
    with pytest.raises(ValueError, match=message):
        RunSettings("locating", 1, "sqlite", "planrag", "x", **setting).validate()


def test_reaper_paper_setting_refuses_a_replan():
    with pytest.raises(ValueError, match="REAPER's paper setting plans once"):
        RunSettings("locating", 1, "sqlite", "reaper", "x", prompts="paper", replan_on_failure=True).validate()


def test_every_listed_difference_is_in_the_document():
    for key in LISTED:
        listed(key)


def test_a_syntax_error_on_sqlite_is_observed_in_sqlites_own_words(runner):
    """The workbench's parser refuses the MySQL query before SQLite sees it; the paper setting observes what SQLite
    says of it (the improved setting keeps saying where the parser stopped)."""
    broken = "Thought: x\nAction: Relational DB\nAction input: SELEC source FROM flow"
    _, record, _, _ = runner("locating", "sqlite", "iterrag", [broken, ANSWER])
    assert observations(record)[0] == '\nAn exception occured: SQLite: near "SELEC": syntax error'
    from core.agents.nodes import run_query
    from core.agents.workspace import open_catalog_workspace

    ws = open_catalog_workspace(RunSettings("locating", 1, "sqlite", "iterrag", "x", source="demo"))
    try:
        event = run_query(ws.backend, "SELEC source FROM flow", Limits())
    finally:
        ws.backend.close()
    assert "the query reads as SQL up to" in event.text and "SELEC" in event.error
