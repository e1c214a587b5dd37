"""The agent loop as a LangGraph state machine, shared by the techniques whose engine is a ``LoopEngine``
(core/techniques: a technique's attributes and prompt set shape the run, the prompt setting's ``LoopSetting`` its
graph's nodes):

    call_llm --> review_plan (pauses for the analyst) --> run_action --> call_llm ... --> END

``call_llm`` asks the model for one reply and settles it: a plan to adopt or to send for review, a final
answer, an action for ``run_action``, or a corrective observation. ``review_plan`` holds the only
``interrupt()`` (in ``await_review``); LangGraph re-runs it from its top on resume, and it does nothing before
the interrupt, while the LLM call that proposed the plan sits in the node before. The state is plain JSON so the SQLite
checkpointer can keep it; the model and the database come from the run's context.

Every user message of the transcript after the question is an ``observation`` event. The node helpers other
engines' graphs share (REAPER's, core/techniques/reaper/graph.py) are public: ``Emitter``, ``complete_call``, ``settle_answer``, ``announce_plan``,
``await_review``, ``observe``, ``to_answer``, ``context_full``, ``calibrate``, ``fail_run``, ``route``,
``run_query``.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TypedDict

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from core.agents import control as run_control
from core.agents import guards, paper_prompts, prompts
from core.agents.engine import Engine
from core.agents.workspace import Workspace
from core.model.run_settings import Limits, Review, RunSettings
from core.agents.control import RunControl
from core.model.events import (
    ActionEvent, ErrorEvent, Event, FinalEvent, LLMUsage, ObservationEvent, PlanEvent, QueryReviewEvent, ReplanEvent,
    ThoughtEvent
)
from core.agents.parsing import Reply, parse_reply, query_language, tool_kind
from core.model.technique import Technique
from core.backends.base import Backend, BackendUnavailable, QueryError, cap_text
from core.llm.client import ChatLLM, Completion, LLMError


class AgentState(TypedDict):
    technique: str
    hitl: str
    limits: dict
    language: str  # of the database: sql | cypher
    prompt: str  # the technique's system prompt
    answer_prompt: str  # the system prompt asking for the final answer at once
    messages: list[dict]  # {"role": "human" | "ai", "content": ...}, after the system prompt
    plan: list[str]  # the plan in force
    reply: str  # the last reply, while it waits for review or for its action
    proposal: dict | None  # a plan waiting for review: {"kind": plan | replan, "plan": [...], "old_plan": [...]}
    action: dict | None  # the action to run: {"tool": sql | cypher | self, "query": ...}
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    failed_tokens: int  # of the tokens, those spent on attempts abandoned at a time limit
    actions: int
    answer_only: bool  # the next call asks for the final answer (SingleRAG after its query; any limit reached)
    final_answer: str | None
    status: str  # running | finished | failed | stuck | context_exceeded
    error: str | None
    next: str  # the node to run next, or END
    wall_s: float  # seconds the nodes ran (the run's wall time, without its pauses)
    # guards.py: budgets, loop guard, context window, answer-only exchange (absent from older checkpoints)
    cost_usd: float | None  # estimated from the price table; None when the model has no price
    limit: str | None  # what sent the run to its final answer: llm_calls | tokens | cost | context
    seen: dict  # action or reply key -> {"call": LLM call, "text": what it gave}
    repeats: int  # actions (or replies) repeated, and query errors met again
    empty_replies: int  # empty replies in a row
    answer_from: int | None  # where in messages the answer-only exchange begins
    answer_tries: int  # replies to the answer request that were no answer
    shortened: int  # observations shortened in the last request
    chars_per_token: float | None  # measured by the model's tokenizer, or on the last call that reported its usage
    counted_by: str | None  # what measured it (guards.estimate_basis; None: the characters alone, older checkpoints)
    template_tokens: float | None  # what the chat template adds a message, from a call's usage (guards)
    counted: list | None  # the tokenizer's count of the transcript before the call, and its messages
    prompts: str  # the prompt setting: improved | paper (paper_prompts.py); absent in older checkpoints: improved
    review_queries: bool  # each query waits for the analyst's approval (review_query)
    follows_plan: bool  # AutoPlan's acting in the paper setting (_step_autoplan); absent in older checkpoints
    iterations: int  # steps taken by a run that follows a plan (thought, action, formalizing)
    queries: int  # database queries run (absent in older checkpoints: actions)
    stuck: str | None  # why the loop guard stopped the run, which then asks once for its final answer
    told_unqueried: bool  # the agent was told it answered before querying (improved setting, once)


@dataclass
class AgentContext:
    """What a run works with, outside the checkpointed state; ``control``: its Stop (None: cannot be stopped);
    ``on_text``: who follows the model's reply as it is written (None: nobody)."""

    llm: ChatLLM
    backend: Backend
    price: list[float] | None = None  # USD per 1M prompt and completion tokens (None: unknown)
    control: RunControl | None = None
    on_text: Callable[[str], None] | None = None  # the reply in flight so far, where the model streams (a view)
    on_attempt: Callable[[dict], None] | None = None  # each LLM attempt as it starts: call, attempt, of, timeout_s, streams
    technique: Technique | None = None  # the run's technique, resolved once when the run is driven


@dataclass(frozen=True)
class PromptSet:
    """What a loop technique's run is told in one prompt setting, chosen once when the run starts: its system prompt
    (``system(tech, language, schema, note, initial_plan)``), the answer-at-once prompt (``answer(language, schema,
    note)``), the question's message (``question(text)``), and ``inputs(question, language, schema)`` where the
    setting sends the schema and question texts otherwise."""

    system: Callable[..., str]
    answer: Callable[[str, str, str | None], str]
    question: Callable[[str], str]
    inputs: Callable[..., tuple[str, str]] | None = None


#: The improved setting's prompts (prompts.py), composed from the technique's attributes.
IMPROVED = PromptSet(prompts.agent_prompt, prompts.answer_prompt, prompts.question_message)


def paper_prompt_set(prefix: str, format_text: str) -> PromptSet:
    """The paper setting's prompts (paper_prompts.py) of a technique whose authors' template had this ``prefix``
    and ``format_text`` (its folder's): the authors' texts, no dialect note, their schema and question."""
    return PromptSet(lambda tech, language, schema, note, plan: paper_prompts.agent_prompt(prefix, format_text,
                                                                                            language, schema, plan),
                     lambda language, schema, note: paper_prompts.ANSWER_PROMPT, lambda text: f"Question: {text}",
                     paper_prompts.inputs)


def initial_state(tech: Technique, hitl: str, limits: Limits, language: str, schema: str, question_text: str,
                  note: str | None, initial_plan: list[str] | None, prompt_setting: str, review_queries: bool,
                  chosen: PromptSet) -> AgentState:
    """The state a run starts in; ``initial_plan``: the plan its system prompt gives it to start from (in the paper
    setting, any plan, even AutoPlan's empty one, makes the run act as AutoPlan's agent);
    ``prompt_setting``: improved or paper, whose prompts are ``chosen``;
    ``review_queries``: each query waits for the analyst's approval."""
    prompt = chosen.system(tech, language, schema, note, initial_plan)
    answer_prompt, question = chosen.answer(language, schema, note), chosen.question(question_text)
    return AgentState(technique=tech.name, hitl=hitl, limits=limits.__dict__.copy(), language=language,
                      prompt=prompt, answer_prompt=answer_prompt, prompts=prompt_setting,
                      messages=[{"role": "human", "content": question}],
                      plan=[], reply="", proposal=None, action=None, llm_calls=0, prompt_tokens=0,
                      completion_tokens=0, tokens_estimated=False, actions=0, answer_only=False, final_answer=None,
                      status="running", error=None, next="call_llm", wall_s=0.0, review_queries=review_queries,
                      follows_plan=prompt_setting == paper_prompts.PAPER and initial_plan is not None, iterations=0,
                      **guard_state())


def guard_state() -> dict:
    """The initial values of the guards' part of a run's state."""
    return {"cost_usd": 0.0, "limit": None, "seen": {}, "repeats": 0, "empty_replies": 0, "answer_from": None,
            "answer_tries": 0, "shortened": 0, "chars_per_token": None, "counted_by": None, "queries": 0,
            "stuck": None}


class Emitter:
    """Writes events to the run's stream as they happen; the first one after an LLM call carries its usage.
    ``technique``: the run's technique, as its context holds it, for the node helpers that emit."""

    def __init__(self, runtime: Runtime, step: int):
        self._write = runtime.stream_writer
        self.step = step
        self.usage: LLMUsage | None = None
        self.technique: Technique = runtime.context.technique

    def __call__(self, event: Event) -> None:
        event.step = self.step
        if self.usage:
            event.llm, self.usage = self.usage, None
        self._write(event)


def _chat(prompt: str, messages: list[dict]) -> list:
    return [SystemMessage(prompt)] + [AIMessage(m["content"]) if m["role"] == "ai" else HumanMessage(m["content"])
                                      for m in messages]


def observe(state: dict, reply_text: str, event: ObservationEvent, emit: Emitter) -> dict:
    """Emit an observation and add the reply and the observation to the transcript; the LLM goes next."""
    emit(event)
    messages = state["messages"] + [{"role": "ai", "content": reply_text},
                                    {"role": "human", "content": prompts.observation_message(event.text)}]
    return {"messages": messages, "reply": "", "next": "call_llm"}


def _correct(state: dict, reply: Reply, problem: str, emit: Emitter, hint: str | None = None) -> dict:
    """A corrective observation (``hint``: how to go on, default the format's). The same reply corrected
    before counts as a repeat."""
    text = prompts.correction(problem, emit.technique, state["language"], hint)
    key, seen = guards.reply_key(reply.text), state.get("seen") or {}
    if key in seen:
        return _repeat(state, reply, prompts.same_reply(seen[key]["call"]) + " " + text, problem, emit)
    seen = {**seen, key: {"call": state["llm_calls"], "text": problem}}
    return {"seen": seen, **observe(state, reply.text, ObservationEvent(text=text, error=problem,
                                                                         error_kind="format"), emit)}


def _repeat(state: dict, reply: Reply, text: str, what: str, emit: Emitter) -> dict:
    """A repeat the loop guard caught: observed with ``text``; at ``Limits.max_repeats`` repeats the run ends as
    ``stuck``."""
    repeats, limits = state.get("repeats", 0) + 1, Limits.from_dict(state["limits"])
    if repeats >= limits.max_repeats:
        messages = state["messages"] + [{"role": "ai", "content": reply.text}]
        return {"repeats": repeats, **stuck_run({**state, "repeats": repeats}, messages, prompts.stuck(repeats, what),
                                                emit)}
    event = ObservationEvent(text=text, error=what, error_kind="repeat")
    return {"repeats": repeats, **observe(state, reply.text, event, emit)}


def stuck_run(state: dict, messages: list[dict], why: str, emit: Emitter) -> dict:
    """The loop guard stops the run (``why``; ``messages``: the transcript with the last reply): like a run at a cap,
    it asks once for the final answer from what it observed (when the limits allow one more call), and ends
    ``stuck`` whether it answers or not."""
    if not guards.calls_left(state, Limits.from_dict(state["limits"])):
        return {"messages": messages, "reply": "", **_end("stuck", "stuck", prompts.stuck_end(why, None), emit)}
    emit(ErrorEvent(message=prompts.limit_reached(why), error_kind="stuck", fatal=False))
    return {"messages": messages, "reply": "", "stuck": why, "answer_only": True, "answer_from": len(messages),
            "next": "call_llm"}


def _finish(state: dict, reply: Reply, answer: str, emit: Emitter) -> dict:
    emit(FinalEvent(answer=answer))
    ended = ({"status": "stuck", "error": prompts.stuck_end(state["stuck"], True)} if state.get("stuck") else
             {"status": "finished"})
    return {"messages": state["messages"] + [{"role": "ai", "content": reply.text}], "final_answer": answer,
            "reply": "", "next": END, **ended}


def _end(status: str, kind: str, message: str, emit: Emitter, attempts: list[dict] | None = None) -> dict:
    """End the run with ``status`` (failed, stuck, context_exceeded), saying why."""
    emit(ErrorEvent(message=message, error_kind=kind, attempts=attempts or []))
    return {"status": status, "error": message, "next": END}


def fail_run(kind: str, message: str, emit: Emitter, attempts: list[dict] | None = None) -> dict:
    return _end("failed", kind, message, emit, attempts)


def settle_answer(state: dict, reply: Reply, emit: Emitter, finish_reason: str | None = None,
            again: str = "call_llm", ask_again: bool = True) -> dict:
    """Settle the reply to a request for the final answer: its Final answer, else the reply itself when it is
    plain text. A reply that is no answer (empty, cut off, an action, a plan) is corrected once when
    ``ask_again`` and the limits allow one more call (node ``again`` asks again), else the run fails saying so."""
    problem = guards.not_an_answer(reply, finish_reason)
    if problem is None:
        if reply.final_answer and reply.thought:
            emit(ThoughtEvent(text=reply.thought))
        if finish_reason == "length":
            emit(ErrorEvent(message=prompts.cut_off_answer(), error_kind="truncated", fatal=False))
        return _finish(state, reply, (reply.final_answer or reply.text).strip(), emit)
    if state.get("stuck"):  # asked once only
        return _end("stuck", "stuck", prompts.stuck_end(state["stuck"], False, problem), emit)
    if ask_again and state.get("answer_tries", 0) < 1 and guards.calls_left(state, Limits.from_dict(state["limits"])):
        text = guards.answer_correction(problem)
        emit(ObservationEvent(text=text.removeprefix("Observation: "), error=problem, error_kind="format"))
        return {"messages": state["messages"] + [{"role": "ai", "content": reply.text}, {"role": "human",
                                                                                          "content": text}],
                "answer_tries": state.get("answer_tries", 0) + 1, "reply": "", "next": again}
    return fail_run("no_answer", f"the agent gave no final answer when asked for it: {problem}", emit)


def _account(state: dict, c: Completion, step: int, price: list[float] | None = None) -> tuple[dict, LLMUsage]:
    """The state update counting LLM call ``step`` (tokens, and cost at ``price``) and its usage record."""
    failed_prompt, failed_reply = getattr(c, "failed_prompt_tokens", 0), getattr(c, "failed_completion_tokens", 0)
    prompt, reply = c.prompt_tokens + failed_prompt, c.completion_tokens + failed_reply  # abandoned attempts count
    cost, spent = guards.call_cost(price, prompt, reply), state.get("cost_usd", 0.0)
    update = {"llm_calls": step, "prompt_tokens": state["prompt_tokens"] + prompt,
              "completion_tokens": state["completion_tokens"] + reply,
              "failed_tokens": state.get("failed_tokens", 0) + failed_prompt + failed_reply,
              "tokens_estimated": state["tokens_estimated"] or c.estimated or bool(failed_prompt + failed_reply),
              "cost_usd": None if cost is None or spent is None else spent + cost}
    wait = c.latency_s if c.wait_s is None else c.wait_s
    return update, LLMUsage(call=step, prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                            latency_s=round(c.latency_s, 4), estimated=c.estimated, reply=c.text,
                            wait_s=round(wait, 4), attempts=c.attempts, cached=c.cached,
                            failed_prompt_tokens=failed_prompt, failed_completion_tokens=failed_reply,
                            counted_by=getattr(c, "counted_by", None))


def complete_call(state: dict, runtime: Runtime[AgentContext], prompt: str, emit: Emitter,
              messages: list[dict] | None = None, send: tuple | None = None) -> tuple[dict, Completion | None]:
    """LLM call ``emit.step`` on ``messages`` (default the transcript) under ``prompt``, kept within the context
    window, sent as ``send`` says (how the messages are built, and the stop sequences; default ``_chat_of``): the state update counting it (its usage goes with the next event emitted) and the completion (in the
    paper setting its text as the original received it: ``paper_prompts.received``); on
    LLMError, or a request that cannot fit the context window (by the estimate or by the server), the update
    ending the run and None."""
    messages = state["messages"] if messages is None else messages
    limits = Limits.from_dict(state["limits"])
    fitted, shortened, need = guards.fit(prompt, messages, limits.context_tokens, state.get("chars_per_token"),
                                         limits.reply_tokens, guards.margin_of(state))
    if fitted is None:
        reserved = guards.reply_room(limits.context_tokens, limits.reply_tokens)
        return _end("context_exceeded", "context", prompts.context_exceeded(
            need, limits.context_tokens, reserved, limits.context_source, guards.estimate_basis(state)), emit), None
    if shortened > state.get("shortened", 0):
        emit(ErrorEvent(message=prompts.context_shortened(shortened, limits.context_tokens), error_kind="context",
                        fatal=False))
    try:
        chat, stop = send or _chat_of(state, emit.technique)
        llm = runtime.context.llm
        follow = _followers(runtime.context, emit.step)
        c = run_control.call(getattr(runtime.context, "control", None), llm.complete, chat(prompt, fitted), stop,
                             on_retry=lambda a: emit(_retry_event(a)), cancel=getattr(llm, "cancel", None), **follow)
    except LLMError as e:
        spent = _abandoned(state, e.attempts)
        if (e.kind == "context" and e.window is not None and limits.context_tokens is None
                and state.get("prompts") != paper_prompts.PAPER):
            # the window the run did not know, as the server's error states it: kept to from now on, this call again
            learned = replace(limits, context_tokens=e.window.tokens, context_source=e.window.source)
            emit(ErrorEvent(message=prompts.window_learned(e.window.tokens, e.window.source), error_kind="context",
                            fatal=False, attempts=e.attempts))
            again = {**state, **spent, "limits": learned.__dict__.copy()}
            update, c = complete_call(again, runtime, prompt, emit, messages, send)
            return {**spent, "limits": learned.__dict__.copy(), **update}, c
        if e.kind == "context":  # the server's count of the request's tokens is past the window
            return {**spent, **_end("context_exceeded", "context", str(e), emit, e.attempts)}, None
        return {**spent, **fail_run(e.kind, str(e), emit, e.attempts)}, None
    if state.get("prompts") == paper_prompts.PAPER:  # the reply as the original received it, not the client's cut
        c = replace(c, text=paper_prompts.received(c.text if c.raw is None else c.raw, stop))
    update, emit.usage = _account(state, c, emit.step, getattr(runtime.context, "price", None))
    update["shortened"] = shortened
    measured = None if c.estimated else guards.measured_chars_per_token(prompt, fitted, c.prompt_tokens)
    if measured:
        update.update(chars_per_token=measured, counted_by=guards.USAGE)
    counted = state.get("counted") or [None, None]
    if measured and not shortened and messages is state["messages"] and counted[1] == len(fitted) and counted[0]:
        # the request the tokenizer counted just before: what the chat template added, as the server counts
        update["template_tokens"] = guards.template_tokens(c.prompt_tokens, counted[0], len(fitted))
    return update, c


def _abandoned(state: dict, attempts: list[dict]) -> dict:
    """The state update counting the tokens the abandoned attempts of a call that failed for good spent."""
    prompt = sum(a.get("prompt_tokens", 0) for a in attempts)
    reply = sum(a.get("completion_tokens", 0) for a in attempts)
    if not prompt + reply:
        return {}
    return {"prompt_tokens": state["prompt_tokens"] + prompt, "completion_tokens": state["completion_tokens"] + reply,
            "failed_tokens": state.get("failed_tokens", 0) + prompt + reply, "tokens_estimated": True}


def _chat_of(state: dict, tech: Technique) -> tuple:
    """How a request is sent, and its stop sequences: the improved setting's chat turns (and REAPER's, whose paper
    gives no conversation form, nor, in its paper setting, a stop sequence); the PlanRAG paper setting's two
    messages (SingleRAG's calls with no stop sequence, as the original sent them)."""
    paper = state.get("prompts") == paper_prompts.PAPER
    if "technique" not in state:
        return _chat, None if paper else prompts.STOP
    if not paper:
        return _chat, prompts.STOP
    if tech.max_actions == 1 or state["answer_only"]:
        return (lambda prompt, messages: paper_prompts.chat_single(prompt, messages[0]["content"])), None
    return paper_prompts.chat, paper_prompts.STOP


def _followers(context: AgentContext, call: int) -> dict:
    """The arguments of an LLM call for whoever follows it as it goes (none when nobody does: models that take no
    such arguments, e.g. the benchmark's caching one, are never given them)."""
    follow = {}
    if getattr(context, "on_text", None):
        follow["on_text"] = context.on_text
    if getattr(context, "on_attempt", None):
        follow["on_attempt"] = lambda attempt: context.on_attempt({**attempt, "call": call})
    return follow


def _retry_event(attempt: dict) -> ErrorEvent:
    """The event of an LLM attempt that failed and is retried (emitted as it happens)."""
    return ErrorEvent(message=f"{attempt['error_kind']} error on attempt {attempt['attempt']} of {attempt['of']} "
                              f"after {attempt['duration_s']:.1f} s; retrying in {attempt['retry_in_s']:.1f} s: "
                              f"{attempt['error']}", error_kind="retry", fatal=False, attempts=[attempt])


def _answer_request(state: dict) -> list[dict]:
    """The messages asking for the final answer: the question and the data the transcript collected, then the
    answer-only exchange so far."""
    start = state.get("answer_from") or len(state["messages"])
    return guards.fit_answer(state["answer_prompt"], state["messages"][0]["content"],
                             guards.collected_data(state["messages"][:start]), state["messages"][start:],
                             Limits.from_dict(state["limits"]), state.get("chars_per_token"))


def announce_plan(hitl: str, kind: str, old_plan: list[str], new_plan: list[str], emit: Emitter) -> bool:
    """Emit the plan (``kind`` plan) or re-plan (``replan``) the agent wrote, and whether the analyst reviews it
    first (``hitl``)."""
    review = hitl == "approve-every-plan" or (hitl == "approve-replans" and kind == "replan")
    status = "proposed" if review else "adopted"
    if kind == "plan":
        emit(PlanEvent(steps=new_plan, status=status))
    else:
        emit(ReplanEvent(replan=True, old_plan=old_plan, new_plan=new_plan, status=status))
    return review


def to_answer(state: dict, limit: str, reason: str, emit: Emitter) -> dict:
    """Say which limit was reached and send the run to its final answer."""
    emit(ErrorEvent(message=prompts.limit_reached(reason), error_kind="limit", fatal=False))
    return {"answer_only": True, "limit": limit, "answer_from": len(state["messages"])}


def context_full(state: dict, limits: Limits) -> tuple[str, str] | None:
    """When the next request cannot fit the context window even with older observations shortened."""
    fitted, _, need = guards.fit(state["prompt"], state["messages"], limits.context_tokens,
                                 state.get("chars_per_token"), limits.reply_tokens, guards.margin_of(state))
    if fitted is None:
        reserved = guards.reply_room(limits.context_tokens, limits.reply_tokens)
        room = prompts.context_room(need, limits.context_tokens, reserved, limits.context_source,
                                    guards.estimate_basis(state))
        return "context", f"context window full ({room})"
    return None


def calibrate(state: dict, runtime: Runtime[AgentContext]) -> dict:
    """Before a call, with a context window to keep to: the characters per token of the transcript by the model's
    own tokenizer, where one is known (a tokenizer file, or the server's; else the estimate stays, calibrated by
    each call's usage), and which counted it (in the paper setting never the server's: its model is opened without
    it, AgentRuntime._open_llm)."""
    if Limits.from_dict(state["limits"]).context_tokens is None:
        return {}
    llm = runtime.context.llm
    counted = guards.count_request(state["prompt"], state["messages"], getattr(llm, "count_tokens", None))
    cpt = guards.tokenized_chars_per_token(state["prompt"], state["messages"], counted, state.get("template_tokens"))
    return {"chars_per_token": cpt, "counted_by": getattr(llm, "counted_by", None),
            "counted": [counted, len(state["messages"])]} if cpt else {}


def _proceed(state: dict, reply: Reply, emit: Emitter) -> dict:
    """Act on a reply once its plan, if any, is settled (the improved setting): final answer, action, or a corrective
    observation."""
    if reply.thought or reply.current_step:
        emit(ThoughtEvent(text=reply.thought or "", current_step=reply.current_step))
    if reply.problems:
        return _correct(state, reply, reply.problems[0], emit)
    if reply.final_answer is not None:
        if (not state.get("queries", state["actions"]) and not state.get("told_unqueried")
                and guards.calls_left(state, Limits.from_dict(state["limits"]))):
            note = ObservationEvent(text=prompts.not_queried_yet(state["language"]), error_kind="unqueried")
            return {"told_unqueried": True, **observe(state, reply.text, note, emit)}
        return _finish(state, reply, reply.final_answer, emit)
    if not reply.action:
        if reply.plan:
            return observe(state, reply.text, ObservationEvent(text=prompts.go_on_with_plan()), emit)
        return _correct(state, reply, "your reply has no Action", emit)
    language, kind = state["language"], tool_kind(reply.action)
    if kind is None:
        return _correct(state, reply, prompts.unknown_tool(reply.action, language), emit)
    if kind != "self" and kind != language:
        return _correct(state, reply, prompts.wrong_database(reply.action, language), emit)
    found = query_language(reply.action_input) if kind != "self" else None
    if found and found != language:
        return _correct(state, reply, prompts.wrong_language(found, language), emit)
    key = guards.action_key(kind, reply.action_input)
    earlier = (state.get("seen") or {}).get(key)
    if earlier is not None:
        return _repeat(state, reply, prompts.repeated_action(earlier["call"], earlier["text"]),
                       f"the same action as at LLM call {earlier['call']}: {reply.action_input}", emit)
    tool = prompts.TOOL_NAMES[kind] if reply.query_moved and kind in prompts.TOOL_NAMES else reply.action
    emit(ActionEvent(tool=tool, query=reply.action_input, language=kind))
    return _queue_action(state, reply.text, kind, reply.action_input)


def _settle_plan(state: dict, reply: Reply, emit: Emitter) -> dict:
    """For the planning techniques: take the reply's (new) plan, or send it for review; then proceed."""
    tech, plan = emit.technique, state["plan"]
    if not plan:
        if not reply.plan:
            return _correct(state, reply, "your reply has no Plan, and no Plan is in force; begin with the Plan",
                            emit, prompts.plan_hint(tech, state["language"]))
        proposal = {"kind": "plan", "plan": reply.plan, "old_plan": []}
    elif tech.replans and reply.replan is not False and reply.plan and reply.plan != plan:
        proposal = {"kind": "replan", "plan": reply.plan, "old_plan": plan}
    elif tech.replans and reply.replan and not reply.action and reply.final_answer is None and not reply.problems:
        return _correct(state, reply, "you answered Re-plan: Y but wrote no new Plan", emit,
                        prompts.plan_hint(tech, state["language"]))
    else:
        if tech.replans and reply.replan is not None:
            note = "Re-plan: Y without a new Plan; the Plan is kept" if reply.replan else ""
            emit(ReplanEvent(replan=False, old_plan=plan, new_plan=plan, note=note))
        return _proceed(state, reply, emit)
    if announce_plan(state["hitl"], proposal["kind"], plan, proposal["plan"], emit):
        return {"reply": reply.text, "proposal": proposal, "next": "review_plan"}
    return {"plan": proposal["plan"], **_proceed({**state, "plan": proposal["plan"]}, reply, emit)}


def call_llm(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call in the improved setting, and what its reply leads to."""
    limits = Limits.from_dict(state["limits"])
    step = state["llm_calls"] + 1
    emit = Emitter(runtime, step)
    update: dict = calibrate(state, runtime)
    state = {**state, **update}
    if not state["answer_only"]:
        reached = guards.limit_reached(state, limits) or context_full(state, limits)
        if reached:
            update.update(to_answer(state, *reached, emit))
    elif state.get("answer_from") is None:  # SingleRAG after its query
        update["answer_from"] = len(state["messages"])
    state = {**state, **update}
    if state["answer_only"]:
        counted, c = complete_call(state, runtime, state["answer_prompt"], emit, _answer_request(state))
    else:
        counted, c = complete_call(state, runtime, state["prompt"], emit)
    update.update(counted)
    if c is None:
        return update
    reply, finish_reason = parse_reply(c.text), getattr(c, "finish_reason", None)
    state = {**state, **update}
    if state["answer_only"]:
        return {**update, **settle_answer(state, reply, emit, finish_reason)}
    if not c.text.strip():
        return {**update, **_empty_reply(state, reply, emit)}
    update["empty_replies"] = 0
    if finish_reason == "length" and (reply.final_answer is None or reply.problems):
        return {**update, **_correct(state, reply, prompts.CUT_OFF, emit)}
    if finish_reason == "length":
        emit(ErrorEvent(message=prompts.cut_off_answer(), error_kind="truncated", fatal=False))
    if emit.technique.plans:
        return {**update, **_settle_plan(state, reply, emit)}
    return {**update, **_proceed(state, reply, emit)}


def _empty_reply(state: dict, reply: Reply, emit: Emitter) -> dict:
    """An empty reply: observed as such; ``guards.MAX_EMPTY_REPLIES`` in a row end the run."""
    empty = state.get("empty_replies", 0) + 1
    if empty >= guards.MAX_EMPTY_REPLIES:
        return {"empty_replies": empty, **fail_run("empty_reply", prompts.empty_replies(empty), emit)}
    problem = "your reply was empty"
    text = prompts.correction(problem, emit.technique, state["language"])
    return {"empty_replies": empty,
            **observe(state, reply.text, ObservationEvent(text=text, error=problem, error_kind="format"), emit)}


def await_review(state: dict, runtime: Runtime[AgentContext]) -> tuple[Review, str, Emitter]:
    """Pause for the analyst's review of the proposed plan (nothing may come before this in a node: LangGraph
    re-runs the node from its top on resume). Returns the review, its verdict (``approved``, also for an edit
    that changes nothing; ``edited`` or ``rejected``) and the emitter of what follows."""
    review = Review.from_dict(interrupt({**state["proposal"], "reply": state["reply"]}))
    if review.action == "approve" or (review.action == "edit" and list(review.plan) == state["proposal"]["plan"]):
        verdict = "approved"
    else:
        verdict = "edited" if review.action == "edit" else "rejected"
    return review, verdict, Emitter(runtime, state["llm_calls"])


def review_plan(state: AgentState, runtime: Runtime[AgentContext], proceed: Callable = _proceed) -> dict:
    """Pause until the analyst approves, edits or rejects the proposed plan; then go on accordingly (an approved
    plan's reply is acted on by ``proceed``, the setting's)."""
    review, verdict, emit = await_review(state, runtime)
    reply, proposed = parse_reply(state["reply"]), state["proposal"]["plan"]
    if verdict == "approved":
        emit(PlanEvent(steps=proposed, origin="analyst", status="approved", note=review.note,
                       reviewer=review.reviewer))
        return {"plan": proposed, "proposal": None, **proceed({**state, "plan": proposed}, reply, emit)}
    if verdict == "edited":
        steps = list(review.plan)
        emit(PlanEvent(steps=steps, origin="analyst", status="edited", proposed_steps=proposed,
                       note=review.note, reviewer=review.reviewer))
        feedback = ObservationEvent(text=prompts.plan_edited(steps, review.note))
        return {"plan": steps, "proposal": None, **observe(state, reply.through_plan(), feedback, emit)}
    emit(PlanEvent(steps=proposed, origin="analyst", status="rejected", note=review.note, reviewer=review.reviewer))
    feedback = ObservationEvent(text=prompts.plan_rejected(review.note))
    return {"proposal": None, **observe(state, reply.through_plan(), feedback, emit)}


def _call_paper(state: dict, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call in the paper setting, and what its reply leads to, with nothing the original did not send: no
    correction, no second request for an answer, no note on a repeat. The run ends unanswered at the original
    executor's iteration limit, or at a workbench safety limit, which it names as such."""
    limits, tech = Limits.from_dict(state["limits"]), runtime.context.technique
    emit = Emitter(runtime, state["llm_calls"] + 1)
    reached = _paper_limit(state, limits)
    if reached:
        limit, message = reached
        return {"limit": limit, **fail_run("limit", message, emit)}
    if state["answer_only"] and tech.max_actions != 1:  # a run checkpointed at a limit before this setting stopped
        return {"limit": state.get("limit"), **fail_run("limit", "the run reached its limits; " + _NO_ANSWER, emit)}
    if state["answer_only"]:  # SingleRAG's answer call
        reply, observed = state["messages"][1]["content"], paper_prompts.observed(state["messages"][2]["content"])
        question = state["messages"][0]["content"].removeprefix("Question: ")
        text = paper_prompts.single_answer(question, paper_prompts.single_query(reply) or "", observed)
        update, c = complete_call(state, runtime, state["answer_prompt"], emit, [{"role": "human", "content": text}])
        if c is None:
            return update
        answer = paper_prompts.read_reply(c.text)
        answer = answer[1] if answer[0] == "final" else c.text.strip()
        if not answer:
            return {**update, **fail_run("no_answer", "the answer call gave an empty reply (paper prompt setting: it "
                                                   "is not asked again)", emit)}
        return {**update, **_finish({**state, **update}, parse_reply(c.text), answer, emit)}
    if state.get("follows_plan"):
        return _step_autoplan(state, runtime, limits)
    update, c = complete_call(state, runtime, state["prompt"], emit)
    if c is None:
        return update
    state, reply = {**state, **update}, parse_reply(c.text)
    if tech.max_actions == 1:
        return {**update, **_single_paper(state, reply, emit)}
    return {**update, **_settle_paper(state, reply, emit)}


_NO_ANSWER = "the run ends without an answer (paper prompt setting: no final answer is asked for)"


def _paper_limit(state: dict, limits: Limits) -> tuple[str, str] | None:
    """Before a paper-setting call: the limit that ends the run, and the message saying whose limit it is (an
    iteration of a run following a plan is its step of three calls)."""
    done = state.get("iterations", 0) if state.get("follows_plan") else state["llm_calls"]
    if not state["answer_only"] and done >= paper_prompts.MAX_ITERATIONS:
        return "iterations", (f"{paper_prompts.STOPPED} (the original agent executor's limit of "
                              f"{paper_prompts.MAX_ITERATIONS} iterations); {_NO_ANSWER}")
    return _safety_limit(state, limits)


def _safety_limit(state: dict, limits: Limits) -> tuple[str, str] | None:
    """A workbench safety limit reached (the call cap, tokens, cost, the context window), named as not the
    paper's."""
    reached = guards.limit_reached(state, limits, keep_answer_call=False) or context_full(state, limits)
    if reached:
        return reached[0], f"{reached[1]}: a workbench safety limit, not the paper's; {_NO_ANSWER}"
    return None


def _step_autoplan(state: dict, runtime: Runtime[AgentContext], limits: Limits) -> dict:
    """One step of a run following a learned plan in the paper setting, as the AutoPlan paper's agent acts
    (equations 2-5): a thought call ending with the Thought-prompt, an action call continuing the thought after
    ``Action:``, and the formalizer's call (Appendix A.1) putting that action into a valid form; the formalized
    action is acted on as the original parser read a reply, and the history keeps the thought and the formalized
    action (equation 5). A workbench safety limit reached between the calls ends the run."""
    language, update = state["language"], {"iterations": state.get("iterations", 0) + 1}
    texts: list[str] = []
    for call in ("thought", "action", "formalize"):
        emit = Emitter(runtime, state["llm_calls"] + 1)
        reached = _safety_limit(state, limits) if texts else None
        if reached:
            return {**update, "limit": reached[0], **fail_run("limit", reached[1], emit)}
        if call == "thought":
            step, c = complete_call(state, runtime, state["prompt"], emit,
                                    send=(paper_prompts.thought_chat, paper_prompts.THOUGHT_STOP))
        elif call == "action":
            step, c = complete_call(state, runtime, state["prompt"], emit,
                                    state["messages"] + [paper_prompts.action_cue(texts[0])])
        else:
            step, c = complete_call(state, runtime, "", emit, [{"role": "human", "content": paper_prompts.formalizer(
                language, texts[1])}], send=(paper_prompts.chat_alone, None))
        update.update(step)
        if c is None:
            return update
        state = {**state, **step}
        texts.append(c.text.strip())
        if call == "thought":
            emit(ThoughtEvent(text=texts[0]))
        elif call == "action":
            emit(ThoughtEvent(text=f"{paper_prompts.ACTION} {texts[1]} (to be formalized)"))
    text = f"{texts[0]}\n{texts[2]}"
    return {**update, **_act_paper(state, parse_reply(text), emit, acted=texts[2])}


def _single_paper(state: dict, reply: Reply, emit: Emitter) -> dict:
    """SingleRAG's retrieval reply, as the original read it: the text after its first ``Action input:`` (up to
    any ``Observation``) runs as the database query, whatever tool its Action names."""
    query = paper_prompts.single_query(reply.text)
    if reply.thought:
        emit(ThoughtEvent(text=reply.thought))
    if query is None or not query.strip():
        return fail_run("format", "the reply has no Action input to run (the original SingleRAG failed here; paper "
                               "prompt setting: no correction is asked for)", emit)
    language = state["language"]
    query = paper_prompts.fence_free(query, language).strip()
    emit(ActionEvent(tool=reply.action or prompts.TOOL_NAMES[language], query=query, language=language))
    return _queue_action(state, reply.text, language, query)


def _settle_paper(state: dict, reply: Reply, emit: Emitter) -> dict:
    """The ``paper`` setting: a plan the reply writes is taken (or sent for review) as in the improved setting, but
    a reply without one is not corrected; then the reply is acted on as the original implementation did."""
    tech, plan = emit.technique, state["plan"]
    new = (tech.plans and reply.plan and reply.plan != plan
           and (not plan or (tech.replans and reply.replan is not False)))
    if not new:
        if plan and tech.replans and reply.replan is not None:  # the trace counts re-plans as in the improved setting
            emit(ReplanEvent(replan=False, old_plan=plan, new_plan=plan))
        return _act_paper(state, reply, emit)
    proposal = {"kind": "replan" if plan else "plan", "plan": reply.plan, "old_plan": plan}
    if announce_plan(state["hitl"], proposal["kind"], plan, proposal["plan"], emit):
        return {"reply": reply.text, "proposal": proposal, "next": "review_plan"}
    return {"plan": proposal["plan"], **_act_paper({**state, "plan": proposal["plan"]}, reply, emit)}


def _act_paper(state: dict, reply: Reply, emit: Emitter, acted: str | None = None) -> dict:
    """Act on a reply as the original parser and executor did (paper_prompts.read_reply): an Action with its Action
    input runs when the Action names a tool of the run exactly (else the executor's "not a valid tool"
    observation); else a Final answer ends the run; a reply with both, or with neither, ends the run failed (the
    original raised a parse error there), with no corrective observation. ``acted``: the part read for the action
    (AutoPlan's formalized action, its thought emitted already)."""
    if acted is None and (reply.thought or reply.current_step):
        emit(ThoughtEvent(text=reply.thought or "", current_step=reply.current_step))
    kind, first, query = paper_prompts.read_reply(reply.text if acted is None else acted)
    if kind == "both":
        return fail_run("format", "the reply has both an Action and a Final answer (paper prompt setting: no "
                               "correction is asked for)", emit)
    if kind == "neither":
        return fail_run("format", "the reply has neither an Action with its Action input nor a Final answer (paper "
                               "prompt setting: no correction is asked for)", emit)
    if kind == "final":
        return _finish(state, reply, first, emit)
    language, text = state["language"], reply.text if acted is not None else paper_prompts.logged(reply.text)
    tool = paper_prompts.tool_of(first, language)
    if tool is None:
        event = ObservationEvent(text=paper_prompts.invalid_tool(first, language), error="invalid tool",
                                 error_kind="format")
        return observe(state, text, event, emit)
    query = paper_prompts.fence_free(query, language) if tool != "self" else query
    emit(ActionEvent(tool=first, query=query, language=tool))
    return _queue_action(state, text, tool, query)


def _queue_action(state: dict, text: str, kind: str, query: str) -> dict:
    """The update that runs the agent's action next: after the analyst's review in review mode "approve every
    query" (a database query, not a self-thinking step), else at once."""
    reviewed = state.get("review_queries") and kind != "self"
    return {"reply": text, "action": {"tool": kind, "query": query},
            "next": "review_query" if reviewed else "run_action"}


def _current_step(state: dict) -> str:
    """The plan step the agent's pending reply says it works on ("" when it names none)."""
    return parse_reply(state["reply"]).current_step or "" if state.get("reply") else ""


def review_query(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Pause until the analyst approves, edits or rejects the query the agent wants to run (review mode "approve
    every query"); a rejection's note is the agent's observation. Nothing comes before the interrupt (see
    ``await_review``)."""
    action = state["action"]
    review = Review.from_dict(interrupt({"kind": "query", "plan": state["plan"], "old_plan": [],
                                         "reply": state["reply"], "query": action["query"],
                                         "language": action["tool"], "current_step": _current_step(state)}))
    emit = Emitter(runtime, state["llm_calls"])
    edited = review.action == "edit" and review.query.strip() != action["query"].strip()
    status = "rejected" if review.action == "reject" else "edited" if edited else "approved"
    query = review.query.strip() if edited else action["query"]
    emit(QueryReviewEvent(status=status, query=query, proposed=action["query"], note=review.note,
                          reviewer=review.reviewer))
    if status == "rejected":
        feedback = ObservationEvent(text=prompts.query_rejected(review.note), error="rejected by the analyst",
                                    error_kind="rejected")
        return {"action": None, **observe(state, state["reply"], feedback, emit)}
    return {"action": {**action, "query": query}, "next": "run_action"}


def run_query(backend: Backend, query: str, limits: Limits, control: RunControl | None = None,
              engine_words: bool = False) -> ObservationEvent:
    """Run one query and observe its rows or its error (abandoned, and cancelled through the backend's ``cancel``
    hook where it has one, when ``control`` stops the run: RunStopped); ``engine_words``: an error in the engine's
    own words where the backend has them (``QueryError.engine_message``). Raises BackendUnavailable."""
    start = time.perf_counter()
    try:
        r = run_control.call(control, backend.query, query, timeout_s=limits.query_timeout_s,
                             row_cap=limits.row_cap, cancel=getattr(backend, "cancel", None)).capped(limits.cell_chars)
    except BackendUnavailable:
        raise
    except QueryError as e:  # its message is cut where it is made (MAX_ERROR_CHARS), then to the observation cap
        said = (engine_words and e.engine_message) or str(e)
        event = ObservationEvent(text=cap_text(prompts.query_error(e.kind, said), limits.observation_chars),
                                 error=said, error_kind=e.kind, executed=getattr(e, "executed", "") or "")
    else:
        event = ObservationEvent(text=r.to_text(limits.observation_rows, limits.observation_chars),
                                 columns=list(r.columns), rows=[list(row) for row in r.rows],
                                 total_rows=r.total_rows, executed=r.executed)
    event.latency_s = round(time.perf_counter() - start, 4)
    return event


def _observe(state: dict, runtime: Runtime[AgentContext], limits: Limits) -> ObservationEvent:
    """The improved setting's observation of the action: its query's rows or error, a Self-thinking input echoed.
    Raises BackendUnavailable."""
    action = state["action"]
    if action["tool"] == "self":
        return ObservationEvent(text=cap_text(action["query"], limits.observation_chars))
    return run_query(runtime.context.backend, action["query"], limits, getattr(runtime.context, "control", None))


def _observe_paper(state: dict, runtime: Runtime[AgentContext], limits: Limits) -> ObservationEvent:
    """The paper setting's: the rows or the engine's error as the original's tool printed them; its Self thinking
    tool returned nothing. Raises BackendUnavailable."""
    action = state["action"]
    if action["tool"] == "self":
        return ObservationEvent(text="")
    event = run_query(runtime.context.backend, action["query"], limits, getattr(runtime.context, "control", None),
                      engine_words=True)
    event.text = (paper_prompts.error_text(event.error, state["language"]) if event.error else
                  paper_prompts.result_text(event.columns, event.rows, state["language"]))
    return event


def run_action(state: AgentState, runtime: Runtime[AgentContext], observe_action: Callable = _observe,
               guarded: bool = True) -> dict:
    """Run the action's query (or echo a Self-thinking input) and observe the result or the error, as
    ``observe_action`` says (the setting's); ``guarded``: the loop guard keeps what the action gave."""
    limits, action = Limits.from_dict(state["limits"]), state["action"]
    emit = Emitter(runtime, state["llm_calls"])
    try:
        event = observe_action(state, runtime, limits)
    except BackendUnavailable as e:
        return fail_run(e.kind, str(e), emit)
    actions = state["actions"] + 1
    max_actions = runtime.context.technique.max_actions
    answer_only = state["answer_only"] or bool(max_actions and actions >= max_actions)
    remembered = _remember(state, action, event) if guarded else {}
    queries = state.get("queries", state["actions"]) + (action["tool"] != "self")
    update = {"actions": actions, "queries": queries, "action": None, "answer_only": answer_only, **remembered}
    if update.get("repeats", 0) >= limits.max_repeats:
        emit(event)
        messages = state["messages"] + [{"role": "ai", "content": state["reply"]},
                                        {"role": "human", "content": prompts.observation_message(event.text)}]
        why = prompts.stuck(update["repeats"], f"the same error: {event.error}")
        return {**update, **stuck_run({**state, **update}, messages, why, emit)}
    return {**update, **observe(state, state["reply"], event, emit)}


def _remember(state: dict, action: dict, event: ObservationEvent) -> dict:
    """The loop guard's record of an action and what it gave; a query error met before (from another query)
    counts as a repeat, and the observation says so (not a timeout: a slow database is not the agent's loop)."""
    seen = dict(state.get("seen") or {})
    seen[guards.action_key(action["tool"], action["query"])] = {"call": state["llm_calls"],
                                                               "text": guards.earlier_result(event.text)}
    if not event.error or event.error_kind == "timeout":
        return {"seen": seen}
    key = "error:" + event.error
    if key not in seen:
        seen[key] = {"call": state["llm_calls"], "text": event.error}
        return {"seen": seen}
    event.text += " " + prompts.same_error(seen[key]["call"])
    return {"seen": seen, "repeats": state.get("repeats", 0) + 1}


def route(state: AgentState) -> str:
    return state["next"]


def timed(node):
    """The node, adding the seconds it runs to the state's ``wall_s`` (not the time a pause waits); a stopped
    run ends before it (RunStopped)."""
    def run(state, runtime):
        if getattr(runtime.context, "control", None) is not None:
            runtime.context.control.check()
        start = time.perf_counter()
        update = node(state, runtime)
        return {**update, "wall_s": state.get("wall_s", 0.0) + time.perf_counter() - start}
    return run


@dataclass(frozen=True)
class LoopSetting:
    """How the loop acts in one prompt setting, chosen once, when its graph is built: the node making the LLM call,
    how a reply is acted on once its plan is settled, how an action is observed, and whether the loop guard keeps
    what actions gave."""

    call_llm: Callable
    proceed: Callable
    observe_action: Callable
    guarded: bool


#: The loop's behaviour by prompt setting: the workbench's (corrections, the loop guard, a final answer asked for at a
#: limit), and the paper's (what the authors' code did: paper_prompts.py).
LOOP_SETTINGS = {paper_prompts.IMPROVED: LoopSetting(call_llm, _proceed, _observe, guarded=True),
                 paper_prompts.PAPER: LoopSetting(_call_paper, _act_paper, _observe_paper, guarded=False)}


def build_graph(prompt_setting: str = paper_prompts.IMPROVED) -> StateGraph:
    """The uncompiled graph of the loop in ``prompt_setting``; compile it with a checkpointer. Every setting's graph
    has the same nodes, so a run's checkpoints read in either."""
    setting = LOOP_SETTINGS[paper_prompts.check(prompt_setting)]
    graph = StateGraph(AgentState, context_schema=AgentContext)
    graph.add_node("call_llm", timed(setting.call_llm))
    graph.add_node("review_plan", timed(partial(review_plan, proceed=setting.proceed)))
    graph.add_node("run_action", timed(partial(run_action, observe_action=setting.observe_action,
                                               guarded=setting.guarded)))
    graph.add_node("review_query", timed(review_query))
    graph.add_edge(START, "call_llm")
    for node in ("call_llm", "review_plan", "run_action", "review_query"):
        graph.add_conditional_edges(node, route, ["call_llm", "review_plan", "run_action", "review_query", END])
    return graph


class LoopEngine(Engine):
    """The engine of a technique that runs on this loop, with its prompt sets by setting (``prompt_sets``: the
    settings it has)."""

    builder = staticmethod(build_graph)
    llm_nodes = ("call_llm",)
    query_nodes = ("run_action", "review_query")

    def __init__(self, prompt_sets: dict[str, PromptSet]):
        self.prompt_sets = prompt_sets

    def initial_state(self, tech: Technique, settings: RunSettings, ws: Workspace, hitl: str,
                      note: str | None) -> dict:
        chosen, backend = self.prompt_sets[settings.prompts], ws.backend
        schema, text = backend.schema_text(), ws.question.text
        if chosen.inputs is not None:
            schema, text = chosen.inputs(ws.question, backend.language, schema)
        return initial_state(tech, hitl, settings.limits, backend.language, schema, text, note,
                             settings.initial_plan, settings.prompts, settings.review_queries, chosen)
