"""``python -m core scenario``: ``new NAME`` writes a documented skeleton, ``check PATH`` validates a scenario
folder (declaration, data, questions, candidates, the simulator on every candidate), ``list`` shows the scenarios
found."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.scenarios.plugins.checks import check
from core.scenarios.dqa.source import SCENARIOS as DQA_SCENARIOS
from core.scenarios import scenarios_dir
from core.scenarios.plugins.folder import NAME
from core.scenarios.plugins.skeleton import files
from core import scenarios

DESCRIPTION = """Scenario plugins: your own decision problems (docs/scenarios.md).

  python -m core scenario new NAME [--dir DIR]   write a skeleton in DIR/NAME (default: the scenarios folder)
  python -m core scenario check PATH             validate a scenario folder; exit 1 with file and line on a problem
  python -m core scenario list                   the scenarios found, and folders that could not be loaded"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="scenario_command", required=True)
    new = sub.add_parser("new", help="write a documented skeleton")
    new.add_argument("name", help="lowercase letters, digits and hyphens")
    new.add_argument("--dir", help="the parent folder (default: the scenarios folder, PLANRAG_SCENARIOS or "
                                   "PLANRAG_HOME/scenarios)")
    new.set_defaults(func=cmd_new)
    check = sub.add_parser("check", help="validate a scenario folder")
    check.add_argument("path", help="the scenario folder (or its scenario.toml) to validate")
    check.set_defaults(func=cmd_check)
    listing = sub.add_parser("list", help="list the scenarios found")
    listing.set_defaults(func=cmd_list)


def cmd_new(args) -> int:
    if not NAME.match(args.name) or args.name in DQA_SCENARIOS:
        print(f"error: {args.name!r} is not a usable scenario name (lowercase letters, digits and hyphens, starting "
              "with a letter; not locating or building)", file=sys.stderr)
        return 2
    folder = Path(args.dir).expanduser() / args.name if args.dir else scenarios_dir() / args.name
    if folder.exists():
        print(f"error: {folder} exists already; nothing written", file=sys.stderr)
        return 1
    try:
        for rel, text in files(args.name, str(folder)).items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as e:  # the folder's parent is a file, or not writable
        print(f"error: cannot write the skeleton in {folder}: {e.strerror or e}"
              f"{f' ({e.filename})' if e.filename else ''}", file=sys.stderr)
        return 1
    print(f"wrote {folder}: scenario.toml, rules.md, simulator.py, data/supplier.csv")
    print(f"check it with: python -m core scenario check {folder}")
    return 0



def cmd_check(args) -> int:
    problems, facts = check(args.path)
    for fact in facts:
        print(fact)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    print("ok" if not problems else f"{len(problems)} problem(s)", file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


def cmd_list(args) -> int:
    for kind in scenarios.all_types():
        checked = "simulator" if kind.can_check else "no simulator"
        print(f"{kind.name}: {kind.title} ({checked}; sources {', '.join(kind.source_keys())}; {kind.origin})")
    for problem in scenarios.problems():
        print(f"not loaded: {problem}", file=sys.stderr)
    print(f"scenarios folder: {scenarios.scenarios_dir()}", file=sys.stderr)
    return 0
