"""The agent loop as a LangGraph state machine, one loop for the paper's four techniques and AutoPlan:

    call_llm --> review_plan (pauses for the analyst) --> run_action --> call_llm ... --> END

``call_llm`` asks the model for one reply and settles it: a plan to adopt or to send for review, a final
answer, an action for ``run_action``, or a corrective observation. ``review_plan`` holds the only
``interrupt()`` (in ``_await_review``); LangGraph re-runs it from its top on resume, and it does nothing before
the interrupt, while the LLM call that proposed the plan sits in the node before. The state is plain JSON so the SQLite
checkpointer can keep it; the model and the database come from the run's context.

Every user message of the transcript after the question is an ``observation`` event.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypedDict

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from core.agents import prompts
from core.agents.config import Limits, Review
from core.agents.events import (ActionEvent, ErrorEvent, Event, FinalEvent, LLMUsage, ObservationEvent, PlanEvent,
                                ReplanEvent, ThoughtEvent)
from core.agents.parsing import Reply, parse_reply, query_language, tool_kind
from core.agents.techniques import Technique, technique
from core.backends.base import Backend, BackendUnavailable, QueryError
from core.llm import ChatLLM, Completion, LLMError


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
    actions: int
    answer_only: bool  # the next call asks for the final answer (SingleRAG after its query; any limit reached)
    final_answer: str | None
    status: str  # running | finished | failed
    error: str | None
    next: str  # the node to run next, or END
    wall_s: float  # seconds the nodes ran (the run's wall time, without its pauses)


@dataclass
class AgentContext:
    """What a run works with, outside the checkpointed state."""

    llm: ChatLLM
    backend: Backend


def initial_state(tech: Technique, hitl: str, limits: Limits, language: str, schema: str, question_text: str,
                  note: str | None = None, initial_plan: list[str] | None = None) -> AgentState:
    """The state a run starts in; ``initial_plan``: the plan its system prompt gives it to start from."""
    return AgentState(technique=tech.name, hitl=hitl, limits=limits.__dict__.copy(), language=language,
                      prompt=prompts.agent_prompt(tech, language, schema, note, initial_plan),
                      answer_prompt=prompts.answer_prompt(language, schema, note),
                      messages=[{"role": "human", "content": prompts.question_message(question_text)}],
                      plan=[], reply="", proposal=None, action=None, llm_calls=0, prompt_tokens=0,
                      completion_tokens=0, tokens_estimated=False, actions=0, answer_only=False, final_answer=None,
                      status="running", error=None, next="call_llm", wall_s=0.0)


class _Emitter:
    """Writes events to the run's stream as they happen; the first one after an LLM call carries its usage."""

    def __init__(self, runtime: Runtime, step: int):
        self._write = runtime.stream_writer
        self.step = step
        self.usage: LLMUsage | None = None

    def __call__(self, event: Event) -> None:
        event.step = self.step
        if self.usage:
            event.llm, self.usage = self.usage, None
        self._write(event)


def _chat(prompt: str, messages: list[dict]) -> list:
    return [SystemMessage(prompt)] + [AIMessage(m["content"]) if m["role"] == "ai" else HumanMessage(m["content"])
                                      for m in messages]


def _observe(state: dict, reply_text: str, event: ObservationEvent, emit: _Emitter) -> dict:
    """Emit an observation and add the reply and the observation to the transcript; the LLM goes next."""
    emit(event)
    messages = state["messages"] + [{"role": "ai", "content": reply_text},
                                    {"role": "human", "content": prompts.observation_message(event.text)}]
    return {"messages": messages, "reply": "", "next": "call_llm"}


def _correct(state: dict, reply: Reply, problem: str, emit: _Emitter) -> dict:
    text = prompts.correction(problem, technique(state["technique"]), state["language"])
    return _observe(state, reply.text, ObservationEvent(text=text, error=problem, error_kind="format"), emit)


def _finish(state: dict, reply: Reply, answer: str, emit: _Emitter) -> dict:
    emit(FinalEvent(answer=answer))
    return {"messages": state["messages"] + [{"role": "ai", "content": reply.text}], "final_answer": answer,
            "status": "finished", "reply": "", "next": END}


def _fail(kind: str, message: str, emit: _Emitter) -> dict:
    emit(ErrorEvent(message=message, error_kind=kind))
    return {"status": "failed", "error": message, "next": END}


def _answer(state: dict, reply: Reply, emit: _Emitter) -> dict:
    """Settle the reply to a request for the final answer: its Final answer, else the reply itself unless it
    is an action."""
    answer = reply.final_answer or (None if reply.action else reply.text.strip())
    if not answer:
        return _fail("no_answer", "the agent gave no final answer when asked for it", emit)
    if reply.final_answer and reply.thought:
        emit(ThoughtEvent(text=reply.thought))
    return _finish(state, reply, answer, emit)


def _account(state: dict, c: Completion, step: int) -> tuple[dict, LLMUsage]:
    """The state update counting LLM call ``step`` and its usage record."""
    update = {"llm_calls": step, "prompt_tokens": state["prompt_tokens"] + c.prompt_tokens,
              "completion_tokens": state["completion_tokens"] + c.completion_tokens,
              "tokens_estimated": state["tokens_estimated"] or c.estimated}
    return update, LLMUsage(call=step, prompt_tokens=c.prompt_tokens, completion_tokens=c.completion_tokens,
                            latency_s=round(c.latency_s, 4), estimated=c.estimated, reply=c.text)


def _complete(state: dict, runtime: Runtime[AgentContext], prompt: str,
              emit: _Emitter) -> tuple[dict, Completion | None]:
    """LLM call ``emit.step`` on the transcript under ``prompt``: the state update counting it (its usage goes
    with the next event emitted) and the completion; on LLMError, the failure update and None."""
    try:
        c = runtime.context.llm.complete(_chat(prompt, state["messages"]), prompts.STOP)
    except LLMError as e:
        return _fail(e.kind, str(e), emit), None
    update, emit.usage = _account(state, c, emit.step)
    return update, c


def _announce(hitl: str, kind: str, old_plan: list[str], new_plan: list[str], emit: _Emitter) -> bool:
    """Emit the plan (``kind`` plan) or re-plan (``replan``) the agent wrote, and whether the analyst reviews it
    first (``hitl``)."""
    review = hitl == "approve-every-plan" or (hitl == "approve-replans" and kind == "replan")
    status = "proposed" if review else "adopted"
    if kind == "plan":
        emit(PlanEvent(steps=new_plan, status=status))
    else:
        emit(ReplanEvent(replan=True, old_plan=old_plan, new_plan=new_plan, status=status))
    return review


def _limit_reached(state: AgentState, limits: Limits) -> str | None:
    if state["llm_calls"] + 1 >= limits.max_llm_calls:
        return f"step limit reached ({limits.max_llm_calls} LLM calls)"
    used = state["prompt_tokens"] + state["completion_tokens"]
    if used >= limits.max_tokens:
        return f"token limit reached ({used} tokens used, limit {limits.max_tokens})"
    return None


def _proceed(state: dict, reply: Reply, emit: _Emitter) -> dict:
    """Act on a reply once its plan, if any, is settled: final answer, action, or a corrective observation."""
    if reply.thought or reply.current_step:
        emit(ThoughtEvent(text=reply.thought or "", current_step=reply.current_step))
    if reply.problems:
        return _correct(state, reply, reply.problems[0], emit)
    if reply.final_answer is not None:
        return _finish(state, reply, reply.final_answer, emit)
    if not reply.action:
        if reply.plan:
            return _observe(state, reply.text, ObservationEvent(text=prompts.go_on_with_plan()), emit)
        return _correct(state, reply, "your reply has no Action", emit)
    language, kind = state["language"], tool_kind(reply.action)
    if kind is None:
        return _correct(state, reply, prompts.unknown_tool(reply.action, language), emit)
    if kind != "self" and kind != language:
        return _correct(state, reply, prompts.wrong_database(reply.action, language), emit)
    found = query_language(reply.action_input) if kind != "self" else None
    if found and found != language:
        return _correct(state, reply, prompts.wrong_language(found, language), emit)
    emit(ActionEvent(tool=reply.action, query=reply.action_input, language=kind))
    return {"reply": reply.text, "action": {"tool": kind, "query": reply.action_input}, "next": "run_action"}


def _settle_plan(state: dict, reply: Reply, emit: _Emitter) -> dict:
    """For the planning techniques: take the reply's (new) plan, or send it for review; then proceed."""
    tech, plan = technique(state["technique"]), state["plan"]
    if not plan:
        if not reply.plan:
            return _correct(state, reply, "your reply has no Plan; begin with the Plan", emit)
        proposal = {"kind": "plan", "plan": reply.plan, "old_plan": []}
    elif tech.replans and reply.replan is not False and reply.plan and reply.plan != plan:
        proposal = {"kind": "replan", "plan": reply.plan, "old_plan": plan}
    else:
        if tech.replans and reply.replan is not None:
            note = "Re-plan: Y without a new Plan; the Plan is kept" if reply.replan else ""
            emit(ReplanEvent(replan=False, old_plan=plan, new_plan=plan, note=note))
        return _proceed(state, reply, emit)
    if _announce(state["hitl"], proposal["kind"], plan, proposal["plan"], emit):
        return {"reply": reply.text, "proposal": proposal, "next": "review_plan"}
    return {"plan": proposal["plan"], **_proceed({**state, "plan": proposal["plan"]}, reply, emit)}


def call_llm(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call, and what its reply leads to."""
    limits = Limits(**state["limits"])
    step = state["llm_calls"] + 1
    emit = _Emitter(runtime, step)
    update: dict = {}
    if not state["answer_only"]:
        reason = _limit_reached(state, limits)
        if reason:
            emit(ErrorEvent(message=prompts.limit_reached(reason), error_kind="limit", fatal=False))
            update["answer_only"] = True
    answer_only = state["answer_only"] or update.get("answer_only", False)
    prompt = state["answer_prompt"] if answer_only else state["prompt"]
    counted, c = _complete(state, runtime, prompt, emit)
    update.update(counted)
    if c is None:
        return update
    reply = parse_reply(c.text)
    state = {**state, **update}
    if answer_only:
        return {**update, **_answer(state, reply, emit)}
    if technique(state["technique"]).plans:
        return {**update, **_settle_plan(state, reply, emit)}
    return {**update, **_proceed(state, reply, emit)}


def _await_review(state: dict, runtime: Runtime[AgentContext]) -> tuple[Review, str, _Emitter]:
    """Pause for the analyst's review of the proposed plan (nothing may come before this in a node: LangGraph
    re-runs the node from its top on resume). Returns the review, its verdict (``approved``, also for an edit
    that changes nothing; ``edited`` or ``rejected``) and the emitter of what follows."""
    review = Review.from_dict(interrupt({**state["proposal"], "reply": state["reply"]}))
    if review.action == "approve" or (review.action == "edit" and list(review.plan) == state["proposal"]["plan"]):
        verdict = "approved"
    else:
        verdict = "edited" if review.action == "edit" else "rejected"
    return review, verdict, _Emitter(runtime, state["llm_calls"])


def review_plan(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Pause until the analyst approves, edits or rejects the proposed plan; then go on accordingly."""
    review, verdict, emit = _await_review(state, runtime)
    reply, proposed = parse_reply(state["reply"]), state["proposal"]["plan"]
    if verdict == "approved":
        emit(PlanEvent(steps=proposed, origin="analyst", status="approved", note=review.note))
        return {"plan": proposed, "proposal": None, **_proceed({**state, "plan": proposed}, reply, emit)}
    if verdict == "edited":
        steps = list(review.plan)
        emit(PlanEvent(steps=steps, origin="analyst", status="edited", proposed_steps=proposed,
                       note=review.note))
        feedback = ObservationEvent(text=prompts.plan_edited(steps, review.note))
        return {"plan": steps, "proposal": None, **_observe(state, reply.through_plan(), feedback, emit)}
    emit(PlanEvent(steps=proposed, origin="analyst", status="rejected", note=review.note))
    feedback = ObservationEvent(text=prompts.plan_rejected(review.note))
    return {"proposal": None, **_observe(state, reply.through_plan(), feedback, emit)}


def run_query(backend: Backend, query: str, limits: Limits) -> ObservationEvent:
    """Run one query and observe its rows or its error. Raises BackendUnavailable."""
    start = time.perf_counter()
    try:
        r = backend.query(query, timeout_s=limits.query_timeout_s, row_cap=limits.row_cap)
    except BackendUnavailable:
        raise
    except QueryError as e:
        event = ObservationEvent(text=prompts.query_error(e.kind, str(e)), error=str(e), error_kind=e.kind)
    else:
        event = ObservationEvent(text=r.to_text(limits.observation_rows, limits.observation_chars),
                                 columns=list(r.columns), rows=[list(row) for row in r.rows],
                                 total_rows=r.total_rows, executed=r.executed)
    event.latency_s = round(time.perf_counter() - start, 4)
    return event


def run_action(state: AgentState, runtime: Runtime[AgentContext]) -> dict:
    """Run the action's query (or echo a Self-thinking input) and observe the result or the error."""
    limits, action = Limits(**state["limits"]), state["action"]
    emit = _Emitter(runtime, state["llm_calls"])
    if action["tool"] == "self":
        event = ObservationEvent(text=action["query"])
    else:
        try:
            event = run_query(runtime.context.backend, action["query"], limits)
        except BackendUnavailable as e:
            return _fail(e.kind, str(e), emit)
    actions = state["actions"] + 1
    max_actions = technique(state["technique"]).max_actions
    answer_only = state["answer_only"] or bool(max_actions and actions >= max_actions)
    return {"actions": actions, "action": None, "answer_only": answer_only,
            **_observe(state, state["reply"], event, emit)}


def _next(state: AgentState) -> str:
    return state["next"]


def timed(node):
    """The node, adding the seconds it runs to the state's ``wall_s`` (not the time a pause waits)."""
    def run(state, runtime):
        start = time.perf_counter()
        update = node(state, runtime)
        return {**update, "wall_s": state.get("wall_s", 0.0) + time.perf_counter() - start}
    return run


def build_graph() -> StateGraph:
    """The uncompiled graph; compile it with a checkpointer."""
    graph = StateGraph(AgentState, context_schema=AgentContext)
    graph.add_node("call_llm", timed(call_llm))
    graph.add_node("review_plan", timed(review_plan))
    graph.add_node("run_action", timed(run_action))
    graph.add_edge(START, "call_llm")
    for node in ("call_llm", "review_plan", "run_action"):
        graph.add_conditional_edges(node, _next, ["call_llm", "review_plan", "run_action", END])
    return graph
