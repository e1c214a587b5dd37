"""The shared loop's nodes in the ``paper`` prompt setting (core.agents.paper_prompts): what the PlanRAG authors'
code did, with nothing it did not send: no correction, no second request for an answer, no note on a repeat."""
from __future__ import annotations

from langgraph.runtime import Runtime

from core.agents import guards, paper_prompts
from core.agents.nodes import (AgentContext, Emitter, announce_plan, complete_call, context_full, fail_run, finish,
                               observe, queue_action, run_query)
from core.agents.parsing import Reply, parse_reply
from core.agents.state import LoopPart
from core.model.events import ActionEvent, ObservationEvent, ReplanEvent, ThoughtEvent
from core.model.run_settings import Limits


def call_llm(state: dict, runtime: Runtime[AgentContext], parts: tuple[LoopPart, ...] = ()) -> dict:
    """One LLM call in the paper setting, and what its reply leads to, as the original: the run ends unanswered at
    its executor's iteration limit, or at a workbench safety limit, named as such. A part (``parts``) that leads the
    run takes its step instead; once the technique's actions are done, the first part with an ``answer`` makes its
    call, else the run ends unanswered."""
    limits = Limits.from_dict(state["limits"])
    emit = Emitter(runtime, state["llm_calls"] + 1)
    leading = next((part for part in parts if part.leads(state)), None)
    reached = _paper_limit(state, limits, leading)
    if reached:
        limit, message = reached
        return {"limit": limit, **fail_run("limit", message, emit)}
    if state["answer_only"]:
        answering = next((part for part in parts if part.answer is not None), None)
        if answering is None:  # also a run checkpointed at a limit before this setting stopped
            return {"limit": state["limit"], **fail_run("limit", "the run reached its limits; " + NO_ANSWER, emit)}
        return answering.answer(state, runtime)
    if leading is not None:
        return leading.step(state, runtime, limits)
    update, c = complete_call(state, runtime, state["prompt"], emit, send=SEND)
    if c is None:
        return update
    return {**update, **_settle_paper({**state, **update}, parse_reply(c.text), emit)}


#: How the loop's call is sent in the paper setting, and its stop sequences: the original agent's two messages.
SEND = (paper_prompts.chat, paper_prompts.STOP)
NO_ANSWER = "the run ends without an answer (paper prompt setting: no final answer is asked for)"


def _paper_limit(state: dict, limits: Limits, leading: LoopPart | None) -> tuple[str, str] | None:
    """Before a paper-setting call: the limit that ends the run, and the message saying whose limit it is (an
    iteration is a call, or the step of the part ``leading`` the run)."""
    done = leading.done(state) if leading is not None else state["llm_calls"]
    if not state["answer_only"] and done >= paper_prompts.MAX_ITERATIONS:
        return "iterations", (f"{paper_prompts.STOPPED} (the original agent executor's limit of "
                              f"{paper_prompts.MAX_ITERATIONS} iterations); {NO_ANSWER}")
    return safety_limit(state, limits)


def safety_limit(state: dict, limits: Limits) -> tuple[str, str] | None:
    """A workbench safety limit reached (the call cap, tokens, cost, the context window), named as not the
    paper's."""
    reached = guards.limit_reached(state, limits, keep_answer_call=False) or context_full(state, limits)
    if reached:
        return reached[0], f"{reached[1]}: a workbench safety limit, not the paper's; {NO_ANSWER}"
    return None


def _settle_paper(state: dict, reply: Reply, emit: Emitter) -> dict:
    """The ``paper`` setting: a plan the reply writes is taken (or sent for review) as in the improved setting, but
    a reply without one is not corrected; then the reply is acted on as the original implementation did."""
    tech, plan = emit.technique, state["plan"]
    new = (tech.plans and reply.plan and reply.plan != plan
           and (not plan or (tech.replans and reply.replan is not False)))
    if not new:
        if plan and tech.replans and reply.replan is not None:  # the trace counts re-plans as in the improved setting
            emit(ReplanEvent(replan=False, old_plan=plan, new_plan=plan))
        return act(state, reply, emit)
    proposal = {"kind": "replan" if plan else "plan", "plan": reply.plan, "old_plan": plan}
    if announce_plan(state["hitl"], proposal["kind"], plan, proposal["plan"], emit):
        return {"reply": reply.text, "proposal": proposal, "next": "review_plan"}
    return {"plan": proposal["plan"], **act({**state, "plan": proposal["plan"]}, reply, emit)}


def act(state: dict, reply: Reply, emit: Emitter, acted: str | None = None) -> dict:
    """Act on a reply as the original parser and executor did (paper_prompts.read_reply): an Action naming a
    tool of the run runs (else the executor's "not a valid tool" observation); else a Final answer ends the run; a
    reply with both or neither fails the run, uncorrected. ``acted``: the part read for the action (AutoPlan's
    formalized action)."""
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
        return finish(state, reply, first, emit)
    language, text = state["language"], reply.text if acted is not None else paper_prompts.logged(reply.text)
    tool = paper_prompts.tool_of(first, language)
    if tool is None:
        event = ObservationEvent(text=paper_prompts.invalid_tool(first, language), error="invalid tool",
                                 error_kind="format")
        return observe(state, text, event, emit)
    query = paper_prompts.fence_free(query, language) if tool != "self" else query
    emit(ActionEvent(tool=first, query=query, language=tool))
    return queue_action(state, text, tool, query)


def observe_action(state: dict, runtime: Runtime[AgentContext], limits: Limits) -> ObservationEvent:
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

