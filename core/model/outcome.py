"""What an ended run keeps as its outcome (``RunOutcome``), the statuses a run goes through, and their JSON shape."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

#: Where a run stands: waiting for a worker, driven, waiting for a review, or ended (core.store.runs.ENDED).
RunStatus = Literal["queued", "running", "paused", "interrupted", "finished", "failed", "stopped", "stuck",
                    "context_exceeded"]
#: How an answer reads (core.analysis.grading): one candidate, several, or none.
GradeStatus = Literal["decided", "ambiguous", "none"]


@dataclass(frozen=True)
class Tokens:
    """A run's tokens: prompt, completion, their total, whether any were estimated, and how many of the total were
    spent on abandoned attempts."""

    prompt: int = 0
    completion: int = 0
    total: int = 0
    estimated: bool = False
    failed_attempts: int = 0

    def to_dict(self) -> dict:
        return {"prompt": self.prompt, "completion": self.completion, "total": self.total,
                "estimated": self.estimated, "failed_attempts": self.failed_attempts}

    @classmethod
    def from_dict(cls, data: dict | None) -> Tokens:
        data = data or {}
        return cls(**{f.name: data[f.name] for f in fields(cls) if data.get(f.name) is not None})


@dataclass(frozen=True)
class RunOutcome:
    """The graded outcome of an ended run (core.agents.runtime; the grade from core.analysis.grading.judge), stored
    as ``to_dict()``; a run that failed before its first step keeps only its ``error``. ``core run --json`` prints
    every field. ``placement``: the decision's place in the simulator's ranking (rank, of, regret, gain, tied)."""

    decision: str | int | None = None
    mentions: list = field(default_factory=list)
    correct: bool | None = None
    label: str | int | None = None
    grade_status: GradeStatus | None = None
    grade_reason: str | None = None
    best_group: bool = False
    placement: dict | None = None
    final_answer: str | None = None
    error: str | None = None
    llm_calls: int = 0
    actions: int = 0
    plan: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    no_decision: bool = False
    unconsulted: bool = False
    cost_usd: float | None = None
    limit: str | None = None
    repeats: int = 0
    tokens: Tokens = field(default_factory=Tokens)

    def to_dict(self) -> dict:
        """The outcome as stored and printed (JSON types: lists, the tokens as a dict)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**data, "mentions": list(self.mentions), "plan": list(self.plan), "tokens": self.tokens.to_dict()}

    @classmethod
    def from_dict(cls, data: dict | None) -> RunOutcome | None:
        """A stored outcome, typed (None for none); a field an older row lacks takes its default."""
        if data is None:
            return None
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known and v is not None}
        values["mentions"] = list(values.get("mentions") or [])
        values["plan"] = list(values.get("plan") or [])
        values["tokens"] = Tokens.from_dict(data.get("tokens"))
        return cls(**values)

    @property
    def answered(self) -> bool:
        """Whether the run gave a final answer (one without is neither right nor wrong)."""
        return bool(self.final_answer)
