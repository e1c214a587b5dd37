"""``python -m core grade``: grade one final answer against a question, as the workbench grades a run.

    python -m core grade --scenario {locating,building} --question N [--source dqa|demo] [--json] ANSWER

``--json`` prints one object: ``decision`` (candidate or null), ``status`` (decided / ambiguous / none),
``reason``, ``mentions``, ``correct`` (true / false / null without a label), ``label``, ``rank``, ``tied``, ``of``,
``regret``, ``optimal`` (regret 0 by the simulator) and ``all_tied``. ANSWER ``-`` reads the answer from stdin.
Exit status: 0 graded, 1 bad input (unknown question, no DQA directory).
"""
from __future__ import annotations

import argparse
import json
import sys

from core.cli.args import bounded
from core.scenarios.catalog import SOURCES
from core.scenarios import catalog
from core.analysis.grading import grade, place
from core.scenarios import candidates, ranking
from sims.ranking import InputError

DESCRIPTION = (__doc__.split("\n\n", 2)[0] + " Prints the decision the answer concludes with, whether it is the "
               "label, and its rank and regret in the simulator's ranking. " + __doc__.split("\n\n")[2].strip()
               ).replace("``", "")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", required=True, help="locating, building or a plugin's name")
    p.add_argument("--question", type=bounded("question"), required=True, help="question number N (1-based, file order)")
    p.add_argument("--source", choices=list(SOURCES), help="default dqa (a plugin scenario: its own, scenario)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("answer", help="the final answer's text (- reads it from stdin)")


def grade_answer(source: str, scenario: str, number: int, answer: str) -> dict:
    """The grade of ``answer`` on a catalog question, with its place in the simulator's ranking."""

    question = catalog.question(source or catalog.default_source(scenario), scenario, number)
    database = catalog.database(question)
    g = grade(answer, scenario, candidates(question, database), question.answer)
    try:
        ranked = ranking(question, database)
    except InputError:  # a scenario without a simulator: graded against its label only
        ranked = None
    p = place(g.decision, ranked) if ranked is not None else None
    return {"question": question.id, "decision": g.decision, "status": g.status, "reason": g.reason,
            "mentions": list(g.mentions), "correct": g.correct, "label": question.answer,
            "rank": p.rank if p else None, "tied": p.tied if p else None,
            "of": len(ranked.entries) if ranked else None, "regret": p.regret if p else None,
            "optimal": p.optimal if p else None, "all_tied": bool(ranked and ranked.all_tied),
            "rank_text": p.text() if p else None}


def main(args) -> int:
    answer = sys.stdin.read() if args.answer == "-" else args.answer
    report = grade_answer(args.source, args.scenario, args.question, answer)
    if args.json:
        print(json.dumps(report))
        return 0
    verdict = {True: "correct", False: "wrong", None: "no label"}[report["correct"]]
    print(f"{report['question']}: {report['status']}: {report['decision'] if report['decision'] is not None else '-'}"
          f" ({verdict}; label {report['label']})")
    print(f"  why: {report['reason']}")
    if report["rank"] is not None:
        print(f"  rank {report['rank_text']}, regret {report['regret']:.6g}"
              + (" (a best decision)" if report["optimal"] else ""))
    if report["all_tied"]:
        print("  every candidate ties in the simulator: no decision is better than another")
    return 0
