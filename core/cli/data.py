"""``python -m core dqa``, ``schema`` and ``query``: a DQA directory's counts and repairs, a question's database
schema, one read-only query on it."""
from __future__ import annotations

import argparse
import json
import sys
import time

from core.backends.registry import open_backend
from core.cli.args import add_query_limit_arguments, add_question_arguments
from core.config.settings import dqa_dir
from core.model.numbers import spans
from core.scenarios.dqa.source import SCENARIOS
from core.scenarios import catalog
from core.scenarios.dqa.source import DQA, DQAError
from core.analysis.format import number


def _dqa(path: str | None) -> DQA:
    root = path or dqa_dir()
    if root is None:
        raise DQAError("no DQA directory: set DQA_DIR to the data/ folder of the myeon9h/PlanRAG repository")
    return DQA(root)


def repairs(dqa: DQA, scenario: str) -> list[tuple[str, str]]:
    """The data repairs made in a scenario's files: (repair, the questions whose files needed it), in the order
    first met; a repair is its rule with the kind of file (SQL or graph) it was made in."""
    found: dict[str, list[int]] = {}
    for question in dqa.questions(scenario):
        for note in dqa.notes(question):
            file, _, rule = note.partition(": ")
            kind = "graph" if file.endswith(".cql") else "SQL"
            found.setdefault(f"{rule} ({kind})", []).append(question.number)
    return [(repair, spans(sorted(set(numbers)))) for repair, numbers in found.items()]


def cmd_dqa(args) -> int:
    """Print the question and distinct-database counts of a DQA directory, and the data repairs it needed."""
    start = time.perf_counter()
    dqa = _dqa(args.dir)
    for scenario in SCENARIOS:
        n = len(dqa.questions(scenario))
        print(f"{scenario}: {n} questions ({dqa.distinct_databases(scenario)} distinct databases)")
    print("data repairs (by rule, never by dropping rows):")
    for scenario in SCENARIOS:
        for repair, questions in repairs(dqa, scenario) or [("none", "")]:
            print(f"  {scenario}: {repair}" + (f": questions {questions}" if questions else ""))
    print(f"set {dqa.name}, imported in {number(time.perf_counter() - start, decimals=2)} s", file=sys.stderr)
    return 0


def _open(args):
    """The backend ``args.db`` opened on question ``args.question`` of ``args.source`` and ``args.scenario``."""
    question = catalog.question(args.source or catalog.default_source(args.scenario), args.scenario, args.question)
    return open_backend(args.db, catalog.database(question))


def cmd_schema(args) -> int:
    """Print the schema of a question's database, as the agents are given it."""
    backend = _open(args)
    try:
        print(backend.schema_text())
    finally:
        backend.close()
    return 0


def cmd_query(args) -> int:
    """Run one read-only query on a question's database (DQA's, the demo's or the scenario's own) and print its
    rows."""
    backend = _open(args)
    try:
        result = backend.query(args.query, timeout_s=args.timeout, row_cap=args.row_cap).capped(args.cell_chars)
    finally:
        backend.close()
    if args.json:
        print(json.dumps(result.as_json(), default=str))
    else:
        print(result.to_text(max_rows=args.row_cap, max_chars=10**9))
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``dqa``, ``schema`` and ``query`` subcommands."""
    p = sub.add_parser("dqa", help="count the questions and distinct databases of a DQA directory")
    p.add_argument("dir", nargs="?", help="the DQA data folder (default: DQA_DIR or ../shared/dqa)")
    p.set_defaults(func=cmd_dqa)

    p = sub.add_parser("schema", help="print the schema of a question's database, as the agents are given it")
    add_question_arguments(p)
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("query", help="run one read-only query on a question's database")
    add_question_arguments(p)
    p.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...]]}')
    add_query_limit_arguments(p, row_cap=1000, observation=False)
    p.add_argument("query", help="SQL (MySQL dialect) or Cypher, by the database")
    p.set_defaults(func=cmd_query)
