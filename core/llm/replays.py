"""Replay transcripts: recorded replies an agent can run on with no key and no network (``replay:FILE``).

The app ships some in ``assets/replays``; ``PLANRAG_REPLAYS`` adds folders (separated like PATH). A file is
found by its name, ``{source}_{scenario}_{number}_{language}_{technique}.json`` — e.g.
``demo_locating_1_sql_planrag.json``: PlanRAG on demo Locating question 1, querying a SQL database.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.llm.client import REPLAY_DIR, REPLAY_PREFIX, replay_dirs  # noqa: F401 REPLAY_DIR: the shipped folder, named here too



@dataclass(frozen=True)
class Replay:
    path: Path
    source: str
    scenario: str
    number: int
    language: str  # sql | cypher
    technique: str

    @property
    def spec(self) -> str:
        """The model spec a run is given: ``replay:/absolute/path.json``."""
        return f"{REPLAY_PREFIX}{self.path}"


def _parse(path: Path) -> Replay | None:
    parts = path.stem.split("_")
    if len(parts) != 5 or not parts[2].isdigit():
        return None
    source, scenario, number, language, technique = parts
    return Replay(path.resolve(), source, scenario, int(number), language, technique)


def replays(source: str, scenario: str, number: int, language: str | None = None,
            technique: str | None = None) -> list[Replay]:
    """The replays recorded for one question, optionally only those for a database language and a technique."""
    found = []
    for folder in replay_dirs():
        for path in sorted(folder.glob("*.json")):
            r = _parse(path)
            if (r and (r.source, r.scenario, r.number) == (source, scenario, number)
                    and language in (None, r.language) and technique in (None, r.technique)):
                found.append(r)
    return found


def model_label(llm: str) -> str:
    """How a run's model reads in a table: the model name, or ``replay: FILE`` without the folder."""
    if llm.startswith(REPLAY_PREFIX):
        return f"replay: {Path(llm[len(REPLAY_PREFIX):]).name}"
    return llm
