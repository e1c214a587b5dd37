"""What a run's trace shows, for the paper's analyses: its database retrievals (Figure 5), re-plans (Table 7),
whether it queried the critical values (Table 6), and the signs of failure that core.benchmark.failures
classifies (Figure 6)."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from core.analysis.trace import Trace
from core.model.events import Event
from core.scenarios import ByScenario

#: The critical values of Table 6, as the column / property names of the DQA schemas: Locating's incoming value
#: (IV, ``ingoing``) and total trading power (TP_total, ``total_power``); Building's current output (CO,
#: ``current_output``) and pop demand (PD, ``pop_demand``).
CRITICAL = ByScenario("critical_columns")  # core.scenarios.dqa.kinds declares them
#: Where each scenario's candidate decisions come from: the trade flows into the home node (the ``flow`` table,
#: the graph's ``source`` relationships), the buildings supplying the goods (``supply`` / ``Supply``).
CANDIDATE_SOURCES = ByScenario("candidate_source")


@dataclass
class TraceFacts:
    retrievals: int = 0  # database queries run (Self-thinking is not a retrieval)
    retrievals_with_rows: int = 0
    query_errors: int = 0
    last_query_failed: bool = False
    format_corrections: int = 0
    replans: int = 0  # Re-plan: Y answers that changed the plan
    critical_seen: dict[str, bool] = field(default_factory=dict)
    looked_at_candidates: bool = False  # a query read where the candidates come from
    pick_seen: bool = False  # the decision appeared in data a query returned
    limit_reached: bool = False
    error_kind: str | None = None  # of the fatal error that ended the run, if any

    @property
    def missed(self) -> list[str]:
        """The critical values the run never queried."""
        return [name for name, seen in self.critical_seen.items() if not seen]

    def to_dict(self) -> dict:
        return {**asdict(self), "missed": self.missed}


def _mentions(name: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text, re.I) is not None


def read_trace(events: list[Event] | Trace, scenario: str, decision=None) -> TraceFacts:
    """The facts of one run from its events (typed, or their fold); ``decision`` is the graded pick."""
    trace = events if isinstance(events, Trace) else Trace.of(events)
    text = "\n".join(trace.seen)
    pattern = CANDIDATE_SOURCES[scenario]
    return TraceFacts(
        retrievals=trace.queries, retrievals_with_rows=trace.queries_with_rows, query_errors=trace.query_errors,
        last_query_failed=trace.last_query_failed, format_corrections=trace.format_corrections,
        replans=trace.plan_changes, critical_seen={name: _mentions(name, text) for name in CRITICAL[scenario]},
        looked_at_candidates=pattern is not None and pattern.search(text) is not None,
        pick_seen=decision is not None and _mentions(str(decision), "\n".join(trace.returned)),
        limit_reached=trace.limit_reached, error_kind=trace.fatal.error_kind if trace.fatal else None)
