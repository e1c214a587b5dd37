"""Command line: rank one question's candidates, or check the whole DQA benchmark.

    python -m sims rank locating --db FILE.sql --country TAG [--mode dqa|rules] [--json]
    python -m sims rank building --db FILE.sql --goods NAME [--mode dqa|rules] [--json]
    python -m sims check --dqa DIR [--mode dqa|rules]

``rank --json`` prints a JSON array, best first: ``[{"candidate": ..., "score": ...}, ...]``.
Exit status: 0 success, 1 the check found disagreements, 2 bad input (message names the file).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sims import building, locating
from sims.check import check_benchmark
from sims.ranking import MODES, InputError, Ranking
from sims.sqldump import DumpError, read_sql_dump


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sims", description="DQA decision simulators")
    commands = parser.add_subparsers(dest="command", required=True)
    rank = commands.add_parser("rank", help="rank every candidate of one question")
    scenarios = rank.add_subparsers(dest="scenario", required=True)
    for scenario, target, help_text in (("locating", "--country", "country tag, e.g. SWE"),
                                        ("building", "--goods", "goods name, e.g. furniture")):
        sub = scenarios.add_parser(scenario, help=f"rank {scenario} candidates")
        sub.add_argument("--db", required=True, type=Path, help="database dump in the DQA SQL format")
        sub.add_argument(target, required=True, help=help_text)
        sub.add_argument("--mode", choices=MODES, default="dqa")
        sub.add_argument("--json", action="store_true", help="print a JSON array, best first")
    check = commands.add_parser("check", help="rank every DQA question and compare with the answers")
    check.add_argument("--dqa", required=True, type=Path, help="the DQA data directory")
    check.add_argument("--mode", choices=MODES, default="dqa")
    return parser


def _rank(args: argparse.Namespace) -> Ranking:
    tables = read_sql_dump(args.db)
    try:
        if args.scenario == "locating":
            return locating.rank(tables, args.country, args.mode)
        return building.rank(tables, args.goods, args.mode)
    except InputError as e:
        raise InputError(f"{args.db}: {e}") from None


def _table(ranking: Ranking) -> str:
    what = "profit" if ranking.higher_is_better else "price"
    lines = [f"{ranking.scenario} ({ranking.mode} mode): pick {ranking.label()}, "
             f"baseline {what} {ranking.baseline:.6g}",
             f"{'rank':>4}  {'candidate':<28} {what:>14} {'gain':>12}"]
    for i, e in enumerate(ranking.entries, 1):
        lines.append(f"{i:>4}  {e.candidate!s:<28} {e.score:>14.6f} {ranking.gain(e.candidate):>12.6f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "check":
            report = check_benchmark(args.dqa, args.mode)
            for part in (report.locating, report.building):
                print(f"{part.scenario}: {part.agree}/{part.total} agree")
                for miss in part.misses:
                    print(f"  question {miss.number}: expected {miss.expected!r}, got {miss.got!r}")
            print(f"wall time: {report.seconds:.3f} s")
            return 0 if report.ok else 1
        ranking = _rank(args)
    except OSError as e:
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except (DumpError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{"candidate": e.candidate, "score": e.score} for e in ranking.entries]))
    else:
        print(_table(ranking))
    return 0


if __name__ == "__main__":
    sys.exit(main())
