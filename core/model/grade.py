"""An analyst's grade override: plain data, stored by core.store.overrides and applied by the views."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Override:
    """An analyst's grade replacing the automatic one: the decision they read (None: no decision), whether it is
    correct, who decided it, when (epoch seconds) and why."""

    decision: str | int | None
    correct: bool | None
    by: str
    at: float
    note: str = ""
    placement: dict | None = None  # the decision's Placement (as a dict, with relative_regret) by the simulator

    def to_dict(self) -> dict:
        return {"decision": self.decision, "correct": self.correct, "by": self.by, "at": self.at, "note": self.note,
                "placement": self.placement}
