"""What a run's trace shows, for the paper's analyses: its database retrievals (Figure 5), re-plans (Table 7),
whether it queried the critical values (Table 6), and the signs of failure that core.benchmark.failures
classifies (Figure 6)."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from core.scenarios import ByScenario

#: The critical values of Table 6, as the column / property names of the DQA schemas: Locating's incoming value
#: (IV, ``ingoing``) and total trading power (TP_total, ``total_power``); Building's current output (CO,
#: ``current_output``) and pop demand (PD, ``pop_demand``).
CRITICAL = ByScenario("critical_columns")  # core.scenarios.dqa.kinds declares them
#: Where each scenario's candidate decisions come from: the trade flows into the home node (the ``flow`` table,
#: the graph's ``source`` relationships), the buildings supplying the goods (``supply`` / ``Supply``).
CANDIDATE_SOURCES = ByScenario("candidate_source")
QUERY_ERRORS = frozenset({"syntax", "error", "timeout", "refused"})


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


def read_trace(events: list[dict], scenario: str, decision=None) -> TraceFacts:
    """The facts of one run from its events (``Event.to_dict()``); ``decision`` is the graded pick."""
    facts = TraceFacts()
    seen_text: list[str] = []  # database queries and what they returned
    returned: list[str] = []  # what they returned
    in_query = False  # the last action was a database query
    for e in events:
        kind = e["kind"]
        if kind == "action":
            in_query = e["language"] != "self"
            if in_query:
                facts.retrievals += 1
                seen_text.append(e["query"])
        elif kind == "observation":
            if e.get("error_kind") == "format":
                facts.format_corrections += 1
            elif in_query:
                failed = e.get("error_kind") in QUERY_ERRORS
                facts.query_errors += failed
                facts.last_query_failed = failed
                facts.retrievals_with_rows += bool(e.get("rows"))
                data = " ".join([e.get("executed") or "", " ".join(map(str, e.get("columns") or [])), e["text"]])
                seen_text.append(data)
                returned.append(data)
            in_query = False
        elif kind == "replan" and e["replan"] and e["new_plan"] != e["old_plan"]:
            facts.replans += 1
        elif kind == "error":
            if e["error_kind"] == "limit":
                facts.limit_reached = True
            elif e.get("fatal", True):
                facts.error_kind = e["error_kind"]
    text = "\n".join(seen_text)
    facts.critical_seen = {name: _mentions(name, text) for name in CRITICAL[scenario]}
    pattern = CANDIDATE_SOURCES[scenario]
    facts.looked_at_candidates = pattern is not None and pattern.search(text) is not None
    facts.pick_seen = decision is not None and _mentions(str(decision), "\n".join(returned))
    return facts
