"""What a run is asked to do (RunSettings, Limits), and the human-in-the-loop exchange at a pause
(Pause, shown to the analyst; Review, the analyst's answer)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from core.agents.techniques import technique

#: ``auto`` never pauses; ``approve-replans`` pauses at each new plan from a Re-plan; ``approve-every-plan``
#: also at the initial plan. Only the planning techniques pause.
HITL_MODES = ("auto", "approve-replans", "approve-every-plan")
DATABASES = ("sqlite", "mysql", "ladybug", "neo4j")


@dataclass
class Limits:
    """Bounds on one run. At ``max_llm_calls`` or ``max_tokens`` (prompt + completion, summed over calls) the
    agent is asked for its final answer. Rows beyond ``observation_rows`` / ``observation_chars`` are
    summarised in what the LLM sees; the trace keeps up to ``row_cap`` rows of each query."""

    max_llm_calls: int = 20
    max_tokens: int = 200_000
    observation_rows: int = 50
    observation_chars: int = 4000
    row_cap: int = 200
    query_timeout_s: float = 10.0


@dataclass
class RunSettings:
    """One run: the question (source, scenario and 1-based number), the database backend, the technique, the model
    (a name, or ``replay:FILE``), the analyst's review mode and the limits. Holds no secret.

    The loop techniques can start from a plan: ``initial_plan`` (its steps), or ``plan_version``, a learned
    AutoPlan plan of the scenario, which sets ``initial_plan`` when the run starts (technique ``autoplan``: the
    latest when None). REAPER re-plans once after failed steps unless ``replan_on_failure`` is off."""

    scenario: str
    question: int
    db: str
    technique: str
    llm: str
    base_url: str | None = None
    hitl: str = "auto"
    temperature: float = 0.0
    source: str = "dqa"
    limits: Limits = field(default_factory=Limits)
    initial_plan: list[str] | None = None
    plan_version: int | None = None
    replan_on_failure: bool = True

    def validate(self) -> RunSettings:
        """Self, or ValueError naming the bad field."""
        tech = technique(self.technique)
        if (self.initial_plan or self.plan_version is not None) and tech.engine != "loop":
            raise ValueError(f"{tech.label} writes its own plan: an initial plan is for the loop techniques")
        if self.initial_plan is not None and not all(isinstance(s, str) and s.strip() for s in self.initial_plan):
            raise ValueError("an initial plan needs one non-empty text per step")
        if self.plan_version is not None and (not isinstance(self.plan_version, int) or self.plan_version < 1):
            raise ValueError(f"plan version {self.plan_version!r} is not a version number (1, 2, ...)")
        if self.source not in ("dqa", "demo"):
            raise ValueError(f"unknown question source {self.source!r}; choose dqa or demo")
        if self.scenario not in ("locating", "building"):
            raise ValueError(f"unknown scenario {self.scenario!r}; choose locating or building")
        if self.db not in DATABASES:
            raise ValueError(f"unknown database {self.db!r}; choose one of {', '.join(DATABASES)}")
        if self.hitl not in HITL_MODES:
            raise ValueError(f"unknown review mode {self.hitl!r}; choose one of {', '.join(HITL_MODES)}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RunSettings:
        return cls(**{**data, "limits": Limits(**data.get("limits", {}))})


@dataclass(frozen=True)
class Pause:
    """A run waiting for the analyst: the plan the agent proposes (``kind`` plan, or replan with the plan it
    would replace), as a list of steps, and the agent's reply that proposed it."""

    run_id: str
    kind: str
    plan: list[str]
    old_plan: list[str]
    reply: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Review:
    """The analyst's answer at a pause: approve the plan, edit it (the steps the agent must follow: added,
    removed, reworded or reordered), or reject it with a note for the agent, which then re-plans."""

    action: str  # approve | edit | reject
    plan: tuple[str, ...] = ()
    note: str = ""

    @classmethod
    def approve(cls, note: str = "") -> Review:
        return cls("approve", note=note)

    @classmethod
    def edit(cls, steps: list[str], note: str = "") -> Review:
        return cls("edit", tuple(steps), note)

    @classmethod
    def reject(cls, note: str) -> Review:
        return cls("reject", note=note)

    def validate(self) -> Review:
        """Self, or ValueError."""
        if self.action not in ("approve", "edit", "reject"):
            raise ValueError(f"unknown review {self.action!r}; use approve, edit or reject")
        if self.action == "edit" and not [s for s in self.plan if s.strip()]:
            raise ValueError("an edited plan needs at least one step")
        return self

    def to_dict(self) -> dict:
        return {"action": self.action, "plan": [s.strip() for s in self.plan if s.strip()], "note": self.note}

    @classmethod
    def from_dict(cls, data: dict) -> Review:
        return cls(data["action"], tuple(data.get("plan") or ()), data.get("note", ""))
