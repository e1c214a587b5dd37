"""The decision-making techniques: the paper's four, as the flags that parameterise the one agent loop
(graph.py); REAPER, which writes its whole retrieval plan in one call (reaper.py); and AutoPlan, PlanRAG
started from the scenario's learned plan (core.autoplan)."""
from __future__ import annotations

import re

from dataclasses import dataclass


@dataclass(frozen=True)
class Technique:
    name: str  # as on the command line
    label: str  # as in the paper
    plans: bool  # the agent writes a Plan before acting
    replans: bool  # after each observation the agent answers Re-plan: Y|N
    max_actions: int | None  # actions allowed before the agent must answer (None: until the step limit)
    engine: str = "loop"  # the graph that runs it: loop (graph.py) | reaper (reaper.py)
    learned_plan: bool = False  # starts from the scenario's learned AutoPlan plan


TECHNIQUES: dict[str, Technique] = {t.name: t for t in (
    Technique("singlerag", "SingleRAG", plans=False, replans=False, max_actions=1),
    Technique("iterrag", "IterRAG", plans=False, replans=False, max_actions=None),
    Technique("planrag", "PlanRAG", plans=True, replans=True, max_actions=None),
    Technique("planrag-norp", "PlanRAG w/o RP", plans=True, replans=False, max_actions=None),
    Technique("reaper", "REAPER", plans=True, replans=False, max_actions=None, engine="reaper"),
    Technique("autoplan", "AutoPlan", plans=True, replans=True, max_actions=None, learned_plan=True),
)}


def technique(name: str) -> Technique:
    """The technique called ``name``; ValueError listing the choices otherwise."""
    try:
        return TECHNIQUES[name]
    except KeyError:
        raise ValueError(f"unknown technique {name!r}; choose one of {', '.join(TECHNIQUES)}") from None


_VOTED = re.compile(r"^(?P<technique>.+)\+vote(?P<n>\d+)$")


def voted_name(name: str, n: int) -> str:
    """The name of a technique's decision by majority over n samples (core.benchmark.vote): ``planrag+vote3``."""
    return f"{name}+vote{n}"


def parse_voted(name: str) -> tuple[str, int] | None:
    """(technique, n) of a voted technique's name, None for a plain technique."""
    m = _VOTED.match(name)
    return (m["technique"], int(m["n"])) if m else None
