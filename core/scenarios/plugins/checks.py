"""Checking scenario plugin folders (``python -m core scenario check``, the Settings page): the declaration, the
data, the questions, the candidates and the simulator on every candidate, each problem with its file and line."""
from __future__ import annotations

import os

from pathlib import Path

from core.scenarios.plugins.folder import MANIFEST, FolderScenario, ScenarioError
from sims.ranking import InputError


def check(path: str | Path) -> tuple[list[str], list[str]]:
    """(problems, facts) of a scenario folder: each problem names the file (and line) and what to fix."""
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
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        return [(folder, [f"{folder}: no such folder (python -m core scenario new NAME creates it with a first "
                          "scenario)"], [])]
    return [(path, *check(path)) for path in sorted(p for p in folder.iterdir() if os.path.lexists(p / MANIFEST))]
