"""The shared agent loop as a LangGraph state machine, run by the techniques whose engine is a ``LoopEngine``:

    call_llm --> review_plan (pauses for the analyst) --> run_action --> call_llm ... --> END

``call_llm`` asks the model for one reply and settles it: a plan to adopt or review, a final answer, an action, or
a corrective observation; ``review_plan`` and ``review_query`` pause at an ``interrupt()``. The improved setting's
nodes are here, the paper setting's in ``paper_loop``; a prompt setting's ``LoopSetting`` picks them when the graph
is built."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from core.agents import guards, paper_loop, paper_prompts, prompts
from core.agents.engine import Engine
from core.agents.nodes import (AgentContext, Emitter, announce_plan, answer_request, await_review, calibrate,
                               complete_call, context_full, correct, fail_run, finish, observe, queue_action, repeat,
                               route, run_query, settle_answer, stuck_run, timed, to_answer)
from core.agents.parsing import Reply, parse_reply, query_language, tool_kind
from core.agents.state import LoopPart, LoopState, composed, guard_state
from core.agents.workspace import Workspace
from core.backends.base import BackendUnavailable, cap_text
from core.model.events import (ActionEvent, ErrorEvent, ObservationEvent, PlanEvent, QueryReviewEvent, ReplanEvent,
                               ThoughtEvent)
from core.model.run_settings import Limits, Review, RunSettings
from core.model.technique import Technique


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
                  chosen: PromptSet) -> LoopState:
    """The loop's state a run starts in; ``initial_plan``: the plan its system prompt gives it to start from;
    ``prompt_setting``: improved or paper, whose prompts are ``chosen``;
    ``review_queries``: each query waits for the analyst's approval."""
    prompt = chosen.system(tech, language, schema, note, initial_plan)
    answer_prompt, question = chosen.answer(language, schema, note), chosen.question(question_text)
    return LoopState(technique=tech.name, hitl=hitl, limits=limits.__dict__.copy(), language=language,
                      prompt=prompt, answer_prompt=answer_prompt, prompts=prompt_setting,
                      messages=[{"role": "human", "content": question}],
                      plan=[], reply="", proposal=None, action=None, llm_calls=0, prompt_tokens=0,
                      completion_tokens=0, tokens_estimated=False, actions=0, answer_only=False, final_answer=None,
                      status="running", error=None, next="call_llm", wall_s=0.0, review_queries=review_queries,
                      **guard_state())


def _proceed(state: dict, reply: Reply, emit: Emitter) -> dict:
    """Act on a reply once its plan, if any, is settled (the improved setting): final answer, action, or a corrective
    observation."""
    if reply.thought or reply.current_step:
        emit(ThoughtEvent(text=reply.thought or "", current_step=reply.current_step))
    if reply.problems:
        return correct(state, reply, reply.problems[0], emit)
    if reply.final_answer is not None:
        if (not state["queries"] and not state["told_unqueried"]
                and guards.calls_left(state, Limits.from_dict(state["limits"]))):
            note = ObservationEvent(text=prompts.not_queried_yet(state["language"]), error_kind="unqueried")
            return {"told_unqueried": True, **observe(state, reply.text, note, emit)}
        return finish(state, reply, reply.final_answer, emit)
    if not reply.action:
        if reply.plan:
            return observe(state, reply.text, ObservationEvent(text=prompts.go_on_with_plan()), emit)
        return correct(state, reply, "your reply has no Action", emit)
    language, kind = state["language"], tool_kind(reply.action)
    if kind is None:
        return correct(state, reply, prompts.unknown_tool(reply.action, language), emit)
    if kind != "self" and kind != language:
        return correct(state, reply, prompts.wrong_database(reply.action, language), emit)
    found = query_language(reply.action_input) if kind != "self" else None
    if found and found != language:
        return correct(state, reply, prompts.wrong_language(found, language), emit)
    key = guards.action_key(kind, reply.action_input)
    earlier = state["seen"].get(key)
    if earlier is not None:
        return repeat(state, reply, prompts.repeated_action(earlier["call"], earlier["text"]),
                       f"the same action as at LLM call {earlier['call']}: {reply.action_input}", emit)
    tool = prompts.TOOL_NAMES[kind] if reply.query_moved and kind in prompts.TOOL_NAMES else reply.action
    emit(ActionEvent(tool=tool, query=reply.action_input, language=kind))
    return queue_action(state, reply.text, kind, reply.action_input)


def _settle_plan(state: dict, reply: Reply, emit: Emitter) -> dict:
    """For the planning techniques: take the reply's (new) plan, or send it for review; then proceed."""
    tech, plan = emit.technique, state["plan"]
    if not plan:
        if not reply.plan:
            return correct(state, reply, "your reply has no Plan, and no Plan is in force; begin with the Plan",
                            emit, prompts.plan_hint(tech, state["language"]))
        proposal = {"kind": "plan", "plan": reply.plan, "old_plan": []}
    elif tech.replans and reply.replan is not False and reply.plan and reply.plan != plan:
        proposal = {"kind": "replan", "plan": reply.plan, "old_plan": plan}
    elif tech.replans and reply.replan and not reply.action and reply.final_answer is None and not reply.problems:
        return correct(state, reply, "you answered Re-plan: Y but wrote no new Plan", emit,
                        prompts.plan_hint(tech, state["language"]))
    else:
        if tech.replans and reply.replan is not None:
            note = "Re-plan: Y without a new Plan; the Plan is kept" if reply.replan else ""
            emit(ReplanEvent(replan=False, old_plan=plan, new_plan=plan, note=note))
        return _proceed(state, reply, emit)
    if announce_plan(state["hitl"], proposal["kind"], plan, proposal["plan"], emit):
        return {"reply": reply.text, "proposal": proposal, "next": "review_plan"}
    return {"plan": proposal["plan"], **_proceed({**state, "plan": proposal["plan"]}, reply, emit)}


def call_llm(state: LoopState, runtime: Runtime[AgentContext]) -> dict:
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
    elif state["answer_from"] is None:  # SingleRAG after its query
        update["answer_from"] = len(state["messages"])
    state = {**state, **update}
    if state["answer_only"]:
        counted, c = complete_call(state, runtime, state["answer_prompt"], emit, answer_request(state))
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
        return {**update, **correct(state, reply, prompts.CUT_OFF, emit)}
    if finish_reason == "length":
        emit(ErrorEvent(message=prompts.cut_off_answer(), error_kind="truncated", fatal=False))
    if emit.technique.plans:
        return {**update, **_settle_plan(state, reply, emit)}
    return {**update, **_proceed(state, reply, emit)}


def _empty_reply(state: dict, reply: Reply, emit: Emitter) -> dict:
    """An empty reply: observed as such; ``guards.MAX_EMPTY_REPLIES`` in a row end the run."""
    empty = state["empty_replies"] + 1
    if empty >= guards.MAX_EMPTY_REPLIES:
        return {"empty_replies": empty, **fail_run("empty_reply", prompts.empty_replies(empty), emit)}
    problem = "your reply was empty"
    text = prompts.correction(problem, emit.technique, state["language"])
    return {"empty_replies": empty,
            **observe(state, reply.text, ObservationEvent(text=text, error=problem, error_kind="format"), emit)}


def review_plan(state: LoopState, runtime: Runtime[AgentContext], proceed: Callable = _proceed) -> dict:
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


def _current_step(state: dict) -> str:
    """The plan step the agent's pending reply says it works on ("" when it names none)."""
    return parse_reply(state["reply"]).current_step or "" if state["reply"] else ""


def review_query(state: LoopState, runtime: Runtime[AgentContext]) -> dict:
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


def _observe(state: dict, runtime: Runtime[AgentContext], limits: Limits) -> ObservationEvent:
    """The improved setting's observation of the action: its query's rows or error, a Self-thinking input echoed.
    Raises BackendUnavailable."""
    action = state["action"]
    if action["tool"] == "self":
        return ObservationEvent(text=cap_text(action["query"], limits.observation_chars))
    return run_query(runtime.context.backend, action["query"], limits, getattr(runtime.context, "control", None))


def run_action(state: LoopState, runtime: Runtime[AgentContext], observe_action: Callable = _observe,
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
    queries = state["queries"] + (action["tool"] != "self")
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
    seen = dict(state["seen"])
    seen[guards.action_key(action["tool"], action["query"])] = {"call": state["llm_calls"],
                                                               "text": guards.earlier_result(event.text)}
    if not event.error or event.error_kind == "timeout":
        return {"seen": seen}
    key = "error:" + event.error
    if key not in seen:
        seen[key] = {"call": state["llm_calls"], "text": event.error}
        return {"seen": seen}
    event.text += " " + prompts.same_error(seen[key]["call"])
    return {"seen": seen, "repeats": state["repeats"] + 1}


@dataclass(frozen=True)
class LoopSetting:
    """How the loop acts in one prompt setting, chosen once, when its graph is built: the node making the LLM call,
    how a reply is acted on once its plan is settled, how an action is observed, whether the loop guard keeps what
    actions gave, and whether a technique's part may take the call's place."""

    call_llm: Callable
    proceed: Callable
    observe_action: Callable
    guarded: bool
    parts_lead: bool = False  # a technique's part may lead the run instead of ``call_llm`` (LoopPart.leads)


#: The loop's behaviour by prompt setting: the workbench's (corrections, the loop guard, a final answer asked for at a
#: limit), and the paper's (what the authors' code did: paper_prompts.py).
LOOP_SETTINGS = {paper_prompts.IMPROVED: LoopSetting(call_llm, _proceed, _observe, guarded=True),
                 paper_prompts.PAPER: LoopSetting(paper_loop.call_llm, paper_loop.act, paper_loop.observe_action,
                                                       guarded=False, parts_lead=True)}


def build_graph(prompt_setting: str = paper_prompts.IMPROVED, parts: tuple[LoopPart, ...] = ()) -> StateGraph:
    """The uncompiled graph of the loop in ``prompt_setting``, its state with the fields of a technique's ``parts``;
    compile it with a checkpointer. Every setting's graph has the same nodes, so a run's checkpoints read in
    either."""
    setting = LOOP_SETTINGS[paper_prompts.check(prompt_setting)]
    graph = StateGraph(composed(parts), context_schema=AgentContext)
    graph.add_node("call_llm", timed(partial(setting.call_llm, parts=parts) if setting.parts_lead else
                                     setting.call_llm))
    graph.add_node("review_plan", timed(partial(review_plan, proceed=setting.proceed)))
    graph.add_node("run_action", timed(partial(run_action, observe_action=setting.observe_action,
                                               guarded=setting.guarded)))
    graph.add_node("review_query", timed(review_query))
    graph.add_edge(START, "call_llm")
    for node in ("call_llm", "review_plan", "run_action", "review_query"):
        graph.add_conditional_edges(node, route, ["call_llm", "review_plan", "run_action", "review_query", END])
    return graph


@cache
def loop_builder(parts: tuple[LoopPart, ...] = ()) -> Callable[[str], StateGraph]:
    """The builder of the loop's graph with ``parts``: the same for the same parts, so the techniques with the same
    parts share one compiled graph per runtime."""
    return partial(build_graph, parts=parts) if parts else build_graph


class LoopEngine(Engine):
    """The engine of a technique that runs on this loop, with its prompt sets by setting (``prompt_sets``: the
    settings it has) and its own parts of the loop (``parts``)."""

    llm_nodes = ("call_llm",)
    query_nodes = ("run_action", "review_query")

    def __init__(self, prompt_sets: dict[str, PromptSet], parts: tuple[LoopPart, ...] = ()):
        self.prompt_sets, self.parts = prompt_sets, parts
        self.builder = loop_builder(parts)

    def initial_state(self, tech: Technique, settings: RunSettings, ws: Workspace, hitl: str,
                      note: str | None) -> dict:
        chosen, backend = self.prompt_sets[settings.prompts], ws.backend
        schema, text = backend.schema_text(), ws.question.text
        if chosen.inputs is not None:
            schema, text = chosen.inputs(ws.question, backend.language, schema)
        state = initial_state(tech, hitl, settings.limits, backend.language, schema, text, note,
                              settings.initial_plan, settings.prompts, settings.review_queries, chosen)
        for part in self.parts:
            state.update(part.start(settings))
        return state
