"""A technique's code as the runtime drives it: its ``Engine``, loaded from its folder (``core.techniques.<folder>.engine``,
whose ``ENGINE`` it is) once per process when a run first needs it. The shared machinery names no technique: what
it knows of one comes from the registry (core.model.technique) and from its engine."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from core.agents.workspace import Workspace
from core.model.run_settings import Review, RunSettings
from core.model.technique import Technique

if TYPE_CHECKING:  # LangGraph (0.6 s of imports) is loaded by the engines themselves, not by who only asks about one
    from langgraph.graph import StateGraph


class Engine:
    """What a technique gives the runtime: the graph it runs on (``builder(prompt_setting)``, the uncompiled graph of
    a run in that setting: techniques with the same builder share one compiled graph per setting), the state a run
    starts in, and its own checks of a review."""

    builder: Callable[[str], StateGraph]
    #: its graph's nodes that make an LLM call: a step (``Event.step``) starts when one of them is next; a branch's
    #: edited state enters its graph as written by the first
    llm_nodes: tuple[str, ...]
    #: its graph's nodes that run or review a query: a branch at a query starts before them (none: it takes none)
    query_nodes: tuple[str, ...] = ()

    def initial_state(self, tech: Technique, settings: RunSettings, ws: Workspace, hitl: str,
                      note: str | None) -> dict:
        """The state a run of ``tech`` with ``settings`` starts in (``hitl``: its review mode; ``note``: the
        dialect note of the database)."""
        raise NotImplementedError

    def check_review(self, review: Review, values: dict) -> None:
        """ValueError for a review that does not fit the paused run's state ``values`` (default: any fits)."""

    def planner_used(self, settings: RunSettings, language: str) -> str | None:
        """The planner prompt a run used, for techniques with a planner setting (default None)."""
        return None


def engine(tech: Technique) -> Engine:
    """The engine of ``tech``, from its folder."""
    return _engine(tech.folder)


@cache
def _engine(folder: str) -> Engine:
    return importlib.import_module(f"core.techniques.{folder}.engine").ENGINE
