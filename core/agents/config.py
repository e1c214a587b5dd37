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
    (a name, or ``replay:FILE``), the analyst's review mode and the limits. Holds no secret."""

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

    def validate(self) -> RunSettings:
        """Self, or ValueError naming the bad field."""
        technique(self.technique)
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
