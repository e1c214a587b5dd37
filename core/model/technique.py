"""The technique registry: one folder per technique under core/techniques/, each with its ``technique.toml`` (what
the rest of the workbench may know of it: its id, label and attributes, read here once per process) and its code
(its state, graph, prompt sets and checks, loaded by ``core.agents.engine`` when a run needs it)."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from core.model.bounds import unknown

#: Where the technique folders are.
FOLDERS = Path(__file__).resolve().parents[1] / "techniques"


@dataclass(frozen=True)
class Technique:
    name: str  # its id: as on the command line, in stored runs and results
    label: str  # as in its paper
    plans: bool  # the agent writes a Plan before acting
    replans: bool  # after each observation the agent answers Re-plan: Y|N
    max_actions: int | None  # actions allowed before the agent must answer (None: until the step limit)
    folder: str = ""  # its folder under core/techniques (its code: ``core.techniques.<folder>``)
    order: int = 0  # where it is listed
    takes_initial_plan: bool = False  # may start from a given or learned plan (RunSettings.initial_plan)
    branch_edits: bool = False  # a branch of its run may change the plan or a query (else a note only)
    learned_plan: bool = False  # starts from the scenario's latest learned plan
    trains_plans: bool = False  # AutoPlan collects experience with it
    planner: bool = False  # has a planner prompt setting (RunSettings.reaper_planner)
    replan_on_failure: bool = False  # re-plans after failed steps unless turned off (RunSettings.replan_on_failure)
    prompt_settings: tuple[str, ...] = ("improved", "paper")  # the prompt settings it has
    featured: bool = False  # preselected to compare, and run by the smoke benchmark
    default: bool = False  # the technique a page or a command starts with
    retrieval_baseline: bool = False  # the paper's Figure 5 splits the others by its queries
    paper_latency: tuple[float, str] | None = None  # (seconds, setting) of a call in REAPER's paper (5.1)
    paper: dict | None = field(default=None, compare=False)  # its published figures (core.benchmark.paper)

    @classmethod
    def from_toml(cls, folder: Path) -> Technique:
        data = tomllib.loads((folder / "technique.toml").read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known - {"id"}
        if unknown:
            raise ValueError(f"{folder / 'technique.toml'}: unknown keys {', '.join(sorted(unknown))}")
        name = data.pop("id")
        data = {**data, "name": name, "folder": folder.name, "max_actions": data.get("max_actions")}
        for key in ("prompt_settings", "paper_latency"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)


def _load() -> dict[str, Technique]:
    found = sorted((Technique.from_toml(f) for f in FOLDERS.iterdir() if (f / "technique.toml").is_file()),
                   key=lambda t: (t.order, t.name))
    return {t.name: t for t in found}


#: Every technique by id, in their listed order: built once per process.
TECHNIQUES: dict[str, Technique] = _load()
#: The technique a page or a command starts with.
DEFAULT = next(t.name for t in TECHNIQUES.values() if t.default)
#: The techniques preselected to compare and run by the smoke benchmark.
FEATURED = tuple(t.name for t in TECHNIQUES.values() if t.featured)


def technique(name: str) -> Technique:
    """The technique called ``name``; ValueError listing the choices otherwise."""
    try:
        return TECHNIQUES[name]
    except KeyError:
        raise ValueError(unknown("technique", name, TECHNIQUES)) from None


_VOTED = re.compile(r"^(?P<technique>.+)\+vote(?P<n>\d+)$")


def voted_name(name: str, n: int) -> str:
    """The name of a technique's decision by majority over n samples (core.benchmark.vote): ``planrag+vote3``."""
    return f"{name}+vote{n}"


def parse_voted(name: str) -> tuple[str, int] | None:
    """(technique, n) of a voted technique's name, None for a plain technique."""
    m = _VOTED.match(name)
    return (m["technique"], int(m["n"])) if m else None
