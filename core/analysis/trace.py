"""A run's trace as every view reads it: ONE fold of its typed events (core.model.events), one at a time,
so a page can show it while the run goes on. It gives the plan in force, the step being worked on, re-plans, the
model's calls and tokens (the Run, Compare and History views), what the database queries saw (the benchmark's
analyses, core.benchmark.trace) and the rows they returned (evidence coverage, core.analysis.evidence)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.model.events import (ActionEvent, BranchEvent, ErrorEvent, Event, FinalEvent, LLMUsage, ObservationEvent,
                               PlanEvent, QueryReviewEvent, ReplanEvent, ThoughtEvent)

#: The error kinds of a query that failed (a failed observation of a database query).
QUERY_ERRORS = frozenset({"syntax", "error", "timeout", "refused"})
_STEP_NUMBER = re.compile(r"^\W*step\s*(\d+)\b", re.I)


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def step_index(plan: list[str], current_step: str) -> int | None:
    """Which step of ``plan`` the agent's ``Current step`` names: by its text, else (a bare ``Step N``) by its
    number. A text that matches no step names none: after an analyst's edit the agent's numbers may be those of
    another plan."""
    m = _STEP_NUMBER.match(current_step)
    said = _words(_STEP_NUMBER.sub("", current_step))
    if not said:
        return int(m.group(1)) - 1 if m and 1 <= int(m.group(1)) <= len(plan) else None
    for i, step in enumerate(plan):
        words = _words(step)
        if words and (said.startswith(words) or words.startswith(said)):
            return i
    return None


@dataclass
class Trace:
    """The events so far; ``plan`` is the plan in force and ``current`` the index of its step being worked on;
    ``worked`` the steps the agent named as current (or, naming none, one per action), ``acted`` the actions since
    the plan was adopted."""

    events: list[Event] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    current: int | None = None
    worked: set[int] = field(default_factory=set)
    acted: int = 0
    finished: bool = False
    replans: int = 0
    queries: int = 0  # database queries (Self-thinking actions not counted)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False  # some counts estimated from characters (replays)
    failed_tokens: int = 0  # of those tokens, spent on attempts abandoned at a time limit (a timeout)
    proposed: list[str] | None = None  # a plan the agent proposed that waits for the analyst's review
    usage: list[LLMUsage] = field(default_factory=list)  # each LLM call's usage, in order
    plan_changes: int = 0  # re-plans (Re-plan: Y) whose new plan differs from the old one
    # what the database queries (not Self-thinking) saw
    queries_with_rows: int = 0
    query_errors: int = 0
    last_query_failed: bool = False
    format_corrections: int = 0  # replies corrected for their format
    seen: list[str] = field(default_factory=list)  # each query's text, and what it returned
    returned: list[str] = field(default_factory=list)  # what each query returned (executed query, columns, text)
    rows: list[list] = field(default_factory=list)  # the rows of every observation without an error
    limit_reached: bool = False  # a limit sent the run to its final answer
    fatal: ErrorEvent | None = None  # the last error that ended the run
    _in_query: bool = False  # the last action was a database query

    @classmethod
    def of(cls, events: list[Event]) -> Trace:
        trace = cls()
        for event in events:
            trace.add(event)
        return trace

    def add(self, event: Event) -> None:
        """Fold in the next event (an UnknownEvent is kept but changes nothing)."""
        self.events.append(event)
        if event.llm:
            self.usage.append(event.llm)
            self.llm_calls += 1
            self.prompt_tokens += event.llm.prompt_tokens + event.llm.failed_prompt_tokens
            self.completion_tokens += event.llm.completion_tokens + event.llm.failed_completion_tokens
            self.failed_tokens += event.llm.failed_prompt_tokens + event.llm.failed_completion_tokens
            self.tokens_estimated = self.tokens_estimated or event.llm.estimated or bool(self.failed_tokens)
        if isinstance(event, ErrorEvent) and event.fatal:  # a call that failed for good: its abandoned attempts
            spent = [(a.get("prompt_tokens", 0), a.get("completion_tokens", 0)) for a in event.attempts or []]
            self.prompt_tokens += sum(p for p, _ in spent)
            self.completion_tokens += sum(c for _, c in spent)
            self.failed_tokens += sum(p + c for p, c in spent)
            self.tokens_estimated = self.tokens_estimated or bool(spent and any(spent))
        match event:
            case PlanEvent(status="proposed"):
                self.proposed = list(event.steps)
            case PlanEvent(status="adopted" | "approved" | "edited" | "rejected"):
                self.proposed = None
                if event.status != "rejected":
                    self._adopt(event.steps)
            case ReplanEvent(replan=True):
                self.replans += 1
                self.plan_changes += event.new_plan != event.old_plan
                if event.status == "adopted":
                    self._adopt(event.new_plan)
                else:
                    self.proposed = list(event.new_plan)
            case BranchEvent() if event.plan:
                self._adopt(event.plan)
            case ThoughtEvent() if event.current_step:
                self.current = step_index(self.plan, event.current_step)
                if self.current is not None:
                    self.worked.add(self.current)
            case ActionEvent():
                self.acted += 1
                self._in_query = event.language != "self"
                self.queries += self._in_query
                if self._in_query:
                    self.seen.append(event.query or "")
            case ObservationEvent():
                self._observe(event)
            case FinalEvent():
                self.finished = True
            case ErrorEvent(error_kind="limit"):
                self.limit_reached = True
            case ErrorEvent() if event.fatal:
                self.fatal = event

    def _observe(self, event: ObservationEvent) -> None:
        if not event.error_kind:
            self.rows.extend(event.rows or [])
        if event.error_kind == "format":
            self.format_corrections += 1
        elif self._in_query:
            failed = event.error_kind in QUERY_ERRORS
            self.query_errors += failed
            self.last_query_failed = failed
            self.queries_with_rows += bool(event.rows)
            data = " ".join([event.executed or "", " ".join(map(str, event.columns or [])), event.text or ""])
            self.seen.append(data)
            self.returned.append(data)
        self._in_query = False

    def _adopt(self, steps: list[str]) -> None:
        self.plan, self.current, self.worked, self.acted = list(steps), None, set(), 0

    def step_states(self) -> list[tuple[str, str]]:
        """Each step of the plan in force with its state, ``done``, ``current``, ``todo`` or ``unreported``, by what
        the agent did under this plan: the steps it named as current (else one step per action), none before an action
        ran under it; a final answer does the last step. A step before a done one that was never named is
        ``unreported``: neither done nor still to do."""
        worked = (self.worked or set(range(min(self.acted, len(self.plan))))) if self.acted else set()
        if self.finished and worked and self.plan:
            worked = worked | {len(self.plan) - 1}

        last = max(worked, default=-1)

        def state(i: int) -> str:
            if not self.finished and i == self.current:
                return "current"
            return "done" if i in worked else "unreported" if i < last else "todo"

        return [(step, state(i)) for i, step in enumerate(self.plan)]


#: what a step's problem was, in words (others by their kind)
PROBLEMS = {"repeat": "repeated an earlier query", "format": "a reply not in the expected format",
            "unqueried": "no query ran yet"}


def row_count(n: int) -> str:
    """``1 row``, ``3 rows``."""
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def step_summary(events: list[Event]) -> str:
    """One step's events (those of one LLM call) in a line: its query, review, answer or error."""
    parts = []
    for e in events:
        match e:
            case PlanEvent(origin="analyst"):
                parts.append(f"plan {e.status}")
            case PlanEvent():
                parts.append("plan: " + " | ".join(e.steps or []))
            case ReplanEvent(replan=True):
                parts.append("plan: " + " | ".join(e.new_plan or []))
            case ActionEvent():
                parts.append(f"{e.language}: {e.query}")
            case QueryReviewEvent():
                parts.append(f"query {e.status}")
            case ObservationEvent() if e.error:
                parts.append(PROBLEMS.get(e.error_kind) or f"error: {e.error_kind}")
            case ObservationEvent() if e.columns:
                parts.append(row_count(e.total_rows))
            case FinalEvent():
                parts.append(f"answer: {e.answer}")
            case ErrorEvent(error_kind="stopped"):
                parts.append("stopped by the analyst")
            case ErrorEvent():
                parts.append(f"{e.error_kind}: {e.message}")
            case BranchEvent():
                changed = ", ".join(k for k in ("plan", "query", "note") if getattr(e, k))
                parts.append(f"branched here ({changed})")
    return " · ".join(parts)


#: ``align_by(..., "plan")``: the row of what came before the plan's steps, and of the final answer.
BEFORE_PLAN, ANSWER = 0, 10**6


def _rows_of(events: list[Event], by: str) -> list[tuple[int, Event]]:
    """Each event with its row: its step (one LLM call, ``by="call"``), or the plan step the run was on when it came
    (``by="plan"``: 1, 2, ... as the agent named its Current step; BEFORE_PLAN until it named one; ANSWER for its
    final answer)."""
    if by == "call":
        return [(e.step, e) for e in events]
    trace, row, rows = Trace(), BEFORE_PLAN, []
    for e in events:
        trace.add(e)
        if isinstance(e, ThoughtEvent) and e.current_step and trace.current is not None:
            row = trace.current + 1
        rows.append((ANSWER if isinstance(e, FinalEvent) else row, e))
    return rows


def align_by(runs: dict[str, list[Event]], by: str = "call") -> tuple[list[int], dict[str, dict[int, str]],
                                                                     dict[str, int | None]]:
    """Runs' events (run id -> events) side by side, row by row (``by``: "call", a row per step, one LLM call; or
    "plan", a row per plan step, see ``_rows_of``): the rows, each run's row summaries (a row's LLM calls
    separated by " ‖ "), and for each run the first row where it differs from the first run (None: the same all
    along; a branch diverges at its branch event's row)."""
    summaries: dict[str, dict[int, str]] = {}
    diverges: dict[str, int | None] = {}
    branch_rows: dict[str, int] = {}
    for run_id, events in runs.items():
        grouped: dict[int, dict[int, list[Event]]] = {}
        for row, e in _rows_of(events, by):
            grouped.setdefault(row, {}).setdefault(e.step, []).append(e)
            if isinstance(e, BranchEvent):
                branch_rows.setdefault(run_id, row)
        summaries[run_id] = {row: " ‖ ".join(filter(None, (step_summary(evs) for evs in calls.values())))
                             for row, calls in grouped.items()}
    all_rows = sorted({row for rows in summaries.values() for row in rows})
    first = next(iter(summaries), None)
    for run_id in runs:
        if run_id in branch_rows:
            diverges[run_id] = branch_rows[run_id]
            continue
        diverges[run_id] = next((r for r in all_rows if run_id != first
                                 and summaries[run_id].get(r) != summaries[first].get(r)), None)
    return all_rows, summaries, diverges
