"""``python -m sims generate``: write a fresh DQA-style question set with known answers (see sims.generator and
docs/generator.md). Exit status 0 on success, 2 when the knobs cannot be met or the folder must not be written."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from sims.generator import SCENARIOS, GenerateError, Knobs, generate


def span(text: str) -> tuple[int, int]:
    """``N`` or ``LO-HI`` as (LO, HI)."""
    lo, sep, hi = text.partition("-")
    try:
        return (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or LO-HI") from None


def add_generate_parser(commands) -> None:
    p = commands.add_parser(
        "generate", help="write a fresh DQA-style question set with known answers",
        description="Write K questions in the DQA layout (SQL dumps, graph files, the question file with labels, "
                    "questions/rankings.json with each question's ranking summary) into DIR, a new or empty folder "
                    "or a set made here (the other scenario's part is kept). Labels are the dqa-mode simulators' "
                    "picks; no label depends on float rounding. The same seed and knobs give the same files.")
    p.add_argument("--scenario", choices=SCENARIOS, required=True, help="locating or building: which questions to make")
    p.add_argument("--questions", type=int, required=True, metavar="K", help="how many questions to write")
    p.add_argument("--seed", type=int, required=True, metavar="S",
                   help="the random seed: the same seed writes the same bytes")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the folder to write the set to (new, or one written by generate before)")
    p.add_argument("--size", type=int, help="trade nodes (Locating, default 80) or goods (Building, default 52)")
    p.add_argument("--countries", type=int, help="Locating: countries in a network (default 665 per 80 nodes)")
    p.add_argument("--candidates", type=span, metavar="LO[-HI]",
                   help="Locating: the country's nodes upstream of its home, the candidates that change its profit "
                        "(default 1-8); Building: buildings in the market, all candidates (default 40-150)")
    p.add_argument("--hops", type=span, default=(1, 3), metavar="LO[-HI]",
                   help="Locating: how many hops upstream of the home node those nodes lie (default 1-3)")
    p.add_argument("--min-margin", type=float, default=0.0, metavar="X",
                   help="the runner-up scores at least X below the best, as a share of the best score (e.g. 0.01)")
    p.add_argument("--max-margin", type=float, metavar="X", help="at most X: ask for near-ties (e.g. 0.002)")
    p.add_argument("--degenerate", type=float, default=0.0, metavar="SHARE",
                   help="Locating: share of questions where every candidate ties (default 0)")
    p.add_argument("--per-db", type=int, default=1, metavar="Q",
                   help="questions per database: countries of one network or goods of one market (default 1)")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                   help="processes (default 2, or 1 on one core); the files do not depend on it")
    p.add_argument("--name", help="the set's name in reports (default: kept, else the folder's name)")


def run_generate(args: argparse.Namespace) -> int:
    knobs = Knobs(args.scenario, args.questions, args.seed, size=args.size, countries=args.countries,
                  candidates=args.candidates, hops=args.hops, min_margin=args.min_margin, max_margin=args.max_margin,
                  degenerate=args.degenerate, per_db=args.per_db)
    try:
        report = generate(knobs, args.out, jobs=max(1, args.jobs), name=args.name)
    except GenerateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    margins = sorted(report.margins)
    spread = (f"margin min {margins[0]:.4g}, median {statistics.median(margins):.4g}, max {margins[-1]:.4g}"
              if margins else "no margins")
    print(f"{report.scenario}: {report.questions} questions on {report.databases} databases in {report.root} "
          f"(set {report.name!r}); {report.degenerate} degenerate; {spread}")
    print(f"wall time: {report.seconds:.2f} s")
    return 0
