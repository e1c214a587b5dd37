"""REAPER (Joshi et al., CIKM 2024) as a LangGraph graph: one LLM call writes the whole retrieval plan
(reaper_plan.py), the plan runs with no LLM call, and one call answers from everything it observed; when steps
failed, one re-plan call (``RunSettings.replan_on_failure``, at most once) writes the steps to run instead.

    write_plan --> review_plan (pauses for the analyst) --> run_step ... --> answer --> END
                                                                     \\--> write_plan (re-plan, once)

The events are those of the other techniques: ``plan`` (the written plan), ``action`` and ``observation`` for
each step, ``replan`` (the steps written after failures), ``final`` and ``error``; a step that cannot run is an
observation with an error (``format``, ``reference`` or ``skipped``). An action is emitted by the node before
the one that runs its query, so it streams before the query runs. The analyst reviews plans as in the loop
(``approve-every-plan``: the plan and the re-plan; ``approve-replans``: the re-plan); an edited plan must parse
into query steps (``check_review``).
"""
from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from core.agents import prompts
from core.agents import reaper_prompts as texts
from core.agents.config import Limits, Review
from core.agents.events import ActionEvent, ErrorEvent, ObservationEvent, PlanEvent
from core.agents.graph import (AgentContext, _announce, _answer, _await_review, _complete, _Emitter, _fail,
                               _limit_reached, _next, _observe, run_query, timed)
from core.agents.parsing import parse_reply
from core.agents.reaper_plan import Step, UnusableResult, parse_plan, parse_steps, substitute
from core.backends.base import BackendUnavailable


class ReaperState(TypedDict):
    hitl: str
    limits: dict
    language: str  # of the database: sql | cypher
    replan_on_failure: bool
    replanned: bool  # the one re-plan was asked for
    prompt: str  # the planner's system prompt
    answer_prompt: str  # the system prompt asking for the final answer
    messages: list[dict]  # {"role": "human" | "ai", "content": ...}, after the system prompt
    steps: list[dict]  # every adopted step (Step fields), in order
    plan: list[str]  # the same steps rendered
    cursor: int  # index in steps of the next step to settle
    results: dict  # "EN" -> {"columns", "rows", "total_rows"}, or {"error": ...}
    evidence: list[str]  # what the steps observed since the last reply
    failed: list[str]  # the steps that gave no result since the last reply
    reply: str  # a plan waiting for review
    proposal: dict | None  # {"kind": plan | replan, "plan": [...], "old_plan": [...]}
    action: dict | None  # the query the next step runs, its references substituted
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    actions: int
    final_answer: str | None
    status: str  # running | finished | failed
    error: str | None
    next: str
    wall_s: float


def initial_state(hitl: str, limits: Limits, language: str, schema: str, question_text: str,
                  note: str | None = None, replan_on_failure: bool = True) -> ReaperState:
    return ReaperState(hitl=hitl, limits=limits.__dict__.copy(), language=language,
                       replan_on_failure=replan_on_failure, replanned=False,
                       prompt=texts.planner_prompt(language, schema, note),
                       answer_prompt=prompts.answer_prompt(language, schema, note),
                       messages=[{"role": "human", "content": prompts.question_message(question_text)}],
                       steps=[], plan=[], cursor=0, results={}, evidence=[], failed=[], reply="", proposal=None,
                       action=None, llm_calls=0, prompt_tokens=0, completion_tokens=0, tokens_estimated=False,
                       actions=0, final_answer=None, status="running", error=None, next="write_plan", wall_s=0.0)


def _labels(steps: list[dict]) -> set[int]:
    return {s["label"] for s in steps if s["label"] is not None}


def check_review(review: Review, values: dict) -> None:
    """ValueError when an edited plan has a step that cannot run (``values``: the paused run's state)."""
    if review.action != "edit":
        return
    steps = parse_steps(review.to_dict()["plan"], values["language"], _labels(values["steps"]))
    problems = [f"step {i}: {s.problem}" for i, s in enumerate(steps, 1) if s.problem]
    if problems:
        raise ValueError("the edited plan cannot run: " + "; ".join(problems))


def _observed(state: dict, evidence: list[str], failed: list[str]) -> dict:
    """After the last step: send what the steps observed; re-plan once if some failed, else answer."""
    text = texts.observations(evidence)
    replan = bool(failed) and state["replan_on_failure"] and not state["replanned"]
    if replan:
        next_label = max(_labels(state["steps"]), default=0) + 1
        text += "\n\n" + texts.replan_request(failed, len(state["steps"]) + 1, next_label)
    return {"messages": state["messages"] + [{"role": "human", "content": text}], "evidence": [], "failed": [],
            "replanned": state["replanned"] or replan, "action": None, "next": "write_plan" if replan else "answer"}


def _settle(state: dict, emit: _Emitter) -> dict:
    """Go through the steps from the cursor: observe each that cannot run, and stop at the first that can,
    announcing its action; after the last step, go on with what they observed."""
    language, steps = state["language"], state["steps"]
    results, evidence, failed = dict(state["results"]), list(state["evidence"]), list(state["failed"])
    for i in range(state["cursor"], len(steps)):
        step = Step(**steps[i])
        failed_refs = [r for r in step.refs if "error" in results.get(f"E{r}", {})]
        if step.problem:
            kind, problem, text = "format", step.problem, texts.unreadable(step.problem)
        elif failed_refs:
            kind, problem, text = "skipped", "uses the result of a failed step", texts.skipped(failed_refs)
        else:
            try:
                query = substitute(step.query, results, language)
            except UnusableResult as e:
                kind, problem, text = "reference", str(e), texts.unusable(str(e))
            else:
                emit(ActionEvent(tool=step.tool, query=query, language=language))
                return {"cursor": i, "action": {"query": query}, "results": results, "evidence": evidence,
                        "failed": failed, "next": "run_step"}
        event = ObservationEvent(text=texts.evidence(step, i + 1, text), error=problem, error_kind=kind)
        emit(event)
        if step.label is not None:  # a label assigned twice keeps its first result
            results.setdefault(f"E{step.label}", {"error": problem})
        evidence.append(event.text)
        failed.append(step.name(i + 1))
    return {"cursor": len(steps), "results": results, **_observed(state, evidence, failed)}


def _adopt(state: dict, reply_text: str, steps: list[Step], emit: _Emitter, feedback: str | None = None) -> dict:
    """Take the reply's steps into the plan and settle them."""
    new = {"steps": state["steps"] + [s.to_dict() for s in steps], "plan": state["plan"] + [s.render() for s in steps],
           "messages": state["messages"] + [{"role": "ai", "content": reply_text}], "reply": "", "proposal": None,
           "evidence": [feedback] if feedback else [], "failed": []}
    if not steps:
        event = ObservationEvent(text=texts.no_steps(state["language"]), error="the plan has no steps",
                                 error_kind="format")
        emit(event)
        new["evidence"].append(event.text)
        new["failed"] = ["your plan"]
    return {**new, **_settle({**state, **new}, emit)}


def write_plan(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call writing the retrieval plan, or (after failed steps, or a rejected plan) the steps to run
    instead; then adopt them or send them for review."""
    limits, step = Limits(**state["limits"]), state["llm_calls"] + 1
    emit = _Emitter(runtime, step)
    reason = _limit_reached(state, limits)
    if reason:
        emit(ErrorEvent(message=prompts.limit_reached(reason), error_kind="limit", fatal=False))
        return {"next": "answer"}
    update, c = _complete(state, runtime, state["prompt"], emit)
    if c is None:
        return update
    state = {**state, **update}
    steps = parse_plan(c.text, state["language"], _labels(state["steps"]))
    kind, new_plan = ("replan" if state["steps"] else "plan"), [s.render() for s in steps]
    # a plan with no steps is never reviewed: it is adopted, and observed as having none
    if _announce(state["hitl"] if steps else "auto", kind, state["plan"], new_plan, emit):
        return {**update, "reply": c.text, "proposal": {"kind": kind, "plan": new_plan, "old_plan": state["plan"]},
                "next": "review_plan"}
    return {**update, **_adopt(state, c.text, steps, emit)}


def review_plan(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """Pause until the analyst approves, edits or rejects the proposed steps; then run them, or ask again."""
    review, verdict, emit = _await_review(state, runtime)
    known, proposed = _labels(state["steps"]), state["proposal"]["plan"]
    if verdict == "approved":
        emit(PlanEvent(steps=proposed, origin="analyst", status="approved", note=review.note))
        return _adopt(state, state["reply"], parse_plan(state["reply"], state["language"], known), emit)
    if verdict == "edited":
        steps = parse_steps(list(review.plan), state["language"], known)
        edited = [s.render() for s in steps]
        emit(PlanEvent(steps=edited, origin="analyst", status="edited", proposed_steps=proposed, note=review.note))
        return _adopt(state, state["reply"], steps, emit, texts.plan_edited(edited, review.note))
    emit(PlanEvent(steps=proposed, origin="analyst", status="rejected", note=review.note))
    feedback = ObservationEvent(text=prompts.plan_rejected(review.note))
    return {**_observe(state, state["reply"], feedback, emit), "proposal": None, "next": "write_plan"}


def run_step(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """Run the next step's query and observe its result; then settle the steps after it."""
    emit = _Emitter(runtime, state["llm_calls"])
    i = state["cursor"]
    step = Step(**state["steps"][i])
    try:
        event = run_query(runtime.context.backend, state["action"]["query"], Limits(**state["limits"]))
    except BackendUnavailable as e:
        return _fail(e.kind, str(e), emit)
    event.text = texts.evidence(step, i + 1, event.text)
    emit(event)
    result = ({"error": event.error} if event.error else
              {"columns": event.columns, "rows": event.rows, "total_rows": event.total_rows})
    state = {**state, "results": {**state["results"], f"E{step.label}": result}, "cursor": i + 1,
             "evidence": state["evidence"] + [event.text],
             "failed": state["failed"] + ([step.name(i + 1)] if event.error else []), "actions": state["actions"] + 1}
    return {"actions": state["actions"], **_settle(state, emit)}


def answer(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call for the final answer from everything the steps observed (Figure 9's prompt)."""
    emit = _Emitter(runtime, state["llm_calls"] + 1)
    update, c = _complete(state, runtime, state["answer_prompt"], emit)
    if c is None:
        return update
    return {**update, **_answer({**state, **update}, parse_reply(c.text), emit)}


def build_graph() -> StateGraph:
    """The uncompiled graph; compile it with a checkpointer."""
    graph = StateGraph(ReaperState, context_schema=AgentContext)
    nodes = {"write_plan": write_plan, "review_plan": review_plan, "run_step": run_step, "answer": answer}
    for name, node in nodes.items():
        graph.add_node(name, timed(node))
    graph.add_edge(START, "write_plan")
    for name in nodes:
        graph.add_conditional_edges(name, _next, [*nodes, END])
    return graph
