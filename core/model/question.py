"""The scenario model: a decision question, its database (SQL and graph views) and how answers name decisions.

Plain data: what differs between scenarios (candidates, simulator, the decision target, drawing) comes from the
scenario's type in the registry, ``core.scenarios.get(question.scenario)``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from core.model.graph import GraphData
from sims.tables import Tables

#: A scenario's name: a DQA scenario's or a plugin's (core.scenarios.names() lists them).
ScenarioKind = str


@dataclass
class Database:
    """One database content, shared by every question that uses it (keyed by content hash)."""

    key: str
    scenario: ScenarioKind
    tables: Tables  # the relational view, tables in file order
    graph: GraphData  # the graph view of the same data
    sources: list[str] = field(default_factory=list)  # files it was first read from, for messages


@dataclass(frozen=True)
class Question:
    """A decision question. ``number`` is its 1-based position in its question file (the benchmark's own
    count); ``question_num`` is the file's source id field."""

    scenario: ScenarioKind
    source: str  # "dqa" or "demo"
    number: int
    question_num: int
    business_rules: str
    question: str
    goal: str
    country: str  # Locating: the deciding country's tag; Building: the database tag (e.g. USA1836)
    home: str | None = None  # Locating: the country's home trade node
    goods: str | None = None  # Building: the goods whose price should fall
    year: str | None = None
    answer: str | int | None = None  # the labelled best decision, when known
    database_ref: str = ""  # which database of its source the question uses (file stem or demo name)
    params: tuple = ()  # a plugin question's parameters, as (name, value) pairs in declaration order

    @property
    def parameters(self) -> dict:
        """A plugin question's parameters by name (what its template was filled with)."""
        return dict(self.params)

    @property
    def id(self) -> str:
        """A stable id such as ``dqa/locating/1`` or ``demo/building/2``."""
        return f"{self.source}/{self.scenario}/{self.number}"

    @property
    def text(self) -> str:
        """The text an agent is given, built as the paper does: business rules, question, goal."""
        return "\n".join(part.strip("\n") for part in (self.business_rules, self.question, self.goal) if part)


@dataclass(frozen=True)
class DecisionWords:
    """How answers name a scenario's decisions, for grading: by name (trade nodes) or by id (buildings); the
    words that cue an id (``building 1485``, ``id 1485``, ``#1485``); the words after which a number is a
    quantity, not an id (``by 5 levels``); and which comparatives favour the compared subject (``X adds more
    than Y``) or the thing it is compared with (``X adds less than Y``)."""

    by: Literal["name", "id"]
    id_cues: tuple[str, ...] = ()
    quantity_before: tuple[str, ...] = ()
    quantity_after: tuple[str, ...] = ()
    better: tuple[str, ...] = ("more", "better", "higher", "greater", "larger", "bigger", "stronger")
    worse: tuple[str, ...] = ("less", "worse", "lower", "smaller", "fewer", "weaker")
