"""Command line: rank one question's candidates, or check the whole DQA benchmark.

    python -m sims rank locating --db FILE.sql --country TAG [--mode dqa|rules] [--json]
    python -m sims rank building --db FILE.sql --goods NAME [--mode dqa|rules] [--json]
    python -m sims check [--dqa DIR] [--mode dqa|rules]
    python -m sims generate --scenario locating|building --questions K --seed S --out DIR [knobs]

``rank --json`` prints a JSON array, best first: ``[{"candidate": ..., "score": ..., "rank": ..., "tied": ...,
"measure": "profit", "better": "higher"}, ...]`` where ``rank`` is the best position of the entry's tie group (scores
equal within 1e-9 relative), shared by the group, and ``tied`` the group's size; ``measure`` is what the score is (the
country's profit, or the goods' price) and ``better`` which way a score is better (``higher`` or ``lower``).
``check`` reads DQA_DIR (else ../shared/dqa) without --dqa.
Exit status: 0 success, 1 the check found disagreements, 2 bad input (message names the file).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from sims import building, locating
from sims.check import check_benchmark
from sims.generate_command import add_generate_parser, run_generate
from sims.files import FileRefused
from sims.ranking import MODES, InputError, Ranking
from sims.sqldump import DumpError, read_sql_dump


MODE_HELP = ("dqa: as the DQA labels were computed (default); rules: as the paper's text states the rules "
             "(docs/simulators.md)")
DEFAULT_DQA = Path(__file__).resolve().parent.parent.parent / "shared" / "dqa"


def _dqa_dir() -> Path | None:
    """DQA_DIR, else ../shared/dqa beside the project when it exists (as ``python -m core`` finds it), else None."""
    value = os.environ.get("DQA_DIR")
    return Path(value).expanduser() if value else DEFAULT_DQA if DEFAULT_DQA.is_dir() else None


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
        sub.add_argument("--mode", choices=MODES, default="dqa", help=MODE_HELP)
        sub.add_argument("--json", action="store_true",
                         help='print a JSON array, best first: [{"candidate", "score", "rank", "tied", "measure", '
                              '"better"}, ...]; rank: the best position of its tie group, tied: the group\'s size')
    check = commands.add_parser("check", help="rank every DQA question and compare with the answers")
    check.add_argument("--dqa", type=Path, help="the DQA data directory (default: DQA_DIR, else ../shared/dqa)")
    check.add_argument("--mode", choices=MODES, default="dqa", help=MODE_HELP)
    add_generate_parser(commands)
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
    for e, (rank, tied) in zip(ranking.entries, ranking.groups()):
        shown = f"={rank}" if tied > 1 else str(rank)
        lines.append(f"{shown:>4}  {e.candidate!s:<28} {e.score:>14.6f} {ranking.gain(e.candidate):>12.6f}")
    if ranking.all_tied:
        lines.append("every candidate ties: no decision is better than another")
    elif any(t > 1 for _, t in ranking.groups()):
        lines.append("=N: tied with the others of rank N (scores equal within 1e-9 relative)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "generate":
        return run_generate(args)
    try:
        if args.command == "check":
            root = args.dqa or _dqa_dir()
            if root is None:
                print("error: no DQA directory: set DQA_DIR (or give --dqa DIR) to the data/ folder of the "
                      "myeon9h/PlanRAG repository", file=sys.stderr)
                return 2
            if not root.is_dir():
                print(f"error: the DQA directory {root} is not a folder", file=sys.stderr)
                return 2
            report = check_benchmark(root, args.mode)
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
    except (DumpError, InputError, FileRefused) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        measure, better = ("profit", "higher") if ranking.higher_is_better else ("price", "lower")
        print(json.dumps([{"candidate": e.candidate, "score": e.score, "rank": rank, "tied": tied, "measure": measure,
                           "better": better} for e, (rank, tied) in zip(ranking.entries, ranking.groups())]))
    else:
        print(_table(ranking))
    return 0


def run(argv: list[str] | None = None) -> int:
    """``main``, quiet when the reader of its output goes away (``python -m sims rank ... | head``)."""
    try:
        code = main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python exits
        return 141  # as a shell reports a process ended by SIGPIPE


if __name__ == "__main__":
    sys.exit(run())
