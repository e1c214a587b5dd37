"""What a run is asked to do (RunSettings, Limits), and the human-in-the-loop exchange at a pause
(Pause, shown to the analyst; Review, the analyst's answer)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Literal, get_args

from core.model.bounds import NUMBERS, in_bounds, no_nul, one_of
from core.model.technique import Technique, technique

#: ``auto`` never pauses; ``approve-replans`` pauses at each new plan from a Re-plan; ``approve-every-plan``
#: also at the initial plan. Only the planning techniques pause.
ReviewMode = Literal["auto", "approve-replans", "approve-every-plan"]
HITL_MODES: tuple[ReviewMode, ...] = get_args(ReviewMode)
DatabaseKind = Literal["sqlite", "mysql", "ladybug", "neo4j"]
#: What a pause asks the analyst to review: the initial plan, a new plan from a Re-plan, or a query.
PauseKind = Literal["plan", "replan", "query"]
#: The analyst's answer at a pause.
ReviewAction = Literal["approve", "edit", "reject"]
DATABASES: tuple[DatabaseKind, ...] = get_args(DatabaseKind)
#: The prompt settings of the loop techniques (core.agents.paper_prompts): the project's and the paper's.
PromptSetting = Literal["improved", "paper"]
PROMPT_SETTINGS: tuple[PromptSetting, ...] = get_args(PromptSetting)
#: REAPER's planner prompt: with example retrieval plans for the scenario (core.techniques.reaper.examples), or without.
ReaperPlanner = Literal["examples", "zero-shot"]
REAPER_PLANNERS: tuple[ReaperPlanner, ...] = get_args(ReaperPlanner)
DEFAULT_CELL_CHARS = 4000  # a result cell is cut to this many characters for the agent (Limits.cell_chars)
MAX_CELL_CHARS = NUMBERS["cell_chars"][1]  # the most Limits.cell_chars may be, and what a backend keeps of a cell
#: The question sources of a scenario by name (KeyError for an unknown one), for ``RunSettings.validate``: set by
#: the scenario registry (core.scenarios) when it loads, so that this model imports nothing of core.
scenario_sources: Callable[[str], list[str]] | None = None


def setting_label(technique_name: str, prompts: str | None, reaper_planner: str | None) -> str:
    """The faithfulness setting a run used, for reports and lists: ``prompts paper`` / ``prompts improved`` (the
    loop techniques), ``planner examples`` / ``planner zero-shot`` (REAPER). Records from before the settings
    existed read as the defaults then: improved prompts, a zero-shot REAPER planner. REAPER's paper setting reads
    ``prompts paper, planner ...``."""
    if technique(technique_name).planner:
        planner = f"planner {reaper_planner or 'zero-shot'}"
        return f"prompts paper, {planner}" if prompts == "paper" else planner
    return f"prompts {prompts or 'improved'}"


#: Bounds of each query's limits (inclusive): what a run, the command line and the Settings page accept.
QUERY_BOUNDS = {name: NUMBERS[name] for name in ("query_timeout_s", "row_cap", "observation_rows",
                                                 "observation_chars", "cell_chars")}
#: The limits bounded by core.model.bounds (the optional ones when set)
_BOUNDED = ("max_llm_calls", "max_tokens", "max_repeats", *QUERY_BOUNDS)
_OPTIONAL = ("max_cost_usd", "context_tokens", "reply_tokens")


@dataclass
class Limits:
    """Bounds on one run. At ``max_llm_calls``, ``max_tokens`` or ``max_cost_usd`` the agent is asked for its final
    answer; after ``max_repeats`` repeated actions (not run again) it ends as ``stuck``. Each request is kept within
    ``context_tokens`` by shortening older observations; what the LLM sees and the trace keeps of a query's rows is
    capped as the fields say."""

    max_llm_calls: int = 20
    max_tokens: int = 200_000  # prompt + completion, summed over calls
    observation_rows: int = 50  # rows beyond these, or beyond observation_chars, are summarised for the LLM
    observation_chars: int = 4000
    row_cap: int = 200  # the trace keeps up to these rows of each query
    query_timeout_s: float = 10.0  # each query runs at most this long
    max_cost_usd: float | None = None  # the tokens at the price table's rate for the model
    max_repeats: int = 3  # an action repeated: the same query, whitespace and case aside
    context_tokens: int | None = None  # the model's context window (None: unknown), from the server when a run starts
    cell_chars: int = DEFAULT_CELL_CHARS  # each cell the trace keeps cut to these characters (marked)
    # the reply cap, room left for it in each request (None: not sent, or a run stored before runs kept it); set
    # from the LLM settings when a run starts
    reply_tokens: int | None = None
    context_source: str | None = None  # where context_tokens came from: the server's report, or set for the run

    def validate(self) -> Limits:
        """Self, or ValueError naming the bad limit (each within core.model.bounds, NaN and infinity refused)."""
        for name in _BOUNDED:
            in_bounds(name, getattr(self, name))
        for name in _OPTIONAL:
            if getattr(self, name) is not None:
                in_bounds(name, getattr(self, name))
        if self.max_cost_usd is not None and self.max_cost_usd <= 0:
            raise ValueError("the cost limit must be a positive number of US dollars")
        if self.context_source is not None and (not isinstance(self.context_source, str)
                                                or len(self.context_source) > 200):
            raise ValueError("the context window's source must be a short text")
        return self

    @classmethod
    def from_dict(cls, data: dict) -> Limits:
        """The limits of a stored dict (keys this version does not know are left out)."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


#: What a stored run's settings read as when a row lacks the question or what answered it.
_UNKNOWN_RUN = {"scenario": "", "question": 0, "db": "", "technique": "", "llm": ""}


@dataclass
class RunSettings:
    """One run: the question (source, scenario and 1-based number), the database backend, the technique, the model
    (a name, or ``replay:FILE``), the analyst's review mode, the limits, the prompt setting (docs/paper-deviations.md)
    and what the technique has of the rest (validate refuses a setting it does not have). Holds no secret."""

    scenario: str
    question: int
    db: DatabaseKind
    technique: str
    llm: str
    base_url: str | None = None
    hitl: ReviewMode = "auto"
    temperature: float = 0.0
    source: str = "dqa"
    limits: Limits = field(default_factory=Limits)
    initial_plan: list[str] | None = None  # the plan to start from ([]: AutoPlan's empty plan X_0)
    plan_version: int | None = None  # a learned plan of the scenario, which sets initial_plan when the run starts
    replan_on_failure: bool | None = None  # REAPER's re-plan after failed steps (None: on in improved, off in paper)
    prompts: PromptSetting = "improved"  # or paper: the prompts as the papers' original code sent them
    reaper_planner: ReaperPlanner = "examples"  # REAPER's planner shows example plans, or none (zero-shot)
    top_p: float | None = None  # nucleus sampling (None: the server's default)
    seed: int | None = None  # the sampling seed sent to servers that take one (None: not sent; epochs add epoch - 1)
    review_queries: bool = False  # the analyst approves each query before it runs (with any ``hitl``)
    endpoint: str | None = None  # the server's named model endpoint (core.auth.endpoints): its model, URL and key

    def validate(self, tech: Technique | None = None) -> RunSettings:
        """Self, or ValueError naming the bad field (``tech``: its technique, when resolved already)."""
        tech = tech or technique(self.technique)
        if (self.initial_plan or self.plan_version is not None) and not tech.takes_initial_plan:
            why = "writes its own plan" if tech.plans else "starts from no plan"
            raise ValueError(f"{tech.label} {why}: an initial plan is for the loop techniques that take one")
        if self.initial_plan is not None and not all(isinstance(s, str) and s.strip() for s in self.initial_plan):
            raise ValueError("an initial plan needs one non-empty text per step")
        for step in self.initial_plan or ():
            no_nul(step, "initial plan")
        if self.plan_version is not None and (not isinstance(self.plan_version, int) or self.plan_version < 1):
            raise ValueError(f"plan version {self.plan_version!r} is not a version number (1, 2, ...)")
        if scenario_sources is not None:
            try:
                sources = scenario_sources(self.scenario)
            except KeyError as e:
                raise ValueError(e.args[0]) from None
            if self.source not in sources:
                raise ValueError(f"unknown question source {self.source!r} for scenario {self.scenario}; choose "
                                 f"{' or '.join(sources)}")
        one_of(self.db, DATABASES, "database")
        one_of(self.prompts, PROMPT_SETTINGS, "prompt setting")
        one_of(self.reaper_planner, REAPER_PLANNERS, "REAPER planner")
        self._check_technique_has_its_settings(tech)
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be above 0 and at most 1, not {self.top_p!r}")
        one_of(self.hitl, HITL_MODES, "review mode")
        self.limits.validate()
        return self

    def _check_technique_has_its_settings(self, tech) -> None:
        """ValueError for a setting the technique does not have (rather than ignoring it)."""
        if self.prompts not in tech.prompt_settings:
            raise ValueError(f"{tech.label} has no {self.prompts} prompt setting; choose "
                             f"{' or '.join(tech.prompt_settings)}")
        if not tech.planner and self.reaper_planner != REAPER_PLANNERS[0]:
            raise ValueError(f"{tech.label} has no REAPER planner: the planner setting {self.reaper_planner!r} is "
                             "REAPER's")
        if not tech.replan_on_failure and self.replan_on_failure is False:
            raise ValueError(f"{tech.label} has no re-planning after failed steps to turn off: that switch is "
                             "REAPER's (PlanRAG w/o RP is the PlanRAG without re-planning)")
        if tech.replan_on_failure and self.prompts == "paper" and self.replan_on_failure:
            raise ValueError(f"{tech.label}'s paper setting plans once, as the paper; its re-plan after failed steps "
                             "is a workbench addition of the improved setting")

    def to_dict(self) -> dict:
        """The settings as stored and as ``core run --json`` and the job payload carry them (limits as a dict)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> RunSettings:
        """Stored settings, typed: keys this version does not know are left out, ones an older row lacks take
        their defaults (the question and what answered it read empty: no run the workbench started lacks them)."""
        known = {f.name for f in fields(cls)}
        return cls(**{**_UNKNOWN_RUN, **{k: v for k, v in (data or {}).items() if k in known},
                      "limits": Limits.from_dict((data or {}).get("limits") or {})})


@dataclass(frozen=True)
class Pause:
    """A run waiting for the analyst: the plan the agent proposes (``kind`` plan, or replan with the ``old_plan`` it
    would replace) and the reply that proposed it; or (``kind`` query) the ``query`` it wants to run for the plan
    step ``current_step``. A review is for one pause, named by ``id`` within its run (``p1``, ``p2``, ...)."""

    run_id: str
    kind: PauseKind
    plan: list[str]
    old_plan: list[str]
    reply: str
    id: str = ""
    interrupt: str = ""  # LangGraph's id of the interrupt
    at: float = 0.0  # when the run paused
    query: str = ""
    language: str = ""  # the query's
    current_step: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Review:
    """The analyst's answer at a pause: approve the plan, edit it (``plan``: the steps the agent must follow), or
    reject it with a note for the agent, which then re-plans; at a query pause: approve the query, edit it
    (``query``: the query to run instead), or reject it (``note``: the agent's observation). ``reviewer`` and ``at``
    (seconds since the epoch) are set when the review is applied."""

    action: ReviewAction
    plan: tuple[str, ...] = ()  # an edit: steps added, removed, reworded or reordered
    note: str = ""
    query: str = ""
    reviewer: str = ""
    at: float = 0.0

    @classmethod
    def approve(cls, note: str = "", reviewer: str = "") -> Review:
        return cls("approve", note=note, reviewer=reviewer)

    @classmethod
    def edit(cls, steps: list[str], note: str = "", reviewer: str = "") -> Review:
        return cls("edit", tuple(steps), note, reviewer=reviewer)

    @classmethod
    def reject(cls, note: str, reviewer: str = "") -> Review:
        return cls("reject", note=note, reviewer=reviewer)

    @classmethod
    def edit_query(cls, query: str, note: str = "", reviewer: str = "") -> Review:
        return cls("edit", (), note, query=query, reviewer=reviewer)

    def validate(self, kind: PauseKind = "plan") -> Review:
        """Self, or ValueError (``kind``: of the pause reviewed, plan | replan | query)."""
        if self.action not in ("approve", "edit", "reject"):
            raise ValueError(f"unknown review {self.action!r}; use approve, edit or reject")
        for what, text in (("note", self.note), ("query", self.query), ("reviewer's name", self.reviewer),
                           *(("plan", step) for step in self.plan)):
            no_nul(text, what)
        if self.action == "edit" and kind == "query" and not self.query.strip():
            raise ValueError("an edited query cannot be empty")
        if self.action == "edit" and kind != "query" and not [s for s in self.plan if s.strip()]:
            raise ValueError("an edited plan needs at least one step" if not self.query else
                             "this pause is a plan review: edit the plan's steps, not a query")
        if self.action == "reject" and kind == "query" and not self.note.strip():
            raise ValueError("rejecting a query needs a note: the agent receives it as its observation")
        return self

    def to_dict(self) -> dict:
        return {"action": self.action, "plan": [s.strip() for s in self.plan if s.strip()], "note": self.note,
                "query": self.query.strip(), "reviewer": self.reviewer, "at": self.at}

    @classmethod
    def from_dict(cls, data: dict) -> Review:
        return cls(data["action"], tuple(data.get("plan") or ()), data.get("note", ""), data.get("query", ""),
                   data.get("reviewer", ""), data.get("at", 0.0))


LOCAL_OPERATOR = "local operator"  # who acts on the command line (core.auth.roles.local_operator), never the account


def default_reviewer() -> str:
    """Who reviews when no name is given (on the command line: core.auth.roles.local_operator): ``local operator``,
    never the Unix account's name."""
    return LOCAL_OPERATOR
