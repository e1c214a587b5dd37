"""Where questions come from: the built-in demo scenarios, and DQA when its directory is set."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from core import demo
from core.dqa import DQA, DQAError
from core.scenario import Database, Question, ScenarioKind
from core.settings import dqa_dir

SOURCES = {"demo": "Built-in demo scenarios", "dqa": "DQA benchmark"}


@lru_cache(maxsize=4)
def _dqa(root: str) -> DQA:
    return DQA(root)


def dqa_benchmark(root: str | Path | None = None) -> DQA:
    """The DQA benchmark at ``root`` (default: the configured directory), imported once per process."""
    root = root or dqa_dir()
    if root is None:
        raise DQAError("DQA is not configured: set DQA_DIR (or the DQA directory in Settings) to the data/ "
                       "folder of the public myeon9h/PlanRAG repository")
    return _dqa(str(Path(root).resolve()))


def questions(source: str, scenario: ScenarioKind, root: str | Path | None = None) -> list[Question]:
    """The questions of one source and scenario, in file order."""
    if source == "demo":
        return demo.questions(scenario)
    return dqa_benchmark(root).questions(scenario)


def question(source: str, scenario: ScenarioKind, number: int, root: str | Path | None = None) -> Question:
    """Question N of a source and scenario; raises DQAError for an unknown number."""
    qs = questions(source, scenario, root)
    if not 1 <= number <= len(qs):
        raise DQAError(f"no {source} {scenario} question {number}: there are questions 1-{len(qs)}")
    return qs[number - 1]


def database(q: Question, root: str | Path | None = None) -> Database:
    """The question's database."""
    if q.source == "demo":
        return demo.database(q)
    return dqa_benchmark(root).database(q)
