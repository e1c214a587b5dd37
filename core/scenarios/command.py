"""``python -m core scenario``: ``new NAME`` writes a documented skeleton, ``check PATH`` validates a scenario
folder (declaration, data, questions, candidates, the simulator on every candidate), ``list`` shows the scenarios
found."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

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
    from core.scenarios import scenarios_dir
    from core.scenarios.plugin import NAME
    from core.scenarios.skeleton import files

    if not NAME.match(args.name) or args.name in ("locating", "building"):
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


def check(path: str | Path) -> tuple[list[str], list[str]]:
    """(problems, facts) of a scenario folder: each problem names the file (and line) and what to fix."""
    from core.scenarios.plugin import FolderScenario, ScenarioError
    from sims.ranking import InputError

    facts: list[str] = []
    try:
        kind = FolderScenario(path)
        questions = kind.questions()
        database = kind.database()
    except ScenarioError as e:
        return [str(e)], facts
    facts.append(f"scenario {kind.name} ({kind.title}): {len(questions)} questions; tables "
                 + ", ".join(f"{t.name} ({len(t.rows)} rows)" for t in database.tables))
    problems = []
    net = kind.spec.get("network", {})
    for part in ("nodes", "edges"):
        for entry in net.get(part, []):
            table = entry.get("table")
            if table not in database.tables:
                problems.append(f"{kind.manifest}: network.{part} table {table!r} is not a table of the data")
                continue
            cols = database.tables[table].column_names
            for key in ("key", "x", "y", "label", "size", "source", "target", "weight"):
                if entry.get(key) and entry[key] not in cols:
                    problems.append(f"{kind.manifest}: network.{part} {key} = {entry[key]!r} is not a column of "
                                    f"{table} ({', '.join(cols)})")
    for q in questions:
        try:
            cands = kind.candidates(q, database)
            kind.candidate_names(q, database)
        except (ScenarioError, InputError) as e:
            problems.append(str(e))
            continue
        if not cands:
            problems.append(f"{kind.manifest}: question {q.number} has no candidate (the candidates query or "
                            "function returned nothing)")
            continue
        if len(set(cands)) != len(cands):
            problems.append(f"{kind.manifest}: question {q.number} lists a candidate twice")
        if not kind.can_check:
            continue
        try:
            ranking = kind.ranking(q, database)
            for c in cands:
                kind.what_if(q, database, c, kind.default_mode(q))
        except (ScenarioError, InputError) as e:
            problems.append(str(e))
            continue
        except (TypeError, ValueError) as e:
            problems.append(f"{kind.folder / kind.spec['simulator']['file']}: what_if must return "
                            f"{{item: (before, after)}} ({e})")
            continue
        best = ranking.best
        facts.append(f"question {q.number} ({kind.target(q)}): {len(cands)} candidates, best {best.candidate} "
                     f"({best.score:.6g}), label {q.answer}" + (" — every candidate ties" if ranking.all_tied else ""))
    problems = list(dict.fromkeys(problems))  # the same defect met on every question: said once
    if not kind.can_check:
        facts.append("no [simulator]: agents run and answers are recorded, but decisions cannot be checked")
    return problems, facts


def check_folder(folder: str | Path) -> list[tuple[Path, list[str], list[str]]]:
    """``check`` of every scenario folder (a sub-folder with a scenario.toml) in a scenarios folder: (path,
    problems, facts) each, in name order; one entry with the problem when ``folder`` is not a folder."""
    from core.scenarios.plugin import MANIFEST

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return [(folder, [f"{folder}: no such folder (python -m core scenario new NAME creates it with a first "
                          "scenario)"], [])]
    return [(path, *check(path)) for path in sorted(p for p in folder.iterdir() if os.path.lexists(p / MANIFEST))]


def cmd_check(args) -> int:
    problems, facts = check(args.path)
    for fact in facts:
        print(fact)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    print("ok" if not problems else f"{len(problems)} problem(s)", file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


def cmd_list(args) -> int:
    from core import scenarios

    for kind in scenarios.all_types():
        checked = "simulator" if kind.can_check else "no simulator"
        print(f"{kind.name}: {kind.title} ({checked}; sources {', '.join(kind.source_keys())}; {kind.origin})")
    for problem in scenarios.problems():
        print(f"not loaded: {problem}", file=sys.stderr)
    print(f"scenarios folder: {scenarios.scenarios_dir()}", file=sys.stderr)
    return 0
