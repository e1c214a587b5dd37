"""``python -m core grade``: grade one final answer against a question, as the workbench grades a run.

    python -m core grade --scenario {locating,building} --question N [--source dqa|demo] [--json] ANSWER

``--json`` prints one object: ``decision`` (candidate or null), ``status`` (decided / ambiguous / none),
``reason``, ``mentions``, ``correct`` (true / false / null without a label or an answer), ``label``, ``rank``,
``tied``, ``of``, ``regret``, ``optimal`` (regret 0 by the simulator, or exactly the group tied for best),
``best_group`` and ``all_tied``. ANSWER ``-`` reads the answer from stdin.
Exit status: 0 graded, 1 bad input (unknown question, no DQA directory).
"""
from __future__ import annotations

import argparse
import json
import sys

from core.cli.args import bounded
from core.scenarios.catalog import SOURCES
from core.scenarios import catalog
from core.analysis.grading import judge
from core.analysis.format import number

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
    """The verdict on ``answer`` to a catalog question (core.analysis.grading.judge), as ``--json`` prints it."""

    question = catalog.question(source or catalog.default_source(scenario), scenario, number)
    v = judge(question, catalog.database(question), answer)
    p = v.placement
    return {"question": question.id, "decision": v.decision, "status": v.status, "reason": v.reason,
            "mentions": list(v.mentions), "correct": v.correct, "label": v.label,
            "rank": p.rank if p else None, "tied": p.tied if p else None, "of": v.of,
            "regret": p.regret if p else None, "optimal": v.optimal, "best_group": v.best_group,
            "all_tied": v.all_tied, "rank_text": p.text() if p else None}


def main(args) -> int:
    answer = sys.stdin.read() if args.answer == "-" else args.answer
    report = grade_answer(args.source, args.scenario, args.question, answer)
    if args.json:
        print(json.dumps(report))
        return 0
    verdict = {True: "correct", False: "wrong", None: "no label" if report["label"] is None else "not answered"}[
        report["correct"]]
    print(f"{report['question']}: {report['status']}: {report['decision'] if report['decision'] is not None else '-'}"
          f" ({verdict}; label {report['label']})")
    print(f"  why: {report['reason']}")
    if report["rank"] is not None:
        print(f"  rank {report['rank_text']}, regret {number(report['regret'], digits=6)}"
              + (" (a best decision)" if report["optimal"] else ""))
    if report["all_tied"]:
        print("  every candidate ties in the simulator: no decision is better than another")
    return 0
