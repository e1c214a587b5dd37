"""The trace of a run: one small dataclass per step, serialisable to JSON (``to_dict`` / ``event_from_dict``).

Kinds: ``plan`` (a plan the agent proposed or adopted, or the analyst's review of one), ``replan`` (the agent's
Re-plan decision, with old and new plan), ``thought`` (with the current step), ``action`` (tool and query),
``observation`` (rows, the text the LLM saw, or the error), ``final`` and ``error``.

Each event carries the LLM call it follows from (``step``) and its wall-clock time (``at``). The first event
emitted after an LLM call carries that call's usage (``llm``: tokens, latency, the raw reply), so summing
``llm`` over a trace counts every call once.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import ClassVar


@dataclass(kw_only=True)
class LLMUsage:
    """One LLM call: its tokens (estimated from characters for replays), latency and reply as kept."""

    call: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    estimated: bool
    reply: str


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
    origin: str = "agent"  # agent | analyst
    status: str = "adopted"  # proposed | adopted | approved | edited | rejected
    proposed_steps: list[str] | None = None
    note: str = ""


@dataclass(kw_only=True)
class ReplanEvent(Event):
    """The agent's Re-plan answer: ``replan`` Y/N, the plan before and the plan after."""

    kind: ClassVar[str] = "replan"
    replan: bool
    old_plan: list[str]
    new_plan: list[str]
    status: str = "adopted"  # proposed (awaits review) | adopted
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
    """What came back: the rows (up to the row cap), the text the LLM saw, or the error (``error_kind``:
    refused, timeout, syntax, error, or ``format`` for a corrective note on a malformed reply; REAPER also
    ``reference`` for a result a step cannot use and ``skipped`` for a step that uses a failed step's result)."""

    kind: ClassVar[str] = "observation"
    text: str
    columns: list[str] = field(default_factory=list)
    rows: list[list] = field(default_factory=list)
    total_rows: int = 0
    latency_s: float = 0.0
    executed: str = ""
    error: str | None = None
    error_kind: str | None = None


@dataclass(kw_only=True)
class FinalEvent(Event):
    kind: ClassVar[str] = "final"
    answer: str


@dataclass(kw_only=True)
class ErrorEvent(Event):
    """A failure. ``fatal`` ends the run (LLM errors, an unreachable database); a limit reached is not fatal:
    the agent is then asked for its final answer."""

    kind: ClassVar[str] = "error"
    message: str
    error_kind: str
    fatal: bool = True


EVENT_TYPES: dict[str, type[Event]] = {t.kind: t for t in (PlanEvent, ReplanEvent, ThoughtEvent, ActionEvent,
                                                           ObservationEvent, FinalEvent, ErrorEvent)}


def event_from_dict(data: dict) -> Event:
    """The event ``to_dict`` gave."""
    values = {k: v for k, v in data.items() if k != "kind"}
    if values.get("llm"):
        values["llm"] = LLMUsage(**values["llm"])
    return EVENT_TYPES[data["kind"]](**values)
