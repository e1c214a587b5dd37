"""What every scenario type gives the workbench: its questions and databases, candidates, how answers name a
decision, the simulator's ranking (when it has one), what one decision changes, and how its data is drawn.

Pages, grading, figures, reports and evidence ask a scenario type (``core.scenarios.get(name)``) instead of
testing the scenario's name. The DQA scenarios (core.scenarios.dqa.kinds) and folder plugins
(core.scenarios.plugins.folder) implement the same class.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sims.ranking import Candidate, InputError, Ranking
from core.model.question import Database

if TYPE_CHECKING:
    import pandas as pd

TINY = 1e-12


@dataclass(frozen=True)
class Effect:
    """What one decision changes against no decision, both simulated in the same mode: the score's target (e.g. the
    country's profit at home, the asked goods' price, the weekly delivery cost) and, per item (an edge, goods,
    town...) the value it has before and after (``measure`` says what the value is, ``item`` what the key is)."""

    decision: Candidate
    target: str
    before: float
    after: float
    changes: dict  # item -> (before, after)
    measure: str  # "flow", "price", "cost", ...
    note: str | None = None  # where ``before`` differs from the ranking's baseline, why
    item: str = "edge"

    @property
    def deltas(self) -> dict:
        """After minus before, per item."""
        return {k: a - b for k, (b, a) in self.changes.items()}

    def biggest(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` largest changes (by size), without the unchanged ones."""
        rows = [(" → ".join(map(str, k)) if isinstance(k, tuple) else k, b, a, a - b,
                 100 * (a - b) / abs(b) if b else None)
                for k, (b, a) in self.changes.items() if abs(a - b) > TINY * max(1.0, abs(b))]
        rows.sort(key=lambda r: -abs(r[3]))
        import pandas as pd  # heavy: only for this table (the command line and the agents never ask for it)

        return pd.DataFrame(rows[:n], columns=[self.item, f"{self.measure} before", f"{self.measure} after", "change",
                                               "change %"])


@dataclass(frozen=True)
class ViewOption:
    """A control of a scenario's network view (a slider on the Scenarios page): its keyword, label, the values
    offered (value -> text), the default and a help text."""

    name: str
    label: str
    choices: dict
    default: object
    help: str = ""
    widget: str = "slider"  # "slider" (ordered choices) or "buttons" (a few alternatives)


@dataclass(frozen=True)
class Source:
    """A question set a scenario type offers: its key (``dqa``, ``demo``, ``scenario``) and its title."""

    key: str
    title: str


class ScenarioType:
    """The base of every scenario type. Subclasses set the attributes and override the methods; a type without a
    simulator leaves ``ranking`` raising InputError and ``can_check`` False."""

    name: str = ""
    title: str = ""
    description: str = ""
    sources: tuple[Source, ...] = ()
    modes: tuple[str, ...] = ("default",)
    mode_notes: dict = {}
    can_check: bool = False
    words = None  # a core.model.question.DecisionWords
    paper_n: int | None = None  # the paper's number of questions (DQA scenarios only)
    critical_columns: tuple[str, ...] = ()  # columns a trace should read (benchmark heuristic, Table 6)
    candidate_source = None  # a compiled regex: a query that lists candidates (benchmark heuristic)
    origin: str = "built-in"  # where it was found: built-in, or its folder
    change_caption: str = ""  # shown under the what-if figure
    graph_mapping = None  # a core.model.graph.GraphMapping: how its SQL tables read as a property graph (DQA kinds)
    planner_examples: dict = {}  # language -> (question, plan): REAPER's planner examples (core.techniques.reaper.examples)
    more_planner_examples: dict = {}  # language -> [(question, plan)]: more of them, for REAPER's paper setting
    #: language -> the schema text the PlanRAG authors' code gave its database tool (the ``paper`` prompt setting;
    #: none: the schema rendered from the database)
    paper_schemas: dict = {}

    # --- questions and data ---
    def paper_question(self, question) -> str:
        """The question's text as the PlanRAG authors' code gave it (the ``paper`` prompt setting)."""
        return question.text

    def questions(self, source: str, root=None) -> list:
        """The questions of one of its sources, numbered from 1."""
        raise NotImplementedError

    def database(self, question, root=None):
        """The question's core.model.question.Database."""
        raise NotImplementedError

    def notes(self, question, root=None) -> list[str]:
        """Data defects repaired while reading the question's database, each with its rule."""
        return []

    def source_keys(self) -> list[str]:
        return [s.key for s in self.sources]

    # --- decisions ---
    def candidates(self, question, database) -> list:
        """Every candidate decision, in table order."""
        raise NotImplementedError

    def candidate_names(self, question, database) -> dict:
        """A display name per candidate."""
        return {c: str(c) for c in self.candidates(question, database)}

    titles_need_data: bool = False  # whether decision_title says more with the question's database

    def decision_title(self, question, decision, database=None) -> str:
        """A decision as a person reads it in a sentence or a metric (``1485 furniture manufactories``); without
        the database, what can be said from the decision alone."""
        return str(decision)

    def target(self, question) -> str:
        """A short description of the decision target (question lists)."""
        return question.question.strip().splitlines()[-1][:80] if question.question else question.id

    def score_name(self, question) -> str:
        """What a candidate's score is: ``profit of SWE at baltic_sea``, ``price of furniture``."""
        return "score"

    def default_mode(self, question) -> str:
        """The simulation mode that labels the question."""
        return self.modes[0]

    def ranking(self, question, database, mode: str | None = None) -> Ranking:
        """The simulator's ranking of every candidate (best first, with the baseline)."""
        raise InputError(f"scenario {self.name} has no simulator: it cannot check decisions")

    def what_if(self, question, database, decision, mode: str) -> Effect | None:
        """What ``decision`` changes against no decision (None when the scenario cannot say)."""
        return None

    # --- evidence (core.analysis.evidence) ---
    def evidence_rows(self, question, tables, focus: list) -> list[tuple[str, int, tuple[tuple, ...], str]]:
        """(table, row index, key spellings, who) of the rows whose values may decide the question."""
        out = []
        for t in tables:
            # without a primary key, a row is named by its text columns (a road by both towns, a demand row by
            # town and season), else by its first column
            key_cols = list(t.primary_key) or [c for c, v in zip(t.column_names, t.rows[0] if t.rows else ())
                                               if isinstance(v, str)] or t.column_names[:1]
            for i, r in enumerate(t.records()):
                key = tuple((r[c],) for c in key_cols)
                out.append((t.name, i, key, ", ".join(str(r[c]) for c in key_cols)))
        return out

    def focus_scores(self, question, tables, focus: list, mode: str) -> list[float]:
        """The focus candidates' scores on (nudged) ``tables``."""

        ranking = self.ranking(question, Database("nudged", self.name, tables, None), mode)
        return [ranking.score_of(c) for c in focus]

    def reads(self) -> dict[str, tuple[str, ...]] | None:
        """The columns the simulator reads, per table (a value elsewhere is never nudged); None: any may count."""
        return None

    # --- drawing ---
    def view_options(self) -> list[ViewOption]:
        """Controls of the network view."""
        return []

    def network(self, question, database, *, pick=None, best=None, pick_label: str = "agent's pick",
                change: dict | None = None, around=None, **options):
        """The data drawn as a network (a plotly Figure), or None when the scenario draws none (tables view).
        ``around`` (a node id of ``node_names``) centres the view on that node where the view can. A figure may
        say what it shows in ``layout.meta["caption"]``."""
        return None

    def node_names(self, question, database) -> dict:
        """The nodes a person can look for by name in the network view (node id -> name); empty when the view
        offers no search."""
        return {}

    def node_rows(self, database, node_id: str) -> dict:
        """The rows behind a clicked figure node, per table."""
        return {}

    def own_row(self, question, table: str, record: dict) -> bool:
        """Whether a row of ``table`` is the question's own (the deciding country's, the asked goods'): shown
        highlighted among a node's rows."""
        return False


@dataclass
class Registry:
    """Scenario types by name, and the problems met while looking for folder plugins."""

    types: dict[str, ScenarioType] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
