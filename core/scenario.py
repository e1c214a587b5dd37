"""The scenario model: a decision question, its candidate decisions and its database (SQL and graph views)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from core.graphdata import GraphData
from sims import building as building_sim
from sims import locating as locating_sim
from sims.ranking import Ranking
from sims.tables import Tables

ScenarioKind = Literal["locating", "building"]
SCENARIOS: tuple[ScenarioKind, ...] = ("locating", "building")


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

    @property
    def id(self) -> str:
        """A stable id such as ``dqa/locating/1`` or ``demo/building/2``."""
        return f"{self.source}/{self.scenario}/{self.number}"

    @property
    def text(self) -> str:
        """The text an agent is given, built as the paper does: business rules, question, goal."""
        return "\n".join(part.strip("\n") for part in (self.business_rules, self.question, self.goal) if part)

    @property
    def target(self) -> str:
        """A short description of the decision target."""
        if self.scenario == "locating":
            return f"{self.country}, home node {self.home}"
        return f"price of {self.goods} in {self.country}"


def candidates(question: Question, database: Database) -> list:
    """Every candidate decision, in table order: trade nodes but the home node (Locating), building ids (Building)."""
    if question.scenario == "locating":
        return locating_sim.candidates(database.tables, question.home)
    return building_sim.candidates(database.tables)


def default_mode(question: Question) -> str:
    """The simulation mode that labels a question: ``dqa`` for the benchmark, ``rules`` for the demo scenarios."""
    return "dqa" if question.source == "dqa" else "rules"


def ranking(question: Question, database: Database, mode: str | None = None) -> Ranking:
    """The simulators' ranking of every candidate decision of the question (best first, with the baseline)."""
    mode = mode or default_mode(question)
    if question.scenario == "locating":
        return locating_sim.rank(database.tables, question.country, mode)
    return building_sim.rank(database.tables, question.goods, mode)
