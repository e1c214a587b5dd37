"""What the nodes of every agent graph share (the loop's, core.agents.graph and paper_loop; REAPER's): the run's
context (``AgentContext``), the events' ``Emitter``, the counted LLM call (``complete_call``), observations, the
final answer, a run's end, a plan announced and its review awaited, a query run."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from core.agents import control as run_control
from core.agents import guards, paper_prompts, prompts
from core.agents.control import RunControl
from core.agents.parsing import Reply
from core.agents.state import completed
from core.backends.base import Backend, BackendUnavailable, QueryError, cap_text
from core.llm.client import ChatLLM, Completion, LLMError
from core.model.events import (ErrorEvent, Event, FinalEvent, LLMUsage, ObservationEvent, PlanEvent, ReplanEvent,
                               ThoughtEvent)
from core.model.run_settings import Limits, Review
from core.model.technique import Technique


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


def correct(state: dict, reply: Reply, problem: str, emit: Emitter, hint: str | None = None) -> dict:
    """A corrective observation (``hint``: how to go on, default the format's). The same reply corrected
    before counts as a repeat."""
    text = prompts.correction(problem, emit.technique, state["language"], hint)
    key, seen = guards.reply_key(reply.text), state["seen"]
    if key in seen:
        return repeat(state, reply, prompts.same_reply(seen[key]["call"]) + " " + text, problem, emit)
    seen = {**seen, key: {"call": state["llm_calls"], "text": problem}}
    return {"seen": seen, **observe(state, reply.text, ObservationEvent(text=text, error=problem,
                                                                         error_kind="format"), emit)}


def repeat(state: dict, reply: Reply, text: str, what: str, emit: Emitter) -> dict:
    """A repeat the loop guard caught: observed with ``text``; at ``Limits.max_repeats`` repeats the run ends as
    ``stuck``."""
    repeats, limits = state["repeats"] + 1, Limits.from_dict(state["limits"])
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
        return {"messages": messages, "reply": "", **end_run("stuck", "stuck", prompts.stuck_end(why, None), emit)}
    emit(ErrorEvent(message=prompts.limit_reached(why), error_kind="stuck", fatal=False))
    return {"messages": messages, "reply": "", "stuck": why, "answer_only": True, "answer_from": len(messages),
            "next": "call_llm"}


def finish(state: dict, reply: Reply, answer: str, emit: Emitter) -> dict:
    emit(FinalEvent(answer=answer))
    ended = ({"status": "stuck", "error": prompts.stuck_end(state["stuck"], True)} if state["stuck"] else
             {"status": "finished"})
    return {"messages": state["messages"] + [{"role": "ai", "content": reply.text}], "final_answer": answer,
            "reply": "", "next": END, **ended}


def end_run(status: str, kind: str, message: str, emit: Emitter, attempts: list[dict] | None = None) -> dict:
    """End the run with ``status`` (failed, stuck, context_exceeded), saying why."""
    emit(ErrorEvent(message=message, error_kind=kind, attempts=attempts or []))
    return {"status": status, "error": message, "next": END}


def fail_run(kind: str, message: str, emit: Emitter, attempts: list[dict] | None = None) -> dict:
    return end_run("failed", kind, message, emit, attempts)


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
        return finish(state, reply, (reply.final_answer or reply.text).strip(), emit)
    if state["stuck"]:  # asked once only
        return end_run("stuck", "stuck", prompts.stuck_end(state["stuck"], False, problem), emit)
    if ask_again and state["answer_tries"] < 1 and guards.calls_left(state, Limits.from_dict(state["limits"])):
        text = guards.answer_correction(problem)
        emit(ObservationEvent(text=text.removeprefix("Observation: "), error=problem, error_kind="format"))
        return {"messages": state["messages"] + [{"role": "ai", "content": reply.text}, {"role": "human",
                                                                                          "content": text}],
                "answer_tries": state["answer_tries"] + 1, "reply": "", "next": again}
    return fail_run("no_answer", f"the agent gave no final answer when asked for it: {problem}", emit)


def _account(state: dict, c: Completion, step: int, price: list[float] | None = None) -> tuple[dict, LLMUsage]:
    """The state update counting LLM call ``step`` (tokens, and cost at ``price``) and its usage record."""
    failed_prompt, failed_reply = getattr(c, "failed_prompt_tokens", 0), getattr(c, "failed_completion_tokens", 0)
    prompt, reply = c.prompt_tokens + failed_prompt, c.completion_tokens + failed_reply  # abandoned attempts count
    cost, spent = guards.call_cost(price, prompt, reply), state["cost_usd"]
    update = {"llm_calls": step, "prompt_tokens": state["prompt_tokens"] + prompt,
              "completion_tokens": state["completion_tokens"] + reply,
              "failed_tokens": state["failed_tokens"] + failed_prompt + failed_reply,
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
    window, sent as ``send`` (how the messages are built, and the stop sequences; default ``chat_turns``) says.
    Returns the state update counting it and the completion; on LLMError or a request that cannot fit the window,
    the update ending the run and None."""
    messages = state["messages"] if messages is None else messages
    limits = Limits.from_dict(state["limits"])
    fitted, shortened, need = guards.fit(prompt, messages, limits.context_tokens, state["chars_per_token"],
                                         limits.reply_tokens, guards.margin_of(state))
    if fitted is None:
        reserved = guards.reply_room(limits.context_tokens, limits.reply_tokens)
        return end_run("context_exceeded", "context", prompts.context_exceeded(
            need, limits.context_tokens, reserved, limits.context_source, guards.estimate_basis(state)), emit), None
    if shortened > state["shortened"]:
        emit(ErrorEvent(message=prompts.context_shortened(shortened, limits.context_tokens), error_kind="context",
                        fatal=False))
    try:
        chat, stop = send or chat_turns(state)
        llm = runtime.context.llm
        follow = _followers(runtime.context, emit.step)
        c = run_control.call(getattr(runtime.context, "control", None), llm.complete, chat(prompt, fitted), stop,
                             on_retry=lambda a: emit(_retry_event(a)), cancel=getattr(llm, "cancel", None), **follow)
    except LLMError as e:
        spent = _abandoned(state, e.attempts)
        if (e.kind == "context" and e.window is not None and limits.context_tokens is None
                and state["prompts"] != paper_prompts.PAPER):
            # the window the run did not know, as the server's error states it: kept to from now on, this call again
            learned = replace(limits, context_tokens=e.window.tokens, context_source=e.window.source)
            emit(ErrorEvent(message=prompts.window_learned(e.window.tokens, e.window.source), error_kind="context",
                            fatal=False, attempts=e.attempts))
            again = {**state, **spent, "limits": learned.__dict__.copy()}
            update, c = complete_call(again, runtime, prompt, emit, messages, send)
            return {**spent, "limits": learned.__dict__.copy(), **update}, c
        if e.kind == "context":  # the server's count of the request's tokens is past the window
            return {**spent, **end_run("context_exceeded", "context", str(e), emit, e.attempts)}, None
        return {**spent, **fail_run(e.kind, str(e), emit, e.attempts)}, None
    if state["prompts"] == paper_prompts.PAPER:  # the reply as the original received it, not the client's cut
        c = replace(c, text=paper_prompts.received(c.text if c.raw is None else c.raw, stop))
    update, emit.usage = _account(state, c, emit.step, getattr(runtime.context, "price", None))
    update["shortened"] = shortened
    measured = None if c.estimated else guards.measured_chars_per_token(prompt, fitted, c.prompt_tokens)
    if measured:
        update.update(chars_per_token=measured, counted_by=guards.USAGE)
    counted = state["counted"] or [None, None]
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
            "failed_tokens": state["failed_tokens"] + prompt + reply, "tokens_estimated": True}


def chat_turns(state: dict) -> tuple:
    """How a request is sent by default, and its stop sequences: the transcript as chat turns, stopped at
    ``Observation:`` in the improved setting (in the paper setting with no stop sequence: REAPER's paper gives
    none; the loop's paper nodes and their parts send their own way, ``paper_loop.SEND``)."""
    return _chat, None if state["prompts"] == paper_prompts.PAPER else prompts.STOP


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


def answer_request(state: dict) -> list[dict]:
    """The messages asking for the final answer: the question and the data the transcript collected, then the
    answer-only exchange so far."""
    start = state["answer_from"] or len(state["messages"])
    return guards.fit_answer(state["answer_prompt"], state["messages"][0]["content"],
                             guards.collected_data(state["messages"][:start]), state["messages"][start:],
                             Limits.from_dict(state["limits"]), state["chars_per_token"])


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
                                 state["chars_per_token"], limits.reply_tokens, guards.margin_of(state))
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
    cpt = guards.tokenized_chars_per_token(state["prompt"], state["messages"], counted, state["template_tokens"])
    return {"chars_per_token": cpt, "counted_by": getattr(llm, "counted_by", None),
            "counted": [counted, len(state["messages"])]} if cpt else {}


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


def queue_action(state: dict, text: str, kind: str, query: str) -> dict:
    """The update that runs the agent's action next: after the analyst's review in review mode "approve every
    query" (a database query, not a self-thinking step), else at once."""
    reviewed = state["review_queries"] and kind != "self"
    return {"reply": text, "action": {"tool": kind, "query": query},
            "next": "review_query" if reviewed else "run_action"}


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


def route(state: dict) -> str:
    return state["next"]


def timed(node):
    """The node, given its state ``completed`` (the fields an older checkpoint lacks filled in), adding the seconds it
    runs to the state's ``wall_s`` (not the time a pause waits); a stopped run ends before it (RunStopped)."""
    def run(state, runtime):
        if getattr(runtime.context, "control", None) is not None:
            runtime.context.control.check()
        start, state = time.perf_counter(), completed(state)
        update = node(state, runtime)
        return {**update, "wall_s": state["wall_s"] + time.perf_counter() - start}
    return run

