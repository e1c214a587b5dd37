"""Inspect's model API as the workbench's chat model: a LangChain chat model whose every call is the Inspect
model's ``generate`` (so Inspect's limits, usage and transcript count it), called from the worker thread a solver
drives a run on. A call Inspect refuses at one of its limits (message, token, cost ...) is kept for the solver,
which ends the sample with it as Inspect reports limits."""
from __future__ import annotations

from typing import Any

import anyio.from_thread
from anyio.lowlevel import EventLoopToken
from inspect_ai.model import (ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from inspect_ai.util import LimitExceededError
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from core.llm.client import ChatLLM


def _inspect_message(message: BaseMessage):
    text = message.content if isinstance(message.content, str) else str(message.content)
    if isinstance(message, SystemMessage):
        return ChatMessageSystem(content=text)
    if isinstance(message, AIMessage):
        return ChatMessageAssistant(content=text)
    return ChatMessageUser(content=text)


class InspectChat(BaseChatModel):
    """A LangChain chat model answering through Inspect model ``inspect_model`` on the event loop ``loop`` (the
    solver's; the graph calls from threads of its own) (``max_tokens``: the reply cap); ``limits`` collects the
    LimitExceededError of a call Inspect refused (raised on, so the run stops)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inspect_model: Model
    loop: Any  # an anyio EventLoopToken (pydantic cannot describe its type)
    max_tokens: int | None = None
    limits: Any = None  # a list (Any: pydantic would validate a list field into a copy)

    @property
    def _llm_type(self) -> str:
        return "inspect"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        config = GenerateConfig(stop_seqs=stop or None, max_tokens=self.max_tokens)
        try:
            output = anyio.from_thread.run(lambda: self.inspect_model.generate(
                [_inspect_message(m) for m in messages], config=config), token=self.loop)
        except LimitExceededError as e:
            if self.limits is not None:
                self.limits.append(e)
            raise
        usage = output.usage
        message = AIMessage(content=output.completion, usage_metadata=None if usage is None else {
            "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens}, response_metadata={"finish_reason": output.stop_reason})
        return ChatResult(generations=[ChatGeneration(message=message)])


def opener(inspect_model: Model, loop: EventLoopToken, limits: list | None = None):
    """An ``AgentRuntime`` ``llm_opener`` giving runs the Inspect model, called on event loop ``loop`` (its usage as
    Inspect reports it, estimated from characters when it reports none); ``limits`` collects the limits Inspect
    stopped a call at."""

    def open_inspect_llm(spec, settings, *, skip: int = 0) -> ChatLLM:
        chat = InspectChat(inspect_model=inspect_model, loop=loop, max_tokens=settings.max_reply_tokens,
                           limits=limits)
        return ChatLLM(chat, f"inspect:{inspect_model}", max_reply_tokens=settings.max_reply_tokens)

    return open_inspect_llm
