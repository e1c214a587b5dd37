"""The scenario registry: every decision problem the workbench knows, by name — the two DQA scenarios (built in),
the plugin scenarios shipped in ``assets/scenarios``, and the user's own, found in the scenarios folder: the one a
session chose (``use_folder``, the Settings page), else ``PLANRAG_SCENARIOS``, else ``scenarios/`` in the project
home ``PLANRAG_HOME``. docs/scenarios.md describes a plugin folder.

The chosen folder is a context variable: it holds in the thread (and Streamlit script run) that chose it, and in
the threads started with ``in_context`` (a run's or a benchmark's), so sessions with different folders never see
each other's scenarios. Each folder is scanned once (``reload`` scans again)."""
from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from core.config import settings
from core.scenarios.base import Effect, Registry, ScenarioType, Source, ViewOption
from core.scenarios.dqa.kinds import Building, Locating
from core.scenarios.plugins.folder import MANIFEST, FolderScenario, ScenarioError
from core.config.settings import PROJECT_ROOT
from core.model import run_settings
from core.model.graph import GraphData, GraphMapping, graph_of_tables
from core.model.question import Database, DecisionWords, Question
from sims.ranking import Ranking

__all__ = ["Effect", "FolderScenario", "ScenarioError", "ScenarioType", "Source", "ViewOption", "get", "names",
           "all_types", "problems", "reload", "scenarios_dir", "use_folder", "in_context", "ByScenario",
           "scenario_type", "target", "candidates", "default_mode", "ranking", "DECISION_WORDS", "graph_from_tables"]

BUILTIN_DIR = PROJECT_ROOT / "assets" / "scenarios"
_LOCK = threading.Lock()
_REGISTRIES: dict[Path, Registry] = {}
_FOLDER: contextvars.ContextVar[Path | None] = contextvars.ContextVar("planrag_scenarios_folder", default=None)


def scenarios_dir() -> Path:
    """The scenarios folder in use here: the one chosen by ``use_folder``, else the configured one
    (core.config.settings.scenarios_dir)."""
    return _FOLDER.get() or settings.scenarios_dir()


def use_folder(folder: str | Path | None) -> None:
    """Use ``folder`` as the scenarios folder in this context (None: the configured one)."""
    _FOLDER.set(Path(folder).expanduser() if folder else None)


def in_context(target: Callable) -> Callable:
    """``target`` wrapped to run in a copy of this context (for a new thread: it then sees this scenarios
    folder)."""
    context = contextvars.copy_context()
    return lambda *args, **kwargs: context.run(target, *args, **kwargs)


def _scan(folder: Path) -> Registry:
    reg = Registry({t.name: t for t in (Locating(), Building())})
    for parent in (BUILTIN_DIR, folder):
        if not parent.is_dir():
            continue
        for path in sorted(p for p in parent.iterdir() if os.path.lexists(p / MANIFEST)):
            try:
                t = FolderScenario(path)
            except ScenarioError as e:
                reg.problems.append(str(e))
                continue
            if t.name in reg.types:
                reg.problems.append(f"{path}: scenario name {t.name!r} is already used by {reg.types[t.name].origin}")
                continue
            reg.types[t.name] = t
    return reg


def _registry() -> Registry:
    folder = Path(os.path.realpath(scenarios_dir()))  # a link that loops is no folder, never an error here
    with _LOCK:
        if folder not in _REGISTRIES:
            _REGISTRIES[folder] = _scan(folder)
        return _REGISTRIES[folder]


def reload() -> None:
    """Forget the scenarios found so far (the next call scans the folders again)."""
    with _LOCK:
        _REGISTRIES.clear()


def names() -> list[str]:
    """Every scenario's name: the DQA ones first, then the plugins by folder order."""
    return list(_registry().types)


def all_types() -> list[ScenarioType]:
    return list(_registry().types.values())


def problems() -> list[str]:
    """Why some folders in the scenario folders were not loaded (file, line and reason)."""
    return list(_registry().problems)


def get(name: str) -> ScenarioType:
    """The scenario type called ``name`` in this context's folder, else in another folder scanned in this process;
    KeyError listing the known ones otherwise."""
    types = _registry().types
    if name in types:
        return types[name]
    with _LOCK:  # a thread that lost its session's context (e.g. a fragment's rerun): a folder scanned before
        for registry in _REGISTRIES.values():
            if name in registry.types:
                return registry.types[name]
    raise KeyError(f"unknown scenario {name!r}; known: {', '.join(types)}")


class ByScenario(Mapping):
    """One attribute of every scenario type, as a mapping by scenario name (``ByScenario("paper_n")["locating"]`` is
    200)."""

    def __init__(self, attribute: str):
        self.attribute = attribute

    def __getitem__(self, name: str):
        try:
            return getattr(get(name), self.attribute)
        except KeyError:
            raise KeyError(name) from None

    def __iter__(self):
        return iter(names())

    def __len__(self) -> int:
        return len(names())


DECISION_WORDS: Mapping[str, DecisionWords] = ByScenario("words")
"""How each scenario's answers name decisions, from its declaration (``DECISION_WORDS["building"]``)."""


def scenario_type(name: str) -> ScenarioType:
    """The registered scenario type called ``name`` (``get``)."""
    return get(name)


def target(question: Question) -> str:
    """A short description of the question's decision target."""
    return get(question.scenario).target(question)


def candidates(question: Question, database: Database) -> list:
    """Every candidate decision, in table order (trade nodes but the home node, building ids, a plugin's list)."""
    return get(question.scenario).candidates(question, database)


def default_mode(question: Question) -> str:
    """The simulation mode that labels a question: ``dqa`` for the benchmark, ``rules`` for the demo scenarios."""
    return get(question.scenario).default_mode(question)


def ranking(question: Question, database: Database, mode: str | None = None) -> Ranking:
    """The simulator's ranking of every candidate decision of the question (best first, with the baseline); a
    scenario without a simulator raises sims.ranking.InputError."""
    return get(question.scenario).ranking(question, database, mode)


def graph_from_tables(mapping: GraphMapping | str, tables) -> GraphData:
    """The graph view of a SQL database by ``mapping``, or by the graph mapping of the scenario so named."""
    return graph_of_tables(get(mapping).graph_mapping if isinstance(mapping, str) else mapping, tables)


run_settings.scenario_sources = lambda name: get(name).source_keys()
