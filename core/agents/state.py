"""A run's checkpointed state in typed parts: what every agent graph keeps (``RunCore``, ``Usage``, ``Guarded``,
``Planning``), the shared loop's state (``LoopState``) and ``LoopPart``, a technique's own fields and step on the
loop. Plain JSON, so the checkpointer can keep it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, get_type_hints

from core.model.run_settings import PROMPT_SETTINGS, RunSettings


class RunCore(TypedDict):
    """Where the run stands: its setting, its transcript and what comes next."""

    hitl: str  # the review mode
    limits: dict  # core.model.run_settings.Limits as a dict
    language: str  # of the database: sql | cypher
    prompts: str  # the prompt setting: improved | paper (absent in older checkpoints: improved)
    prompt: str  # the system prompt
    answer_prompt: str  # the system prompt asking for the final answer at once
    messages: list[dict]  # {"role": "human" | "ai", "content": ...}, after the system prompt
    reply: str  # the last reply, while it waits for review or for its action
    action: dict | None  # the action to run: {"tool": sql | cypher | self, "query": ...}
    review_queries: bool  # each query waits for the analyst's approval
    final_answer: str | None
    status: str  # running | finished | failed | stuck | context_exceeded
    error: str | None
    next: str  # the node to run next, or END
    wall_s: float  # seconds the nodes ran (the run's wall time, without its pauses)


class Usage(TypedDict):
    """What the run spent: LLM calls and their tokens and cost, actions and queries."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    failed_tokens: int  # of the tokens, those spent on attempts abandoned at a time limit
    cost_usd: float | None  # estimated from the price table; None when the model has no price
    actions: int
    queries: int  # database queries run (absent in older checkpoints: actions)


class Guarded(TypedDict):
    """The guards' part (core.agents.guards): budgets, the loop guard, the context window, the answer-only
    exchange."""

    limit: str | None  # what sent the run to its final answer: llm_calls | tokens | cost | context
    seen: dict  # action or reply key -> {"call": LLM call, "text": what it gave}
    repeats: int  # actions (or replies) repeated, and query errors met again
    empty_replies: int  # empty replies in a row
    answer_from: int | None  # where in messages the answer-only exchange begins
    answer_tries: int  # replies to the answer request that were no answer
    shortened: int  # observations shortened in the last request
    chars_per_token: float | None  # measured by the model's tokenizer, or on the last call that reported its usage
    counted_by: str | None  # what measured it (guards.estimate_basis; None: the characters alone)
    template_tokens: float | None  # what the chat template adds a message, from a call's usage
    counted: list | None  # the tokenizer's count of the transcript before the call, and its messages
    stuck: str | None  # why the loop guard stopped the run, which then asks once for its final answer


class Planning(TypedDict):
    """The plan in force and a plan waiting for the analyst's review."""

    plan: list[str]
    proposal: dict | None  # {"kind": plan | replan, "plan": [...], "old_plan": [...]}


class LoopState(RunCore, Usage, Guarded, Planning):
    """The shared loop's state (core.agents.graph)."""

    technique: str
    answer_only: bool  # the next call asks for the final answer (after the technique's last action; any limit)
    told_unqueried: bool  # the agent was told it answered before querying (improved setting, once)


def guard_state() -> dict:
    """The initial values of the guards' part of a run's state (and its cost and queries)."""
    return {"cost_usd": 0.0, "limit": None, "repeats": 0, "empty_replies": 0, "answer_from": None,
            "answer_tries": 0, "shortened": 0, "chars_per_token": None, "counted_by": None, "queries": 0,
            "stuck": None}


#: What a field a state may lack reads as: one an older checkpoint lacks (added since), or one a run sets only when
#: it first needs it (``counted``, ``template_tokens``). ``cost_usd``: 0.0, as a call adds its cost (a checkpoint
#: without it predates the cost limit too, so no limit reads it). ``queries`` reads as ``actions``, ``seen`` as {}.
_ABSENT = {"prompts": PROMPT_SETTINGS[0], "review_queries": False, "reply": "", "wall_s": 0.0, "failed_tokens": 0,
           "cost_usd": 0.0, "limit": None, "repeats": 0, "empty_replies": 0, "answer_from": None,
           "answer_tries": 0, "shortened": 0, "chars_per_token": None, "counted_by": None, "template_tokens": None,
           "counted": None, "stuck": None, "told_unqueried": False}


def completed(state: dict) -> dict:
    """``state`` with the fields of ``RunCore``, ``Usage``, ``Guarded`` (and the loop's ``told_unqueried``) it
    lacks, as they read before they existed, so a node reads ``state[key]`` plainly: a new dict, or ``state`` itself
    when it lacks none. Every graph's nodes get their state through it (``nodes.timed``)."""
    missing = {key: value for key, value in _ABSENT.items() if key not in state}
    if "queries" not in state:  # checkpointed before queries were counted apart from actions: each action was one
        missing["queries"] = state.get("actions", 0)
    if state.get("seen") is None:  # absent, or None: no action seen yet (a dict of its own, for each state)
        missing["seen"] = {}
    if not missing:
        return state
    return {**state, **missing}


@dataclass(frozen=True)
class LoopPart:
    """A technique's own part of the shared loop: its ``fields`` (a TypedDict added to ``LoopState``) and their
    values at a run's ``start``; in the paper setting, the ``step(state, runtime, limits)`` taken instead of the
    loop's call while it ``leads`` (``done``: its iterations so far), and ``answer(state, runtime)``, the call once
    the technique's actions are done (None: the run ends unanswered)."""

    fields: type
    start: Callable[[RunSettings], dict]
    leads: Callable[[dict], bool]
    step: Callable[..., dict]
    done: Callable[[dict], int]
    answer: Callable[..., dict] | None = None


def composed(parts: tuple[LoopPart, ...]) -> type:
    """``LoopState`` with the fields of ``parts`` (the same type when there are none)."""
    if not parts:
        return LoopState
    hints: dict[str, Any] = get_type_hints(LoopState)
    for part in parts:
        hints.update(get_type_hints(part.fields))
    return TypedDict("LoopState", hints)  # type: ignore[operator]
