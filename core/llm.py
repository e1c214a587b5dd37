"""LLM access for the agents: an OpenAI or OpenAI-compatible chat model (vLLM, Ollama, llama.cpp server) through
LangChain's ChatOpenAI, or a replay of recorded replies (``replay:FILE``) for tests and demos.

Every call goes through :class:`ChatLLM.complete`, which passes stop sequences, cuts the reply client-side
as well, retries transient failures with backoff and reports token usage. The API key is read from the
settings or ``OPENAI_API_KEY`` only when the model is opened; it is never part of a repr, a message or a trace.
"""
from __future__ import annotations

import json
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage

from core.settings import LLMSettings

REPLAY_PREFIX = "replay:"
CHARS_PER_TOKEN = 4  # the estimate used when a model reports no usage (replays)


class LLMError(Exception):
    """An LLM call that failed for good. ``kind``: config, auth, rate_limit, server, timeout, network,
    bad_request, model or replay. The message never contains the API key."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class LLMNotConfigured(LLMError):
    """No model, or no key for the OpenAI API."""

    def __init__(self, message: str):
        super().__init__("config", message)


@dataclass
class Completion:
    """One reply, cut before any ``Observation:``, with its token usage and latency."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    estimated: bool  # token counts estimated from characters (the model reported none)


def estimate_tokens(text: str) -> int:
    """About one token per four characters."""
    return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0


_OBSERVATION = re.compile(r"^[ \t>*#-]*\**[ \t]*Observation[ \t]*\**[ \t]*:", re.I | re.M)


def cut_reply(text: str) -> str:
    """The reply up to (not including) the first line that starts an ``Observation:``: the model must not
    write its own observations."""
    m = _OBSERVATION.search(text)
    return (text[:m.start()] if m else text).rstrip()


class ReplayExhausted(Exception):
    """A replay was asked for more replies than it holds."""


class ReplayChatModel(GenericFakeChatModel):
    """A fake chat model playing back recorded replies in order, with a clear error when they run out."""

    source: str = "replay"
    count: int = 0  # replies in the file, for the error message

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        try:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        except StopIteration:
            raise ReplayExhausted(f"replay {self.source} ran out of replies: it holds {self.count} and the "
                                  "agent asked for another") from None


def read_replay(path: str | Path) -> list[str]:
    """The replies of a replay file: a JSON array of strings."""
    try:
        replies = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LLMNotConfigured(f"replay file {path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LLMNotConfigured(f"replay file {path} is not JSON ({e})") from None
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise LLMNotConfigured(f"replay file {path} must hold a JSON array of reply strings")
    return replies


def replay_path(spec: str) -> Path:
    """The absolute file of a ``replay:FILE`` spec (so a run resumed from another directory finds it)."""
    return Path(spec[len(REPLAY_PREFIX):]).expanduser().resolve()


def _error_kind(e: Exception) -> str | None:
    """The LLMError kind of a client exception; None for exceptions that are not about the LLM call."""
    import openai

    if isinstance(e, ReplayExhausted):
        return "replay"
    if isinstance(e, openai.RateLimitError):
        return "rate_limit"
    if isinstance(e, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return "auth"
    if isinstance(e, openai.NotFoundError):
        return "model"
    if isinstance(e, openai.APITimeoutError):
        return "timeout"
    if isinstance(e, openai.APIConnectionError):
        return "network"
    if isinstance(e, openai.APIStatusError):
        return "server" if e.status_code >= 500 else "bad_request"
    return None


TRANSIENT = frozenset({"rate_limit", "server", "timeout", "network"})
_HINTS = {"auth": "check OPENAI_API_KEY", "model": "check the model name and the base URL",
          "network": "check the base URL and that the server is running"}


def _retry_after(e: Exception) -> float | None:
    response = getattr(e, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(value), 60.0) if value else None
    except ValueError:
        return None


class ChatLLM:
    """A chat model with the agents' calling conventions. ``label`` names it in traces (never the key)."""

    def __init__(self, model: BaseChatModel, label: str, *, estimate_usage: bool = False, max_retries: int = 0,
                 retry_base_s: float = 1.0, secret: str | None = None, sleep=time.sleep):
        self.model = model
        self.label = label
        self._estimate = estimate_usage
        self._max_retries = max_retries
        self._retry_base_s = retry_base_s
        self._secret = secret
        self._sleep = sleep
        self._use_stop = True

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _invoke(self, messages: list[BaseMessage], stop: list[str]):
        try:
            return self.model.invoke(messages, stop=stop if self._use_stop else None)
        except Exception as e:
            import openai

            # Some models (reasoning models) refuse stop sequences: go on without them, cutting client-side.
            if self._use_stop and isinstance(e, openai.BadRequestError) and "'stop'" in str(e):
                self._use_stop = False
                return self.model.invoke(messages)
            raise

    def complete(self, messages: list[BaseMessage], stop: list[str]) -> Completion:
        """One reply to ``messages``. Raises LLMError when the call fails for good."""
        for attempt in range(self._max_retries + 1):
            start = time.perf_counter()
            try:
                message = self._invoke(messages, stop)
                break
            except Exception as e:
                kind = _error_kind(e)
                if kind is None:
                    raise
                if kind not in TRANSIENT or attempt == self._max_retries:
                    hint = f" ({_HINTS[kind]})" if kind in _HINTS else ""
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise LLMError(kind, self._scrub(f"{self.label}: {kind} error{tries}{hint}: {e}")) from None
                self._sleep(_retry_after(e) or min(self._retry_base_s * 2 ** attempt, 30.0)
                            * (1 + 0.25 * random.random()))
        latency = time.perf_counter() - start
        content = message.content if isinstance(message.content, str) else "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in message.content)
        text = cut_reply(content)
        usage = getattr(message, "usage_metadata", None)
        if usage and not self._estimate:
            return Completion(text, usage.get("input_tokens", 0), usage.get("output_tokens", 0), latency, False)
        prompt = sum(estimate_tokens(m.content if isinstance(m.content, str) else str(m.content)) for m in messages)
        return Completion(text, prompt, estimate_tokens(content), latency, True)


def open_llm(spec: str | None = None, settings: LLMSettings | None = None, *, skip: int = 0) -> ChatLLM:
    """The model named by ``spec`` (a model name or ``replay:FILE``; default ``settings.model``).
    ``skip`` replies of a replay are passed over (they were used before a pause)."""
    settings = settings or LLMSettings()
    spec = spec or settings.model
    if not spec:
        raise LLMNotConfigured("no LLM configured: choose a model (--llm MODEL or OPENAI_MODEL; for a local "
                               "OpenAI-compatible server also its URL, --base-url or OPENAI_BASE_URL) or a "
                               "replay (replay:FILE)")
    if spec.startswith(REPLAY_PREFIX):
        path = replay_path(spec)
        replies = read_replay(path)
        model = ReplayChatModel(messages=iter(replies[skip:]), source=str(path), count=len(replies))
        return ChatLLM(model, f"replay:{path.name}", estimate_usage=True)
    from langchain_openai import ChatOpenAI

    key = settings.api_key
    if not key:
        if not settings.base_url:
            raise LLMNotConfigured(f"model {spec!r} needs an API key: set OPENAI_API_KEY, or set OPENAI_BASE_URL "
                                   "(--base-url) to an OpenAI-compatible server")
        key = "unused"  # local servers take any key
    model = ChatOpenAI(model=spec, base_url=settings.base_url, api_key=key, temperature=settings.temperature,
                       timeout=settings.timeout_s, max_retries=0, max_tokens=settings.max_reply_tokens)
    label = f"{spec} @ {settings.base_url}" if settings.base_url else spec
    return ChatLLM(model, label, max_retries=settings.max_retries, retry_base_s=settings.retry_base_s,
                   secret=settings.api_key)
