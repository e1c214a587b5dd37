"""``python -m core override``: override the grade of a stored run (also a benchmark item's run), or restore it.

    python -m core override RUN_ID --decision D [--by NAME] [--note TEXT]
    python -m core override RUN_ID --no-decision [--by NAME] [--note TEXT]
    python -m core override RUN_ID --clear
    python -m core override --list

The override is stored with who (``--by``, default ``local operator``: whoever runs commands here is the machine's
operator) and when (DATA_HOME/overrides.sqlite); Run, History and Benchmark views and the
benchmark reports use it and say so.
"""
from __future__ import annotations

import argparse
import json
import sys
from core.analysis.format import timestamp
from core.auth.roles import local_operator
from core.config.home import check as check_home
from core.store.overrides import OverrideStore
from core.store.runs import RunStore

DESCRIPTION = __doc__.split("\n\n", 1)[0].replace("``", "")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="the run whose grade to override")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--decision", help="the candidate the answer commits to (a trade node or building id)")
    what.add_argument("--no-decision", action="store_true", help="the answer commits to no candidate")
    what.add_argument("--clear", action="store_true", help="restore the automatic grade")
    what.add_argument("--list", action="store_true", help="print every override as JSON lines")
    p.add_argument("--by", default="", help="who overrides (default: local operator)")
    p.add_argument("--note", default="", help="why")


def main(args) -> int:
    from core.actions.grades import override, restore  # heavy: loads numpy, pandas
    from core.scenarios.catalog import run_question  # heavy: loads numpy, pandas

    check_home()  # a home that is a file or read-only: an error line, not a traceback
    store = OverrideStore()
    if args.list:
        for run_id, o in store.all().items():
            print(json.dumps({"run_id": run_id, **o.to_dict()}))
        return 0
    if not args.run_id:
        print("error: give a RUN_ID (or --list)", file=sys.stderr)
        return 2
    if args.clear:
        print(f"{args.run_id}: automatic grade restored" if restore(args.run_id, who=local_operator(), store=store)
              else f"{args.run_id} had no override")
        return 0
    if args.decision is None and not args.no_decision:
        print("error: give --decision D, --no-decision or --clear", file=sys.stderr)
        return 2
    try:
        record = RunStore().get(args.run_id, events=False)
    except KeyError:
        print(f"error: run {args.run_id} is not in the run store", file=sys.stderr)
        return 1
    candidates, _ = run_question(record.settings)
    decision = None
    if not args.no_decision:
        by_text = {str(c).lower(): c for c in candidates}
        decision = by_text.get(args.decision.strip().lower())
        if decision is None:
            print(f"error: {args.decision!r} is not a candidate of this question", file=sys.stderr)
            return 1
    o = override(args.run_id, record.settings, decision, who=local_operator(), by=args.by, note=args.note, store=store)
    verdict = {True: "correct", False: "wrong", None: "no label"}[o.correct]
    print(f"{args.run_id}: grade overridden by {o.by} at {timestamp(o.at)}: "
          f"{'no decision' if decision is None else decision} ({verdict})")
    return 0
