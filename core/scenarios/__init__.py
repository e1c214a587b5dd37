"""The scenario registry: every decision problem the workbench knows, by name — the two DQA scenarios (built in),
the plugin scenarios shipped in ``assets/scenarios``, and the user's own, found in the scenarios folder
(``PLANRAG_SCENARIOS``, default ``scenarios/`` in the project home ``PLANRAG_HOME``). docs/scenarios.md describes a
plugin folder."""
from __future__ import annotations

import threading
from collections.abc import Mapping

from core.scenarios.base import Effect, Registry, ScenarioType, Source, ViewOption
from core.scenarios.dqa_kinds import Building, Locating
from core.scenarios.plugin import MANIFEST, FolderScenario, ScenarioError
from core.settings import PROJECT_ROOT, scenarios_dir

__all__ = ["Effect", "FolderScenario", "ScenarioError", "ScenarioType", "Source", "ViewOption", "get", "names",
           "all_types", "problems", "reload", "scenarios_dir", "ByScenario"]

BUILTIN_DIR = PROJECT_ROOT / "assets" / "scenarios"
_LOCK = threading.Lock()
_REGISTRY: Registry | None = None


def _scan() -> Registry:
    reg = Registry({t.name: t for t in (Locating(), Building())})
    for folder in (BUILTIN_DIR, scenarios_dir()):
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.iterdir() if (p / MANIFEST).is_file()):
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
    global _REGISTRY
    with _LOCK:
        if _REGISTRY is None:
            _REGISTRY = _scan()
        return _REGISTRY


def reload() -> None:
    """Forget the scenarios found so far (the next call scans the folders again)."""
    global _REGISTRY
    with _LOCK:
        _REGISTRY = None


def names() -> list[str]:
    """Every scenario's name: the DQA ones first, then the plugins by folder order."""
    return list(_registry().types)


def all_types() -> list[ScenarioType]:
    return list(_registry().types.values())


def problems() -> list[str]:
    """Why some folders in the scenario folders were not loaded (file, line and reason)."""
    return list(_registry().problems)


def get(name: str) -> ScenarioType:
    """The scenario type called ``name``; KeyError listing the known ones otherwise."""
    types = _registry().types
    if name not in types:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(types)}")
    return types[name]


class ByScenario(Mapping):
    """One attribute of every scenario type, by scenario name (``ByScenario("paper_n")["locating"]`` is 200): for
    tables that used to be keyed by the DQA scenarios' names."""

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
