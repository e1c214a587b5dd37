"""REAPER (Joshi et al., CIKM 2024) as a LangGraph graph: one LLM call writes the whole retrieval plan
(plan.py), the plan runs with no LLM call, and one call answers from everything it observed; when steps
failed, one re-plan call (``RunSettings.replan_on_failure``, at most once) writes the steps to run instead.

    write_plan --> review_plan (pauses for the analyst) --> run_step ... --> answer --> END
                                                                     \\--> write_plan (re-plan, once)

With "approve every query", ``review_step`` pauses before each step's query runs.

The events are those of the other techniques: ``plan`` (the written plan), ``action`` and ``observation`` for
each step, ``replan`` (the steps written after failures), ``final`` and ``error``; a step that cannot run is an
observation with an error (``format``, ``reference`` or ``skipped``). An action is emitted by the node before
the one that runs its query, so it streams before the query runs. The analyst reviews plans as in the loop
(``approve-every-plan``: the plan and the re-plan; ``approve-replans``: the re-plan); an edited plan must parse
into query steps (``check_review``).
"""
from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from core.agents import guards, paper_prompts, prompts
from core.techniques.reaper import prompts as texts
from core.model.run_settings import Limits, Review
from core.model.events import ActionEvent, ErrorEvent, ObservationEvent, PlanEvent, QueryReviewEvent
from core.agents.nodes import (AgentContext, Emitter, announce_plan, await_review, calibrate, complete_call,
                               context_full, fail_run, observe, route, run_query, settle_answer, timed, to_answer)
from core.agents.state import Guarded, Planning, RunCore, Usage, guard_state
from core.agents.parsing import parse_reply
from core.techniques.reaper.plan import Step, UnusableResult, parse_plan, parse_steps, substitute
from core.backends.base import BackendUnavailable


class ReaperState(RunCore, Usage, Guarded, Planning):
    """REAPER's state: what every agent graph keeps (core.agents.state; ``plan``: its adopted steps rendered,
    ``stuck`` unused here) and its own."""

    replan_on_failure: bool
    replanned: bool  # the one re-plan was asked for
    steps: list[dict]  # every adopted step (Step fields), in order
    cursor: int  # index in steps of the next step to settle
    results: dict  # "EN" -> {"columns", "rows", "total_rows"}, or {"error": ...}
    evidence: list[str]  # what the steps observed since the last reply
    failed: list[str]  # the steps that gave no result since the last reply
    collected: list[str]  # what every step observed, for the final answer
    question: str  # the question as the answer call gives it (absent: the first message)


def initial_state(hitl: str, limits: Limits, language: str, schema: str, question_text: str,
                  note: str | None = None, replan_on_failure: bool = True, review_queries: bool = False, *,
                  examples: str = "", setting: str = paper_prompts.IMPROVED,
                  paper_examples: list[tuple[str, str]] = ()) -> ReaperState:
    """The state a run starts in; ``examples``: example plans for the planner prompt (examples.py; "" for
    the zero-shot planner). The ``paper`` ``setting``: the planner prompt in the paper's structure with
    ``paper_examples`` as its in-context examples, the question as its ``# Input:``, no dialect note, one planning
    call (no re-plan) and one answer call (not asked again)."""
    paper = paper_prompts.check(setting) == paper_prompts.PAPER
    question = prompts.question_message(question_text)
    return ReaperState(hitl=hitl, limits=limits.__dict__.copy(), language=language,
                       replan_on_failure=replan_on_failure and not paper, replanned=False, prompts=setting,
                       prompt=(texts.paper_planner_prompt(language, schema, list(paper_examples)) if paper else
                               texts.planner_prompt(language, schema, note, examples)),
                       answer_prompt=(paper_prompts.ANSWER_PROMPT if paper else
                                      prompts.answer_prompt(language, schema, note)),
                       question=question,
                       messages=[{"role": "human",
                                  "content": texts.paper_input(question_text) if paper else question}],
                       steps=[], plan=[], cursor=0, results={}, evidence=[], failed=[], reply="", proposal=None,
                       action=None, llm_calls=0, prompt_tokens=0, completion_tokens=0, tokens_estimated=False,
                       actions=0, final_answer=None, status="running", error=None, next="write_plan", wall_s=0.0,
                       collected=[], review_queries=review_queries, **guard_state())


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
            "collected": state.get("collected", []) + evidence,
            "replanned": state["replanned"] or replan, "action": None, "next": "write_plan" if replan else "answer"}


def _settle(state: dict, emit: Emitter) -> dict:
    """Go through the steps from the cursor: observe each that cannot run, and stop at the first that can,
    announcing its action; after the last step, go on with what they observed."""
    language, steps, repeats = state["language"], state["steps"], state["repeats"]
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
                earlier = _earlier(state, query)
                if earlier is None:
                    emit(ActionEvent(tool=step.tool, query=query, language=language))
                    return {"cursor": i, "action": {"query": query}, "results": results, "evidence": evidence,
                            "failed": failed, "repeats": repeats,
                            "next": "review_step" if state["review_queries"] else "run_step"}
                repeats += 1
                kind, text = "repeat", texts.repeated(earlier["step"], earlier["text"])
                problem = f"the same query as {earlier['step']}"
                if step.label is not None:  # the earlier result stands for this step
                    results.setdefault(f"E{step.label}", earlier["result"])
        event = ObservationEvent(text=texts.evidence(step, i + 1, text), error=problem, error_kind=kind)
        emit(event)
        if kind == "repeat":
            evidence.append(event.text)
            failed.extend([step.name(i + 1)] if "error" in earlier["result"] else [])
            continue
        if step.label is not None:  # a label assigned twice keeps its first result
            results.setdefault(f"E{step.label}", {"error": problem})
        evidence.append(event.text)
        failed.append(step.name(i + 1))
    return {"cursor": len(steps), "results": results, "repeats": repeats, **_observed(state, evidence, failed)}


def _earlier(state: dict, query: str) -> dict | None:
    """The loop guard (not in the paper setting): the earlier step that ran the same query (whitespace and case
    aside), with what it gave, or None."""
    if state["prompts"] == paper_prompts.PAPER:
        return None
    return state["seen"].get(guards.action_key(state["language"], query))


def _adopt(state: dict, reply_text: str, steps: list[Step], emit: Emitter, feedback: str | None = None) -> dict:
    """Take the reply's steps into the plan and settle them."""
    new = {"steps": state["steps"] + [s.to_dict() for s in steps], "plan": state["plan"] + [s.render() for s in steps],
           "messages": state["messages"] + [{"role": "ai", "content": reply_text}], "reply": "", "proposal": None,
           "evidence": [feedback] if feedback else [], "failed": []}
    if not steps and state["prompts"] == paper_prompts.PAPER:  # noted in the trace, not told to the model
        emit(ErrorEvent(message="the plan has no steps (paper prompt setting: no correction is sent)",
                        error_kind="format", fatal=False))
    elif not steps:
        event = ObservationEvent(text=texts.no_steps(state["language"]), error="the plan has no steps",
                                 error_kind="format")
        emit(event)
        new["evidence"].append(event.text)
        new["failed"] = ["your plan"]
    return {**new, **_settle({**state, **new}, emit)}


def write_plan(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call writing the retrieval plan, or (after failed steps, or a rejected plan) the steps to run
    instead; then adopt them or send them for review."""
    limits, step = Limits.from_dict(state["limits"]), state["llm_calls"] + 1
    emit = Emitter(runtime, step)
    calibrated = calibrate(state, runtime)
    state = {**state, **calibrated}
    reached = guards.limit_reached(state, limits) or context_full(state, limits)
    if reached:
        return {**calibrated, **to_answer(state, *reached, emit), "next": "answer"}
    update, c = complete_call(state, runtime, state["prompt"], emit)
    update = {**calibrated, **update}
    if c is None:
        return update
    state = {**state, **update}
    if getattr(c, "finish_reason", None) == "length":
        emit(ErrorEvent(message=texts.CUT_OFF, error_kind="truncated", fatal=False))
    steps = parse_plan(c.text, state["language"], _labels(state["steps"]))
    kind, new_plan = ("replan" if state["steps"] else "plan"), [s.render() for s in steps]
    # a plan with no steps is never reviewed: it is adopted, and observed as having none
    if announce_plan(state["hitl"] if steps else "auto", kind, state["plan"], new_plan, emit):
        return {**update, "reply": c.text, "proposal": {"kind": kind, "plan": new_plan, "old_plan": state["plan"]},
                "next": "review_plan"}
    return {**update, **_adopt(state, c.text, steps, emit)}


def review_plan(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """Pause until the analyst approves, edits or rejects the proposed steps; then run them, or ask again."""
    review, verdict, emit = await_review(state, runtime)
    known, proposed = _labels(state["steps"]), state["proposal"]["plan"]
    if verdict == "approved":
        emit(PlanEvent(steps=proposed, origin="analyst", status="approved", note=review.note,
                       reviewer=review.reviewer))
        return _adopt(state, state["reply"], parse_plan(state["reply"], state["language"], known), emit)
    if verdict == "edited":
        steps = parse_steps(list(review.plan), state["language"], known)
        edited = [s.render() for s in steps]
        emit(PlanEvent(steps=edited, origin="analyst", status="edited", proposed_steps=proposed, note=review.note,
                       reviewer=review.reviewer))
        return _adopt(state, state["reply"], steps, emit, texts.plan_edited(edited, review.note))
    emit(PlanEvent(steps=proposed, origin="analyst", status="rejected", note=review.note,
                   reviewer=review.reviewer))
    feedback = ObservationEvent(text=prompts.plan_rejected(review.note, texts.STEP_FORMAT.format(
        tool=prompts.TOOL_NAMES[state["language"]], lang=prompts.LANGUAGE_NAMES[state["language"]])))
    return {**observe(state, state["reply"], feedback, emit), "proposal": None, "next": "write_plan"}


def review_step(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """Pause until the analyst approves, edits or rejects the query of the next step (review mode "approve every
    query"); a rejected step fails, the analyst's note its observation. Nothing comes before the interrupt."""
    i, query = state["cursor"], state["action"]["query"]
    step = Step(**state["steps"][i])
    review = Review.from_dict(interrupt({"kind": "query", "plan": state["plan"], "old_plan": [], "reply": "",
                                         "query": query, "language": state["language"],
                                         "current_step": f"Step {i + 1}: {step.purpose or step.render()}"}))
    emit = Emitter(runtime, state["llm_calls"])
    edited = review.action == "edit" and review.query.strip() != query.strip()
    status = "rejected" if review.action == "reject" else "edited" if edited else "approved"
    emit(QueryReviewEvent(status=status, query=review.query.strip() if edited else query, proposed=query,
                          note=review.note, reviewer=review.reviewer))
    if status != "rejected":
        return {"action": {"query": review.query.strip() if edited else query}, "next": "run_step"}
    problem = "rejected by the analyst"
    event = ObservationEvent(text=texts.evidence(step, i + 1, prompts.query_rejected(review.note)), error=problem,
                             error_kind="rejected")
    emit(event)
    results = dict(state["results"])
    if step.label is not None:
        results.setdefault(f"E{step.label}", {"error": problem})
    new = {"results": results, "cursor": i + 1, "evidence": state["evidence"] + [event.text],
           "failed": state["failed"] + [step.name(i + 1)]}
    return {**new, **_settle({**state, **new}, emit)}


def run_step(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """Run the next step's query and observe its result; then settle the steps after it."""
    emit = Emitter(runtime, state["llm_calls"])
    i = state["cursor"]
    step = Step(**state["steps"][i])
    try:
        event = run_query(runtime.context.backend, state["action"]["query"], Limits(**state["limits"]),
                          getattr(runtime.context, "control", None))
    except BackendUnavailable as e:
        return fail_run(e.kind, str(e), emit)
    said, event.text = event.text, texts.evidence(step, i + 1, event.text)
    emit(event)
    result = ({"error": event.error} if event.error else
              {"columns": event.columns, "rows": event.rows, "total_rows": event.total_rows})
    seen = {**state["seen"], guards.action_key(state["language"], state["action"]["query"]): {
        "call": state["llm_calls"], "step": step.name(i + 1), "text": guards.earlier_result(said),
        "result": result}}
    state = {**state, "results": {**state["results"], f"E{step.label}": result}, "cursor": i + 1,
             "evidence": state["evidence"] + [event.text],
             "failed": state["failed"] + ([step.name(i + 1)] if event.error else []), "actions": state["actions"] + 1,
             "queries": state["queries"] + 1, "seen": seen}
    return {"actions": state["actions"], "queries": state["queries"], "seen": seen, **_settle(state, emit)}


def answer(state: ReaperState, runtime: Runtime[AgentContext]) -> dict:
    """One LLM call for the final answer from everything the steps observed (PlanRAG's answer prompt)."""
    emit = Emitter(runtime, state["llm_calls"] + 1)
    start = state["answer_from"]
    update = {} if start is not None else {"answer_from": len(state["messages"])}
    state = {**state, **update}
    question = state.get("question") or state["messages"][0]["content"]
    request = guards.fit_answer(state["answer_prompt"], question, state.get("collected", []),
                                state["messages"][state["answer_from"]:],
                                Limits.from_dict(state["limits"]), state["chars_per_token"])
    counted, c = complete_call(state, runtime, state["answer_prompt"], emit, request)
    update.update(counted)
    if c is None:
        return update
    return {**update, **settle_answer({**state, **update}, parse_reply(c.text), emit, getattr(c, "finish_reason", None),
                                again="answer", ask_again=state["prompts"] != paper_prompts.PAPER)}


def build_graph() -> StateGraph:
    """The uncompiled graph; compile it with a checkpointer."""
    graph = StateGraph(ReaperState, context_schema=AgentContext)
    nodes = {"write_plan": write_plan, "review_plan": review_plan, "run_step": run_step, "answer": answer,
             "review_step": review_step}
    for name, node in nodes.items():
        graph.add_node(name, timed(node))
    graph.add_edge(START, "write_plan")
    for name in nodes:
        graph.add_conditional_edges(name, route, [*nodes, END])
    return graph
