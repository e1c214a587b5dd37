"""The trace of a run: one small dataclass per step, serialisable to JSON (``to_dict`` / ``event_from_dict``).

Kinds: ``plan`` (a plan the agent proposed or adopted, or the analyst's review of one), ``replan`` (the agent's
Re-plan decision, with old and new plan), ``thought`` (with the current step), ``action`` (tool and query),
``observation`` (rows, the text the LLM saw, or the error), ``final`` and ``error``; ``query_review`` (the
analyst's review of a query before it ran) and ``branch`` (where a branched run starts).

Each event carries the LLM call it follows from (``step``) and its wall-clock time (``at``). The first event
emitted after an LLM call carries that call's usage (``llm``: tokens, latency, the raw reply), so summing
``llm`` over a trace counts every call once.

The events are a tagged union (``AnyEvent``, tagged by ``kind``, as inspect_ai's transcript events are by their
``event``): they are stored as ``to_dict()`` and read back typed with ``event_from_dict``, which reads every shape an
older version stored: fields it no longer knows are dropped, missing ones take their defaults, and a kind it does
not know (or a record it cannot read) becomes an ``UnknownEvent`` that keeps the stored dict.
"""
from __future__ import annotations

import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import ClassVar, Literal, Union

#: What an observation's error was: the query's (refused, timeout, syntax, error, or unavailable when the
#: database cannot be reached), a corrective note on a malformed reply (format), an action the loop guard did not
#: run again (repeat), a query the analyst rejected (rejected), the note on a final answer given before any query
#: (unqueried); REAPER's result a step cannot use (reference) and step using a failed step's result (skipped).
ObservationErrorKind = Literal["refused", "timeout", "syntax", "error", "unavailable", "format", "repeat",
                               "rejected", "unqueried", "reference", "skipped"]
#: Why a run failed or was warned (ErrorEvent): an LLM call's failure (core.llm.client.LLMError: config, auth,
#: rate_limit, server, timeout, network, bad_request, context, model, replay), the database's (as
#: ObservationErrorKind), the agent loop's (stuck, no_answer, empty_reply, format, limit, truncated, retry), the
#: benchmark's budget, and the run's driver (interrupted, stopped, internal, worker).
ErrorKind = Literal["config", "auth", "rate_limit", "server", "timeout", "network", "bad_request", "context",
                    "model", "replay", "refused", "syntax", "error", "unavailable", "stuck", "no_answer",
                    "empty_reply", "format", "limit", "truncated", "retry", "budget", "interrupted", "stopped",
                    "internal", "worker"]


@dataclass(kw_only=True)
class LLMUsage:
    """One LLM call: its tokens (estimated from characters for replays), latency and reply as kept; the tokens spent
    by attempts abandoned before the one that answered are apart (``failed_*``), counted in the run's tokens and
    budgets beside these."""

    call: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # the attempt that answered (for a cached reply, the original call's)
    estimated: bool
    reply: str
    wait_s: float | None = None  # the time actually waited, retries and backoff included (about 0 for a cached reply)
    # each attempt: start, duration_s, timeout_s, error_kind, error; an abandoned one its prompt_tokens and
    # completion_tokens spent
    attempts: list[dict] = field(default_factory=list)
    cached: bool = False  # served from the benchmark's reply cache
    failed_prompt_tokens: int = 0
    failed_completion_tokens: int = 0
    counted_by: str | None = None  # what the counts rest on (the server's usage, a tokenizer, the characters)


@dataclass(kw_only=True)
class Event:
    kind: ClassVar[str] = "event"
    step: int = 0  # the LLM call this event follows from (1-based; set when emitted)
    at: float = field(default_factory=time.time)  # seconds since the epoch
    llm: LLMUsage | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, **asdict(self)}


@dataclass(kw_only=True)
class PlanEvent(Event):
    """A plan: proposed by the agent (``proposed`` when it awaits review, else ``adopted``), or reviewed by the
    analyst (``approved``, ``edited`` or ``rejected``; ``proposed_steps`` is then the plan reviewed)."""

    kind: ClassVar[str] = "plan"
    steps: list[str]
    origin: Literal["agent", "analyst"] = "agent"
    status: Literal["proposed", "adopted", "approved", "edited", "rejected"] = "adopted"
    proposed_steps: list[str] | None = None
    note: str = ""
    reviewer: str = ""  # who reviewed it (analyst origin)


@dataclass(kw_only=True)
class ReplanEvent(Event):
    """The agent's Re-plan answer: ``replan`` Y/N, the plan before and the plan after."""

    kind: ClassVar[str] = "replan"
    replan: bool
    old_plan: list[str]
    new_plan: list[str]
    status: Literal["proposed", "adopted"] = "adopted"  # proposed: awaits review
    note: str = ""


@dataclass(kw_only=True)
class ThoughtEvent(Event):
    kind: ClassVar[str] = "thought"
    text: str
    current_step: str | None = None


@dataclass(kw_only=True)
class ActionEvent(Event):
    """A tool call: ``tool`` as the agent named it, ``language`` sql | cypher | self."""

    kind: ClassVar[str] = "action"
    tool: str
    query: str
    language: str


@dataclass(kw_only=True)
class ObservationEvent(Event):
    """What came back: the rows (up to the row cap), the text the LLM saw, or the error (``error_kind``: one of
    ObservationErrorKind)."""

    kind: ClassVar[str] = "observation"
    text: str
    columns: list[str] = field(default_factory=list)
    rows: list[list] = field(default_factory=list)
    total_rows: int = 0
    latency_s: float = 0.0
    executed: str = ""
    error: str | None = None
    error_kind: ObservationErrorKind | None = None


@dataclass(kw_only=True)
class FinalEvent(Event):
    kind: ClassVar[str] = "final"
    answer: str


@dataclass(kw_only=True)
class ErrorEvent(Event):
    """A failure, or a warning when not ``fatal``; ``error_kind`` says which (ErrorKind), ``message`` what happened.
    ``attempts``: for a failed LLM call, each attempt made (see LLMUsage)."""

    kind: ClassVar[str] = "error"
    message: str
    # fatal: LLM errors, an unreachable database, stuck (the loop guard), context (a request that cannot fit the
    # window), empty_reply, no_answer, budget (a benchmark's). Not fatal: limit (a limit reached: the agent is asked
    # for its final answer; the message says which), context (older observations shortened to fit), truncated (a
    # final answer cut off by the reply cap, taken as written), retry (an LLM attempt that is retried)
    error_kind: ErrorKind
    fatal: bool = True
    attempts: list[dict] = field(default_factory=list)


@dataclass(kw_only=True)
class QueryReviewEvent(Event):
    """The analyst's review of a query before it ran (review mode "approve every query"): ``approved``, ``edited``
    (``query`` ran instead of ``proposed``) or ``rejected`` (not run; ``note`` is the agent's observation)."""

    kind: ClassVar[str] = "query_review"
    status: Literal["approved", "edited", "rejected"]
    query: str
    proposed: str
    note: str = ""
    reviewer: str = ""


@dataclass(kw_only=True)
class BranchEvent(Event):
    """The start of a branched run: the run it branched from, the step it branched at (the state just before that
    LLM call, or with ``query`` just before the step's query) and what the analyst changed there."""

    kind: ClassVar[str] = "branch"
    parent: str
    at_step: int
    plan: list[str] | None = None
    query: str | None = None
    note: str = ""
    reviewer: str = ""


@dataclass(kw_only=True)
class UnknownEvent(Event):
    """A stored event of a kind this version does not know (or could not read): ``data`` is the dict as stored, kept
    and written back unchanged; views show it as it is and the fold skips it."""

    kind: ClassVar[str] = "unknown"
    data: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.data)


AnyEvent = Union[PlanEvent, ReplanEvent, ThoughtEvent, ActionEvent, ObservationEvent, FinalEvent, ErrorEvent,
                 QueryReviewEvent, BranchEvent, UnknownEvent]
EVENT_TYPES: dict[str, type[Event]] = {t.kind: t for t in (PlanEvent, ReplanEvent, ThoughtEvent, ActionEvent,
                                                           ObservationEvent, FinalEvent, ErrorEvent,
                                                           QueryReviewEvent, BranchEvent)}


def _known(cls: type, data: dict) -> dict:
    """The values of ``data`` that ``cls`` has a field for."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _missing(cls: type, values: dict) -> list[str]:
    return [f.name for f in fields(cls) if f.name not in values and f.default is MISSING
            and f.default_factory is MISSING]


def usage_from_dict(data: dict) -> LLMUsage:
    """An LLM call's usage as stored (older stores lack some fields: counts 0, nothing kept)."""
    values = _known(LLMUsage, data)
    for name in _missing(LLMUsage, values):
        values[name] = {"reply": "", "estimated": False}.get(name, 0)
    return LLMUsage(**values)


def event_from_dict(data: dict) -> AnyEvent:
    """The event ``to_dict`` gave, typed (an ``UnknownEvent`` keeping ``data`` when its kind is unknown or a field
    it needs is missing)."""
    cls = EVENT_TYPES.get(data.get("kind")) if isinstance(data, dict) else None
    if cls is None:
        return _unknown(data)
    values = _known(cls, data)
    if _missing(cls, values):
        return _unknown(data)
    if isinstance(values.get("llm"), dict):
        values["llm"] = usage_from_dict(values["llm"])
    elif "llm" in values and not isinstance(values["llm"], LLMUsage):
        values["llm"] = None
    return cls(**values)


def _unknown(data) -> UnknownEvent:
    data = data if isinstance(data, dict) else {"kind": "unknown", "value": data}
    step, at = data.get("step"), data.get("at")
    return UnknownEvent(data=data, step=step if isinstance(step, int) else 0,
                        at=at if isinstance(at, (int, float)) else 0.0)
