"""Reading replies in the paper's format, and the prompts of Figures 8-11."""
from __future__ import annotations

import pytest

from core.agents import prompts
from core.agents.parsing import parse_plan, parse_reply, query_language, render_plan, tool_kind
from core.model.technique import TECHNIQUES, technique


def test_planrag_first_reply():
    r = parse_reply('Plan: [Step 1: Find the sources of "baltic_sea", Step 2: Compare them, Step 3: Choose]\n'
                    "Current step: Step 1: Find the sources.\n"
                    "Thought: I need the flow.\n"
                    "Action: Relational DB\n"
                    "Action input: SELECT source FROM flow WHERE dest = 'baltic_sea'")
    assert r.plan == ['Find the sources of "baltic_sea"', "Compare them", "Choose"]
    assert r.current_step == "Step 1: Find the sources."
    assert (r.thought, r.action) == ("I need the flow.", "Relational DB")
    assert r.action_input == "SELECT source FROM flow WHERE dest = 'baltic_sea'"
    assert r.replan is None and r.final_answer is None and not r.problems
    assert r.through_plan().endswith("Step 3: Choose]")


def test_replan_reply_and_lenient_form():
    r = parse_reply("**Re-plan:** Y\n**Plan:**\n1. Get the development\n2. Compare\n"
                    "- Current Step: Step 1\n**Thought:** ok\nAction: graph db\n"
                    "Action Input: ```cypher\nMATCH (c:Country) RETURN c.development\n```")
    assert r.replan is True and r.plan == ["Get the development", "Compare"]
    assert r.action_input == "MATCH (c:Country) RETURN c.development"
    assert parse_reply("Re-plan: N\nThought: go on").replan is False
    one_line = parse_reply("Re-plan: Y. Plan: [Step 1: a, Step 2: b]\nThought: t")
    assert one_line.replan is True and one_line.plan == ["a", "b"]


def test_final_answer_and_its_problems():
    assert parse_reply("Thought: I now know the answer.\nFinal Answer: krakow").final_answer == "krakow"
    trailing = parse_reply("Final answer: krakow\nThought: let me check\nAction: Graph DB\nAction input: MATCH (n)")
    assert "after the Final answer" in trailing.problems[0]
    both = parse_reply("Action: Graph DB\nAction input: MATCH (n) RETURN n\nFinal answer: krakow")
    assert "both an Action and a Final answer" in both.problems[0]
    assert parse_reply("Thought: done\nFinal answer:").problems == ["your Final answer is empty"]
    # a plain explanation continuing the answer is part of it
    assert not parse_reply("Final answer: krakow\nbecause it is inland").problems


def test_action_without_input_and_unlabelled_text():
    assert parse_reply("Thought: t\nAction: Graph DB").problems == ["your Action has no Action input"]
    assert parse_reply("Action input: SELECT 1").problems == ["your Action input has no Action naming the tool"]
    loose = parse_reply("I think krakow is best.")
    assert loose.thought == "I think krakow is best." and loose.action is None


def test_first_value_of_a_repeated_field_wins():
    r = parse_reply("Thought: first\nThought: I now know the answer.\nFinal answer: 1485")
    assert r.thought == "first" and r.final_answer == "1485"


def test_plans_in_several_forms_round_trip():
    assert parse_plan("[Step 1: use step 1, then go, Step 2: x]") == ["use step 1, then go", "x"]
    assert parse_plan("Step 1: a\nStep 2: b") == ["a", "b"]
    assert parse_plan("look at everything") == ["look at everything"]
    steps = ["Find sources", "Pick, then answer"]
    assert parse_plan(render_plan(steps)) == steps


@pytest.mark.parametrize("query,language", [
    ("SELECT source FROM flow WHERE dest = 'x'", "sql"),
    ("select b.id from building b join supply s on s.building_id = b.id", "sql"),
    ("DELETE FROM trade_node", "sql"),
    ("MATCH (s:Trade_node)-[:source]->(d) RETURN s.name", "cypher"),
    ("MATCH (b:Building {id: 1}) SET b.level = 6 RETURN b", "cypher"),
    ("SELECT 1", None),
    ("SELECT name FROM t WHERE note = 'MATCH (n) RETURN n'", "sql"),
])
def test_query_language(query, language):
    assert query_language(query) == language


@pytest.mark.parametrize("action,kind", [("Relational DB", "sql"), ("relational_db", "sql"), ("MySQL", "sql"),
                                         ("Graph DB", "cypher"), ("'Graph DB'", "cypher"), ("Neo4j", "cypher"),
                                         ("Self-thinking", "self"), ("Self thinking", "self"),
                                         ("Trade Database", None), ("Calculator", None)])
def test_tool_kind(action, kind):
    assert tool_kind(action) == kind


SCHEMA = "(n:Trade_node {name, local_value})"


def test_prompts_follow_figures_8_to_11():
    single, iterative = (prompts.agent_prompt(technique(n), "cypher", SCHEMA) for n in ("singlerag", "iterrag"))
    plan, norp = (prompts.agent_prompt(technique(n), "cypher", SCHEMA) for n in ("planrag", "planrag-norp"))
    for p in (single, iterative, plan, norp):
        assert p.startswith("You are a decision-making agent answering a given question.")
        assert "Graph DB: Useful for when you need to collect the data that follows the following schema" in p
        assert SCHEMA in p and "Self-thinking: Useful for when there is no available tool." in p
        assert "MUST be one of ['Graph DB', 'Self-thinking']" in p and "MUST be written by Cypher" in p
        assert p.endswith("Begin! Keep in mind that Your response MUST follow the valid format above.")
    assert "multiple times" not in single and "can repeat" not in single
    assert "can repeat together N times" in iterative and "Plan:" not in iterative
    assert "firstly, you need to plan" in plan and "Current step: the current Step in the Plan." in plan
    assert "Re-plan: respond with 'Y'" in plan and "Re-plan" not in norp and "Current step" in norp
    sql = prompts.agent_prompt(technique("iterrag"), "sql", "CREATE TABLE flow (source VARCHAR(30))")
    assert "Relational DB: " in sql and "MySQL query statement" in sql and "Graph DB" not in sql
    answer = prompts.answer_prompt("sql", "CREATE TABLE t (a INT)")
    assert "you should make your Final answer immediately" in answer and "Action:" not in answer


def test_dialect_note_only_for_ladybug():
    from core.backends.cypher_dialect import LADYBUG_DIALECT_NOTE

    assert prompts.dialect_note("ladybug") == LADYBUG_DIALECT_NOTE
    assert prompts.dialect_note("neo4j") is None and prompts.dialect_note("sqlite") is None
    assert "NOTE" in prompts.tool_descriptions("cypher", SCHEMA, "NOTE")


def test_every_technique_is_listed():
    # the papers' six keep their ids; a technique added as a folder joins them with no edit here
    assert {"singlerag", "iterrag", "planrag", "planrag-norp", "reaper", "autoplan"} <= set(TECHNIQUES)
    with pytest.raises(ValueError, match="choose one of"):
        technique("react")
