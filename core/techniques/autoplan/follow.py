"""A run given a plan in the paper setting acts as the AutoPlan paper's agent (its equations 2-5): a part of the
shared loop (``PART``, a ``core.agents.state.LoopPart``; ``part(send)`` for a technique sending its action call its
own way) that the loop techniques taking a plan add to their engine: its fields (``FollowsPlan``), its step and the
texts its calls send."""
from __future__ import annotations

from functools import partial
from typing import TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from core.agents import paper_prompts, prompts
from core.agents.nodes import AgentContext, Emitter, complete_call, fail_run
from core.agents.paper_loop import SEND, act, safety_limit
from core.agents.parsing import parse_reply
from core.agents.state import LoopPart
from core.model.events import ThoughtEvent
from core.model.run_settings import Limits, RunSettings

#: AutoPlan's thought call stops where the model would write its action (the action call writes it).
THOUGHT_STOP = ["\nAction:", "Observation:"]
#: The Thought-prompt (its Table 2, word for word), for a run given a learned plan in the paper setting.
THOUGHT_PROMPT = ("Identify which step of plan you are at. Show your thought about the one next action. Your thought "
                  "should be faithful the plan step.")


class FollowsPlan(TypedDict):
    follows_plan: bool  # the run acts as AutoPlan's agent (absent in older checkpoints: it does not)
    iterations: int  # its steps taken (thought, action, formalizing)


def start(settings: RunSettings) -> dict:
    """In the paper setting, any plan, even AutoPlan's empty one, makes the run act as AutoPlan's agent."""
    return {"follows_plan": settings.prompts == paper_prompts.PAPER and settings.initial_plan is not None,
            "iterations": 0}


def leads(state: dict) -> bool:
    return bool(state.get("follows_plan"))


def done(state: dict) -> int:
    return state.get("iterations", 0)


def step(state: dict, runtime: Runtime[AgentContext], limits: Limits, *, send: tuple) -> dict:
    """One step of the AutoPlan paper's agent (equations 2-5): a thought call, an action call continuing it after
    ``Action:`` (sent as ``send`` says, the technique's way), and the formalizer's call (Appendix A.1); the formalized
    action is acted on as the original parser read a reply. A workbench safety limit reached between the calls ends
    the run."""
    language, update = state["language"], {"iterations": state.get("iterations", 0) + 1}
    texts: list[str] = []
    for call in ("thought", "action", "formalize"):
        emit = Emitter(runtime, state["llm_calls"] + 1)
        reached = safety_limit(state, limits) if texts else None
        if reached:
            return {**update, "limit": reached[0], **fail_run("limit", reached[1], emit)}
        if call == "thought":
            counted, c = complete_call(state, runtime, state["prompt"], emit,
                                       send=(thought_chat, THOUGHT_STOP))
        elif call == "action":
            counted, c = complete_call(state, runtime, state["prompt"], emit,
                                       state["messages"] + [action_cue(texts[0])],
                                       send=send)
        else:
            counted, c = complete_call(state, runtime, "", emit, [{"role": "human", "content": formalizer(
                language, texts[1])}], send=(chat_alone, None))
        update.update(counted)
        if c is None:
            return update
        state = {**state, **counted}
        texts.append(c.text.strip())
        if call == "thought":
            emit(ThoughtEvent(text=texts[0]))
        elif call == "action":
            emit(ThoughtEvent(text=f"{paper_prompts.ACTION} {texts[1]} (to be formalized)"))
    text = f"{texts[0]}\n{texts[2]}"
    return {**update, **act(state, parse_reply(text), emit, acted=texts[2])}


def thought_chat(prompt: str, messages: list[dict]) -> list:
    """AutoPlan's thought call (its equation 2): the history H (the system prompt with the plan, the question and
    the scratchpad of earlier thoughts, formalized actions and observations), then the Thought-prompt."""
    question = messages[0]["content"]
    return [SystemMessage(prompt), HumanMessage(f"{question}\n\n{paper_prompts.scratchpad(messages[1:])}{THOUGHT_PROMPT}")]


def action_cue(thought: str) -> dict:
    """The scratchpad entry AutoPlan's action call continues (equation 3: H, the thought, then ``Action:``)."""
    return {"role": "ai", "content": f"{thought}\n{paper_prompts.ACTION}"}


def formalizer(language: str, raw_action: str) -> str:
    """The formalizer's prompt (the AutoPlan paper's Appendix A.1, Figure 6), its valid action formats those of
    the run's tools and of a final answer."""
    tool, lang = prompts.TOOL_NAMES[language], prompts.LANGUAGE_NAMES[language]
    return (f"Valid action formats are as follows:\nAction: {tool}\nAction input: a {lang} query statement\n"
            f"Action: {paper_prompts.SELF_TOOL}\nAction input: your thought\nFinal answer: the final answer to the question\n\n"
            "Formalize the following action strictly into the above valid action formats. If there are multiple "
            f"actions, formalize the first one.\n\nAction to formalize: {raw_action}\nFormalized action:")


def chat_alone(prompt: str, messages: list[dict]) -> list:
    """The formalizer's call: its prompt as the one user message, no system prompt (``prompt`` is empty)."""
    return [HumanMessage(messages[0]["content"])]


def part(send: tuple) -> LoopPart:
    """The part, its action call sent as ``send`` says (how its messages are built, and its stop sequences). Make
    it once, at import: the loop's graph builders are cached by their parts."""
    return LoopPart(FollowsPlan, start, leads, partial(step, send=send), done)


#: The part, as the engines of the loop techniques that take a plan add it (its action call sent as the loop's).
PART = part(SEND)
