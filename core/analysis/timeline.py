"""Where a run's time went: its LLM calls, its database queries and its waits for the analyst's review, laid on the
run's clock from the stored events (each carries its wall-clock time, ``at``; an LLM call's usage its wait, a query's
observation its latency), and what is left of the run's time between them (the agent's own work, a restart)."""
from __future__ import annotations

from dataclasses import dataclass

from core.model.events import ActionEvent, Event, ObservationEvent, PlanEvent, QueryReviewEvent, ReplanEvent

LLM, QUERY, REVIEW = "LLM call", "query", "waiting for review"
KINDS = (LLM, QUERY, REVIEW)
#: Observations that are not a query the database ran (a note on a malformed reply, a repeat not run again, ...).
NOT_RUN = frozenset({"format", "repeat", "rejected", "unqueried", "reference", "skipped"})


@dataclass(frozen=True)
class Span:
    """One stretch of the run: ``kind`` (one of KINDS), what it was, when it began (seconds after the run's first
    event) and how long it took; an LLM call's tokens."""

    kind: str
    label: str
    start: float
    seconds: float
    tokens: int | None = None


@dataclass(frozen=True)
class Timeline:
    spans: list[Span]
    total_s: float  # the run's first event to its last

    def seconds(self, kind: str) -> float:
        return sum(s.seconds for s in self.spans if s.kind == kind)

    def count(self, kind: str) -> int:
        return sum(s.kind == kind for s in self.spans)

    @property
    def tokens(self) -> int:
        return sum(s.tokens or 0 for s in self.spans)

    @property
    def other_s(self) -> float:
        """The run's time in none of its spans: the agent's own work between them, or a pause of its process."""
        return max(0.0, self.total_s - sum(s.seconds for s in self.spans))


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def timeline(events: list[Event]) -> Timeline:
    """The spans of a run's events (see the module doc); a span is clipped to begin no earlier than the run."""
    if not events:
        return Timeline([], 0.0)
    origin = min(e.at for e in events)
    spans: list[Span] = []
    action: ActionEvent | None = None
    proposed: float | None = None  # when the plan now waiting for review was proposed

    def add(kind: str, label: str, end: float, seconds: float, tokens: int | None = None) -> None:
        start = max(0.0, end - origin - max(0.0, seconds))
        spans.append(Span(kind, label, round(start, 3), round(end - origin - start, 3), tokens))

    for e in events:
        if e.llm is not None:
            u = e.llm
            add(LLM, f"call {u.call}", e.at, u.wait_s if u.wait_s is not None else u.latency_s,
                u.prompt_tokens + u.completion_tokens + u.failed_prompt_tokens + u.failed_completion_tokens)
        if isinstance(e, ActionEvent):
            action = e
        elif isinstance(e, ObservationEvent):
            if action is not None and action.language != "self" and e.error_kind not in NOT_RUN:
                add(QUERY, _short(e.executed or action.query), e.at, e.latency_s)
            action = None
        elif isinstance(e, (PlanEvent, ReplanEvent)) and e.status == "proposed":
            proposed = e.at
        elif isinstance(e, PlanEvent) and e.origin == "analyst" and proposed is not None:
            add(REVIEW, f"plan {e.status} by {e.reviewer or 'the analyst'}", e.at, e.at - proposed)
            proposed = None
        elif isinstance(e, QueryReviewEvent) and action is not None:
            add(REVIEW, f"query {e.status} by {e.reviewer or 'the analyst'}", e.at, e.at - action.at)
    return Timeline(spans, round(max(e.at for e in events) - origin, 3))
