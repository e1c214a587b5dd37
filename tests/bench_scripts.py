"""Scripted transcripts for benchmark runs over DQA (used by tests/test_benchmark_*.py and bench/bench_runner.py):
short, realistic IterRAG / PlanRAG / PlanRAG w/o RP replies for any question, in SQL or Cypher, ending with a chosen
pick, written to a folder as ``replay:DIR`` reads them. Nothing from DQA is stored: they are made from the data
at run time.

Variants: ``right`` (the label), ``wrong`` (another candidate the queries returned), ``missed`` (never queries
the critical values), ``query_error`` (the last query fails), ``not_candidate`` (names no candidate), ``undecided``
(the final answer says it cannot decide: graded ``none``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

VARIANTS = ("right", "wrong", "missed", "query_error", "not_candidate")  # "undecided" too, when asked
TOOL = {"sql": "Relational DB", "cypher": "Graph DB"}
LANGUAGE = {"sqlite": "sql", "mysql": "sql", "ladybug": "cypher", "neo4j": "cypher"}


@dataclass(frozen=True)
class Script:
    """What a transcript does: its variant, pick, re-plans, and what the benchmark should make of it."""

    variant: str
    pick: str | int
    replans: int
    correct: bool
    failure: str | None  # the expected failure category
    retrievals: int


def _options(question, database) -> list:
    """The candidates the first queries return: the sources of the home node (Locating), the buildings
    supplying the goods (Building)."""
    t = database.tables
    if question.scenario == "locating":
        return [s for s, d in zip(t["flow"].column("source"), t["flow"].column("dest")) if d == question.home]
    code = t["goods"].column("code")[t["goods"].column("goods_name").index(question.goods)]
    return [b for g, b in zip(t["supply"].column("goods_id"), t["supply"].column("building_id")) if g == code]


def _queries(question, language: str, variant: str) -> list[str]:
    """The database queries of a transcript: the candidates, then their critical values."""
    home, goods = question.home, question.goods
    if question.scenario == "locating":
        first, values = ({"sql": f'SELECT source FROM flow WHERE dest = "{home}"',
                          "cypher": f'MATCH (s:Trade_node)-[:source]->(:Trade_node {{name: "{home}"}}) RETURN s.name'},
                         {"sql": "SELECT trade_node, local_value, ingoing, total_power FROM trade_node WHERE trade_node "
                                 f'IN (SELECT source FROM flow WHERE dest = "{home}")',
                          "cypher": f'MATCH (s:Trade_node)-[:source]->(:Trade_node {{name: "{home}"}}) '
                                    "RETURN s.name, s.local_value, s.ingoing, s.total_power"})
    else:
        first, values = ({"sql": f'SELECT code, current_price, pop_demand FROM goods WHERE goods_name = "{goods}"',
                          "cypher": f'MATCH (g:Goods {{name: "{goods}"}}) RETURN g.code, g.current_price, '
                                    "g.pop_demand"},
                         {"sql": "SELECT s.building_id, s.max_supply, s.current_output FROM supply s JOIN goods g ON "
                                 f'g.code = s.goods_id WHERE g.goods_name = "{goods}"',
                          "cypher": f'MATCH (b:Building)-[s:Supply]->(g:Goods {{name: "{goods}"}}) '
                                    "RETURN b.id, s.max_supply, s.current_output"})
    queries = [first[language], values[language]]
    if variant == "missed":  # the candidates only, none of the critical values
        queries = [queries[0].replace(", pop_demand", "").replace(", g.pop_demand", "")
                   if question.scenario == "building" else queries[0],
                   queries[1].replace(", ingoing, total_power", "").replace(", s.ingoing, s.total_power", "")
                   .replace(", s.current_output", "")]
    if variant == "query_error":
        queries[1] = "SELEC broken query" if language == "sql" else "MATCH (n:Trade_node RETURN n"
    return queries


def transcript(question, database, db: str, technique: str, variant: str, replans: int = 0) -> tuple[list[str], Script]:
    """The replies of one item and what they should give."""
    language, plans = LANGUAGE[db], technique.startswith("planrag")
    options = _options(question, database)
    label = question.answer
    wrong = [o for o in options if o != label]
    if variant == "right":
        pick = label
    elif variant == "not_candidate":
        pick = question.home if question.scenario == "locating" else 99999
    else:
        pick = wrong[0] if wrong else label
    queries = _queries(question, language, variant)
    replans = replans if technique == "planrag" else 0
    replies = []
    for i, query in enumerate(queries):
        head = ""
        if plans and i == 0:
            head = ("Plan: [Step 1: Find the candidate decisions, Step 2: Get their critical values, "
                    "Step 3: Choose the best]\nCurrent step: Step 1: Find the candidate decisions.\n")
        elif plans:
            head = ("Re-plan: N\n" if technique == "planrag" else "") + "Current step: Step 2: Get their values.\n"
        replies.append(f"{head}Thought: I need this data.\nAction: {TOOL[language]}\nAction input: {query}")
    for i in range(replans):
        replies.append(f"Re-plan: Y\nPlan: [Step 1: Compare the candidates again (revision {i + 1}), Step 2: "
                       "Choose the best]\nCurrent step: Step 1: Compare the candidates again.\n"
                       "Thought: The plan missed a comparison.\nAction: Self-thinking\nAction input: compare them "
                       f"(revision {i + 1})")  # each a new action: the loop guard stops a repeated one
    answer = (f'Allocate the merchant to "{pick}".' if question.scenario == "locating"
              else f"Increase the level of building id {pick} by 5.")
    if variant == "undecided":
        pick, answer = None, "I cannot determine the best decision from this data."
    replies.append(("Re-plan: N\n" if technique == "planrag" else "") + f"Thought: I now know the answer.\n"
                   f"Final answer: {answer}")
    correct = pick == label
    failure = None if correct else {"query_error": "QUR", "not_candidate": "CAN", "missed": "MIS",
                                    "undecided": "unclassified"}.get(variant)
    if not correct and failure is None:
        failure = "unclassified" if wrong and pick in options else "CAN"
    return replies, Script(variant, pick, replans, correct, failure, len(queries))


def write_transcripts(dqa, folder: Path, scenarios: dict[str, list[int]], dbs: list[str], techniques: list[str],
                      variant_of, replans_of=lambda q: 0) -> dict[str, Script]:
    """Write ``{scenario}-{question}-{db}-{technique}.json`` for each item; returns the Script by file stem.
    ``variant_of(question)`` and ``replans_of(question)`` choose what each transcript does."""
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {}
    for scenario, numbers in scenarios.items():
        for n in numbers:
            question = dqa.question(scenario, n)
            database = dqa.database(question)
            for db in dbs:
                for technique in techniques:
                    replies, script = transcript(question, database, db, technique, variant_of(question),
                                                 replans_of(question))
                    stem = f"{scenario}-{n}-{db}-{technique}"
                    (folder / f"{stem}.json").write_text(json.dumps(replies), encoding="utf-8")
                    scripts[stem] = script
    return scripts
