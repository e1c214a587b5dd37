"""SingleRAG in the paper setting, as the PlanRAG authors' chains ran it: a part of the shared loop (``PART``, a
``core.agents.state.LoopPart``) making its one retrieval call, then its answer call, each sent as one message with
no stop sequence (``SEND``)."""
from __future__ import annotations

from typing import TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from core.agents import paper_prompts
from core.agents.nodes import AgentContext, Emitter, complete_call, fail_run, finish, queue_action
from core.agents.parsing import Reply, parse_reply
from core.agents.prompts import TOOL_NAMES
from core.agents.state import LoopPart
from core.model.events import ActionEvent, ThoughtEvent
from core.model.run_settings import Limits, RunSettings
from core.techniques.singlerag import prompts


class Retrieves(TypedDict):
    """No fields of its own: it reads the loop's transcript."""


def start(settings: RunSettings) -> dict:
    return {}


def leads(state: dict) -> bool:
    """Always, in the paper setting (the only one where parts lead)."""
    return True


def done(state: dict) -> int:
    return state["llm_calls"]


def chat(prompt: str, messages: list[dict]) -> list:
    """The messages of a SingleRAG call: the system prompt and one user message (the first of ``messages``)."""
    return [SystemMessage(prompt), HumanMessage(messages[0]["content"])]


#: How SingleRAG's calls are sent, and their stop sequences (none).
SEND = (chat, None)


def query_of(text: str) -> str | None:
    """The query SingleRAG runs: the reply's text after its first ``Action input:``, up to any ``Observation``
    (None when it has no ``Action input:``; the original failed there)."""
    if "Action input:" not in text:
        return None
    return text.split("Action input:")[1].split("Observation")[0]


def step(state: dict, runtime: Runtime[AgentContext], limits: Limits) -> dict:
    """SingleRAG's retrieval call, and its reply as the original read it (``retrieval``)."""
    emit = Emitter(runtime, state["llm_calls"] + 1)
    update, c = complete_call(state, runtime, state["prompt"], emit, send=SEND)
    if c is None:
        return update
    return {**update, **retrieval({**state, **update}, parse_reply(c.text), emit)}


def retrieval(state: dict, reply: Reply, emit: Emitter) -> dict:
    """SingleRAG's retrieval reply, as the original read it: the text after its first ``Action input:`` (up to
    any ``Observation``) runs as the database query, whatever tool its Action names."""
    query = query_of(reply.text)
    if reply.thought:
        emit(ThoughtEvent(text=reply.thought))
    if query is None or not query.strip():
        return fail_run("format", "the reply has no Action input to run (the original SingleRAG failed here; paper "
                               "prompt setting: no correction is asked for)", emit)
    language = state["language"]
    query = paper_prompts.fence_free(query, language).strip()
    emit(ActionEvent(tool=reply.action or TOOL_NAMES[language], query=query, language=language))
    return queue_action(state, reply.text, language, query)


def answer(state: dict, runtime: Runtime[AgentContext]) -> dict:
    """SingleRAG's answer call, once its query ran: the question, the query and the data it retrieved, in the
    original's answer template; its reply (a ``Final answer:``'s, else the whole reply) is the run's answer."""
    emit = Emitter(runtime, state["llm_calls"] + 1)
    reply, observed = state["messages"][1]["content"], paper_prompts.observed(state["messages"][2]["content"])
    question = state["messages"][0]["content"].removeprefix("Question: ")
    text = prompts.answer_message(question, query_of(reply) or "", observed)
    update, c = complete_call(state, runtime, state["answer_prompt"], emit, [{"role": "human", "content": text}],
                              send=SEND)
    if c is None:
        return update
    read = paper_prompts.read_reply(c.text)
    final = read[1] if read[0] == "final" else c.text.strip()
    if not final:
        return {**update, **fail_run("no_answer", "the answer call gave an empty reply (paper prompt setting: it "
                                               "is not asked again)", emit)}
    return {**update, **finish({**state, **update}, parse_reply(c.text), final, emit)}


#: The part, as SingleRAG's engine adds it.
PART = LoopPart(Retrieves, start, leads, step, done, answer)
