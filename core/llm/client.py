"""LLM access for the agents: an OpenAI or OpenAI-compatible chat model (vLLM, Ollama, llama.cpp server) through
LangChain's ChatOpenAI, or a replay of recorded replies (``replay:FILE``) for tests and demos.

Every call goes through :class:`ChatLLM.complete`, which passes stop sequences, cuts the reply client-side
as well, streams the reply where the server streams (a reply still arriving is never cut: a stream's limit is
silence, see ``Limits``), retries transient failures with backoff (a timed-out attempt's connection is shut, so a
server that checks stops computing it, and the retry waits longer) and reports token usage and every attempt
(start, duration, error, and the tokens an abandoned attempt spent). A reply that is not a chat completion (HTTP 200 with an error body or an HTML page) is
a server error, retried like one. The API key is read from the settings or ``OPENAI_API_KEY`` only when the
model is opened; it is registered with core.config.secrets, so it and its masked forms never reach a message or a trace.
"""
from __future__ import annotations

import contextvars
import json
import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit


from core.config import secrets
from core.config.settings import PROJECT_ROOT, LLMSettings
from core.llm import tokenizer_file
from sims.files import FileRefused, read_text

if TYPE_CHECKING:  # langchain_core is heavy: loaded only when a model is opened (pages show runs without it)
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from core.llm.transport import Flight

REPLAY_PREFIX = "replay:"
CHARS_PER_TOKEN = 4  # the estimate used when a model reports no usage (replays) and no tokenizer is known
#: Tokens a chat template adds per message (and once for the reply's opening) on top of the texts: ChatML's
#: ``<|im_start|>role\n ... <|im_end|>\n`` (Qwen and many local models) is 5.
CHAT_TEMPLATE_TOKENS = 5
#: How many texts' token counts a model keeps (count_tokens).
COUNTS_KEPT = 256
#: What token counts rest on when the server reported them.
REPORTED = "the server's reported usage"


class LLMError(Exception):
    """An LLM call that failed for good. ``kind``: config, auth, rate_limit, server, timeout, network,
    bad_request, context (the request does not fit the model's context window), model or replay. The message
    never contains the API key. ``attempts``: each attempt made (see Completion.attempts)."""

    def __init__(self, kind: str, message: str, attempts: list[dict] | None = None, window=None):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts or []
        self.window = window  # for a context error: the window the server's error states (server_info.Window)


class LLMNotConfigured(LLMError):
    """No model, or no key for the OpenAI API."""

    def __init__(self, message: str):
        super().__init__("config", message)


@dataclass
class Completion:
    """One reply, cut before any ``Observation:``, with its token usage, latency and attempts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # of the attempt that answered
    estimated: bool  # token counts estimated from characters (the model reported none)
    wait_s: float | None = None  # the whole wait from the first attempt's start (retries and backoff included)
    #: each attempt: {attempt, start (epoch s), duration_s, timeout_s, error_kind, error (None: it answered)}
    attempts: list[dict] = field(default_factory=list)
    finish_reason: str | None = None  # the server's, e.g. ``length`` for a reply cut by the reply cap
    metadata: dict = field(default_factory=dict)  # the server's (LangChain's response_metadata)
    cached: bool = False  # served from a reply cache (its latency is the original call's)
    failed_prompt_tokens: int = 0  # what the attempts abandoned before it spent (estimated where not counted)
    failed_completion_tokens: int = 0
    counted_by: str | None = None  # what the token counts rest on: REPORTED, a tokenizer, or the characters
    raw: str | None = None  # the reply as the server returned it, before the cut (None: cached before it was kept)


def estimate_tokens(text: str) -> int:
    """About one token per four characters."""
    return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0


_OBSERVATION = re.compile(r"^[ \t>*#-]*\**[ \t]*Observation[ \t]*\**[ \t]*:", re.I | re.M)


#: ``ChatLLM.counted_by`` when the model's server counts the tokens (a request of its own: ``POST /tokenize``).
SERVER_TOKENIZER = "the server's tokenizer"


def cut_reply(text: str) -> str:
    """The reply up to (not including) the first line that starts an ``Observation:``: the model must not
    write its own observations."""
    m = _OBSERVATION.search(text)
    return (text[:m.start()] if m else text).rstrip()


class AttemptDeadline(Exception):
    """An attempt abandoned at one of its time limits (``AttemptLimits``): no first piece, silence, or the whole
    reply's ceiling."""


@dataclass(frozen=True)
class AttemptLimits:
    """The time limits of one attempt, from its time limit ``timeout_s`` (the Settings' timeout per attempt): a
    streamed reply's first piece must come within ``first_token_s`` (the server reads the whole prompt first),
    then it is cut only after ``idle_s`` of silence, never while text flows; any reply (and a reply that is not
    streamed, which comes whole) ends at ``ceiling_s``."""

    timeout_s: float

    @property
    def first_token_s(self) -> float:
        return self.timeout_s * FIRST_TOKEN_FACTOR

    @property
    def idle_s(self) -> float:
        return self.timeout_s

    @property
    def ceiling_s(self) -> float:
        return self.timeout_s * CEILING_FACTOR

    def as_dict(self) -> dict:
        return {"timeout_s": self.timeout_s, "first_token_s": self.first_token_s, "idle_s": self.idle_s,
                "ceiling_s": self.ceiling_s}


def read_replay(path: str | Path) -> list[str]:
    """The replies of a replay file: a JSON array of strings."""
    try:
        replies = json.loads(read_text(path, "replay file"))
    except FileNotFoundError:
        raise LLMNotConfigured(f"replay file {path} not found") from None
    except FileRefused as e:
        raise LLMNotConfigured(str(e)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LLMNotConfigured(f"replay file {path} is not JSON ({e})") from None
    if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
        raise LLMNotConfigured(f"replay file {path} must hold a JSON array of reply strings")
    return replies


#: The replay transcripts shipped with the app (core.llm.replays); PLANRAG_REPLAYS adds folders.
REPLAY_DIR = PROJECT_ROOT / "assets" / "replays"


def replay_dirs() -> list[Path]:
    """The folders replays are found in: assets/replays, then those in PLANRAG_REPLAYS (separated like PATH)."""
    extra = [Path(p).expanduser() for p in os.environ.get("PLANRAG_REPLAYS", "").split(os.pathsep) if p]
    return [REPLAY_DIR, *extra]


def replay_path(spec: str) -> Path:
    """The absolute file (or folder) of a ``replay:FILE`` spec, so a run resumed elsewhere finds it (links kept as
    given); a path not on this machine is found by its name in this machine's replay folders (replay_dirs)."""
    path = Path(os.path.abspath(Path(spec[len(REPLAY_PREFIX):]).expanduser()))
    if not os.path.lexists(path):
        found = next((folder / path.name for folder in replay_dirs() if (folder / path.name).exists()), None)
        if found is not None:
            return Path(os.path.abspath(found))
    return path


#: Exceptions LangChain raises for an HTTP 200 that is no chat completion (an error body, an HTML page, null
#: choices, an empty ``choices`` list): the server's failure, not ours.
_NOT_A_COMPLETION = (ValueError, KeyError, TypeError, IndexError)
#: What servers say of a request longer than the model's context window (OpenAI, vLLM: "maximum context length";
#: llama.cpp: "exceeds the available context size", exceed_context_size_error).
_CONTEXT_FULL = re.compile(r"context[ _](?:length|size|window)|exceed_context|max_model_len|maximum model length|"
                           r"(?:prompt|input) is too long", re.I)


def _error_kind(e: Exception) -> str | None:
    """The LLMError kind of a client exception; None for exceptions that are not about the LLM call."""
    import openai

    import httpx  # heavy: loaded with the model

    from core.llm.replay_model import ReplayExhausted  # heavy (langchain_core), loaded by any model opened
    from core.llm.transport import ReplyTooLarge  # heavy: httpx, loaded by any model opened

    if isinstance(e, ReplayExhausted):
        return "replay"
    if isinstance(e, ReplyTooLarge) or isinstance(e.__cause__, ReplyTooLarge):
        return "server"
    if isinstance(e, httpx.TimeoutException):  # a read of a stream (LangChain hands on httpx's own errors there)
        return "timeout"
    if isinstance(e, httpx.TransportError):
        return "network"
    if isinstance(e, openai.RateLimitError):
        return "rate_limit"
    if isinstance(e, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return "auth"
    if isinstance(e, openai.NotFoundError):
        return "model"
    if isinstance(e, (openai.APITimeoutError, AttemptDeadline)):
        return "timeout"
    if isinstance(e, openai.APIConnectionError):
        return "network"
    if isinstance(e, (openai.APIStatusError, openai.APIResponseValidationError, *_NOT_A_COMPLETION)):
        if _CONTEXT_FULL.search(str(e)):
            return "context"
        return "bad_request" if isinstance(e, openai.APIStatusError) and e.status_code < 500 else "server"
    return None


def _detail(e: Exception) -> str:
    """What an exception says, naming a reply that was no chat completion as such."""
    import openai

    import httpx  # heavy: loaded with the model

    from core.llm.replay_model import ReplayExhausted  # heavy (langchain_core), loaded by any model opened
    from core.llm.transport import ReplyTooLarge  # heavy: httpx, loaded by any model opened

    if isinstance(e.__cause__, ReplyTooLarge):
        return str(e.__cause__)
    if isinstance(e, (openai.APIError, ReplayExhausted, AttemptDeadline, ReplyTooLarge)):
        return str(e)
    if isinstance(e, httpx.HTTPError):
        return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    if isinstance(e, IndexError):  # LangChain takes the first of no choices
        return "the server answered without a chat completion (no choices in the reply)"
    return f"the server answered without a chat completion ({type(e).__name__}: {e})"


TRANSIENT = frozenset({"rate_limit", "server", "timeout", "network"})
_HINTS = {"auth": "check OPENAI_API_KEY; a key goes only to the server it was given for (OPENAI_BASE_URL, the "
                  "base URL entered with it on Settings, or its endpoint's)", "model": "check the model name and the base URL",
          "network": "check the base URL and that the server is running",
          "context": "the request is longer than the model's context window; set the window (--context-tokens, "
                     "or the Settings page) so older observations are shortened to fit"}
#: A reply longer than this many characters per token of the reply cap (or than MAX_REPLY_CHARS without a cap) is
#: cut client-side and taken as cut off at the length limit: a server that ignores the cap must not fill the run
#: store, the checkpoints and every later prompt with megabytes.
REPLY_CHARS_PER_CAP_TOKEN, MAX_REPLY_CHARS = 4 * CHARS_PER_TOKEN, 200_000
#: An attempt's limits (AttemptLimits) from its time limit T: first piece of a stream within T x FIRST_TOKEN_FACTOR,
#: silence at most T, the whole reply within T x CEILING_FACTOR.
FIRST_TOKEN_FACTOR, CEILING_FACTOR = 3.0, 10.0
#: The client's own per-read timeout is this much past the limit it stands for: the attempt's watch abandons the
#: attempt first, naming the limit (the read timeout only ends a read still waiting for the response's headers).
READ_SLACK_S = 1.0
TIMEOUT_GROWTH, TIMEOUT_GROWTH_CAP = 1.5, 2.0  # a retry after a timeout waits longer, up to 2x the setting


def reply_chars(max_reply_tokens: int | None) -> int:
    """The most characters of a reply read: REPLY_CHARS_PER_CAP_TOKEN a token of the cap, at most MAX_REPLY_CHARS."""
    return min(max_reply_tokens * REPLY_CHARS_PER_CAP_TOKEN, MAX_REPLY_CHARS) if max_reply_tokens else MAX_REPLY_CHARS


def _retry_after(e: Exception) -> float | None:
    response = getattr(e, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(value), 60.0) if value else None
    except (ValueError, AttributeError):
        return None


class ChatLLM:
    """A chat model with the agents' calling conventions. ``label`` names it in traces (never the key)."""

    def __init__(self, model: BaseChatModel, label: str, *, estimate_usage: bool = False, max_retries: int = 0,
                 retry_base_s: float = 1.0, secret: str | None = None, sleep=time.sleep,
                 timeout_s: float | None = None, max_reply_tokens: int | None = None,
                 counter: Callable[[str], int | None] | None = None, counted_by: str | None = None,
                 streams: bool = False, window_from_error: Callable[[str], object] | None = None):
        self.model = model
        self._counter = counter  # the model's tokenizer (a tokenizer file's, or the server's), None: none known
        self._counts: dict[str, int] = {}  # the texts counted lately, oldest first
        self.counted_by = counted_by  # what counts: "tokenizer file NAME", "the server's tokenizer"
        self.label = label
        self._estimate = estimate_usage
        self._max_retries = max_retries
        self._retry_base_s = retry_base_s
        self._secret = secret
        self._sleep = sleep
        self._timeout_s = timeout_s  # the per-attempt timeout of a server model (None: the model's own)
        self._use_stop = True
        self._max_reply_chars = reply_chars(max_reply_tokens)
        self._cancelled = threading.Event()
        self._streams = streams  # asked with streaming where the server streams (falls back if it does not)
        self._window_from_error = window_from_error  # the window a context error states, remembered by server_info

    def count_tokens(self, text: str) -> int | None:
        """The tokens of ``text`` by the model's own tokenizer: the tokenizer file set, else the server's where it
        counts them (None: neither; ``counted_by`` says which). A text counted lately is not counted again (a
        transcript's messages are counted before and after each call)."""
        if not self._counter:
            return None
        if text in self._counts:
            return self._counts[text]
        tokens = self._counter(text)
        if tokens is not None:  # a count that failed is asked again next time
            if len(self._counts) >= COUNTS_KEPT:
                self._counts.pop(next(iter(self._counts)))
            self._counts[text] = tokens
        return tokens

    def cancel(self) -> None:
        """Make no further attempt of a call in flight (the analyst stopped its run): the attempt under way, which
        cannot be interrupted, is the last one the server gets."""
        self._cancelled.set()

    def _scrub(self, text: str) -> str:
        return secrets.scrub(text, [self._secret] if self._secret else None)

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict,
                on_text: Callable[[str], None] | None, flight: Flight | None):
        """The reply streamed (LangChain's ``stream``), each new piece given to ``on_text`` (only what is new) and
        counted in ``flight``; read up to the reply cap, where the stream is closed (the server sees the client
        gone) and the reply taken as cut off at the length limit. _NoStream when the server sent no chunk."""
        from langchain_core.messages import AIMessage  # heavy: loaded with the model

        meta, pieces, chars, cut = None, [], 0, False
        stream = self.model.stream(messages, stop=stop, **kwargs)
        try:
            for chunk in stream:
                if flight is not None and flight.abandoned:
                    break
                piece = _text(chunk.content)
                chunk = chunk.model_copy(update={"content": ""})  # merged without its text: no copy of it per piece
                meta = chunk if meta is None else meta + chunk
                if not piece:
                    continue
                if chars + len(piece) > self._max_reply_chars:
                    piece, cut = piece[:self._max_reply_chars - chars], True
                pieces.append(piece)
                chars += len(piece)
                if flight is not None:
                    flight.piece(len(piece))
                if on_text is not None and piece:
                    on_text(piece)
                if cut:
                    break
        finally:
            stream.close()  # closes the response: an abandoned or capped reply is not read on
        if meta is None:
            raise _NoStream("the server sent no chunk")
        if flight is not None and flight.unstreamed:  # the server answered plainly: asked so from now on
            self._streams = False
        metadata = dict(meta.response_metadata or {})
        if cut:
            metadata.update(finish_reason="length", cut_client_side=chars, stream_closed=True)
        return AIMessage("".join(pieces), response_metadata=metadata, usage_metadata=meta.usage_metadata)

    def _invoke(self, messages: list[BaseMessage], stop: list[str], limits: AttemptLimits | None,
                on_text: Callable[[str], None] | None = None, flight: Flight | None = None):
        """The reply, streamed where the server streams, else whole. The client's own per-read timeout: for a
        stream its first piece's limit (a later silence is watched by ``_invoke_within``), else the ceiling."""
        stops = stop if self._use_stop else None
        try:
            if self._streams:
                import openai

                kwargs = {"timeout": limits.first_token_s + READ_SLACK_S} if limits else {}
                try:
                    return self._stream(messages, stops, kwargs, on_text, flight)
                except (_NoStream, openai.BadRequestError, openai.UnprocessableEntityError,
                        openai.APIResponseValidationError, ValueError) as e:
                    if (flight is not None and (flight.abandoned or flight.first is not None)) or (
                            isinstance(e, openai.APIStatusError) and "stream" not in str(e).lower()):
                        raise
                    # a server that does not stream (or not as OpenAI's does): asked without streaming from now on
                    self._streams = False
            return self.model.invoke(messages, stop=stops,
                                     **({"timeout": limits.ceiling_s + READ_SLACK_S} if limits else {}))
        except Exception as e:
            import openai

            if not isinstance(e, openai.BadRequestError):
                raise
            # Some models (reasoning models) refuse stop sequences or a temperature other than their default:
            # go on without them (cutting the reply client-side); and some take the reply cap only by its new name.
            if self._use_stop and "'stop'" in str(e):
                self._use_stop = False
                return self._invoke(messages, stop, limits, on_text, flight)
            if "temperature" in str(e) and getattr(self.model, "temperature", None) is not None:
                self.model.temperature = None
                return self._invoke(messages, stop, limits, on_text, flight)
            # A compatible server that wants the reply cap as max_completion_tokens (e.g. Azure's reasoning models)
            cap = (getattr(self.model, "extra_body", None) or {}).get("max_tokens")
            if cap and "max_completion_tokens" in str(e):
                self.model.extra_body = None
                self.model.max_tokens = cap  # LangChain sends it as max_completion_tokens
                return self._invoke(messages, stop, limits, on_text, flight)
            raise

    def _invoke_within(self, messages: list[BaseMessage], stop: list[str], limits: AttemptLimits | None,
                       on_text: Callable[[str], None] | None = None, flight: Flight | None = None):
        """``_invoke`` kept to the attempt's ``limits``: read in a thread while this one watches the time; at a
        limit the attempt is abandoned (its connection shut, so the server stops where it checks) and
        AttemptDeadline raised, naming the limit."""
        if limits is None:
            return self._invoke(messages, stop, None, on_text, flight)
        from core.llm import transport  # heavy: httpx, loaded with the model

        flight = flight or transport.Flight()
        box: dict = {}
        context = contextvars.copy_context()

        def work():
            transport.current.set(flight)
            try:
                box["reply"] = self._invoke(messages, stop, limits, on_text, flight)
            except BaseException as e:  # handed to the caller
                box["error"] = e
            finally:
                flight.finish()

        threading.Thread(target=context.run, args=(work,), name="llm-attempt", daemon=True).start()
        with flight.changed:
            while not flight.done:
                due, why = _due(flight, limits, self._streams)
                left = due - time.monotonic()
                if left <= 0:
                    break
                flight.changed.wait(left)
        if not flight.done:
            flight.abandon()
            raise AttemptDeadline(f"Request timed out: {why}; the attempt was abandoned and its connection closed")
        if "error" in box:
            raise box["error"]
        return box["reply"]

    def complete(self, messages: list[BaseMessage], stop: list[str],
                 on_retry: Callable[[dict], None] | None = None,
                 on_text: Callable[[str], None] | None = None,
                 on_attempt: Callable[[dict], None] | None = None) -> Completion:
        """One reply to ``messages``; LLMError when the call fails for good. ``on_retry`` gets each failed attempt
        that is retried (with ``retry_in_s``), ``on_text`` each piece of a streamed reply as it is written (a view),
        ``on_attempt`` each attempt as it starts. The tokens an abandoned attempt spent are summed in the
        Completion's ``failed_*_tokens``."""
        from core.llm import transport  # heavy: httpx, loaded with the model

        attempts: list[dict] = []
        first = time.perf_counter()
        timeout_s = self._timeout_s
        for attempt in range(self._max_retries + 1):
            start, started_at = time.perf_counter(), time.time()
            limits = AttemptLimits(timeout_s) if timeout_s else None
            record = {"attempt": attempt + 1, "start": round(started_at, 3), "timeout_s": timeout_s}
            if on_attempt:
                on_attempt({"attempt": attempt + 1, "of": self._max_retries + 1, "timeout_s": timeout_s,
                            **(limits.as_dict() if limits else {}), "streams": self._streams})
            flight = transport.Flight()
            try:
                message = self._invoke_within(messages, stop, limits, on_text, flight)
            except Exception as e:
                kind = _error_kind(e)
                if kind is None:
                    raise
                detail = self._scrub(_detail(e))
                spent = {"prompt_tokens": _prompt_estimate(messages), "completion_tokens": round(
                    flight.chars / CHARS_PER_TOKEN), "tokens_estimated": True} if kind == "timeout" else {}
                attempts.append({**record, "duration_s": round(time.perf_counter() - start, 4),
                                 "error_kind": kind, "error": detail, **spent})
                if kind not in TRANSIENT or attempt == self._max_retries or self._cancelled.is_set():
                    hint = f" ({_HINTS[kind]})" if kind in _HINTS else ""
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    window = self._window_from_error(detail) if kind == "context" and self._window_from_error else None
                    raise LLMError(kind, self._scrub(f"{kind} error{tries}{hint}: {self.label}: {detail}"),
                                   attempts, window) from None
                delay = _retry_after(e) or (min(self._retry_base_s * 2 ** attempt, 30.0)
                                            * (1 + 0.25 * random.random()))
                if kind == "timeout" and timeout_s:
                    timeout_s = min(timeout_s * TIMEOUT_GROWTH, self._timeout_s * TIMEOUT_GROWTH_CAP)
                if on_retry:
                    on_retry({**attempts[-1], "retry_in_s": round(delay, 3), "of": self._max_retries + 1})
                self._sleep(delay)
                if self._cancelled.is_set():
                    raise LLMError(kind, self._scrub(f"{kind} error: {self.label}: {detail}; no retry: the run was "
                                                     "stopped"), attempts)
            else:
                break
        latency = time.perf_counter() - start
        attempts.append({**record, "duration_s": round(latency, 4), "error_kind": None, "error": None})
        content = _text(message.content)
        metadata, full = dict(getattr(message, "response_metadata", None) or {}), content
        if len(content) > self._max_reply_chars:  # the server ignored the reply cap
            metadata.update(finish_reason="length", cut_client_side=len(content))
            content = content[:self._max_reply_chars]
        text = cut_reply(content)
        usage = getattr(message, "usage_metadata", None)
        exact = bool(usage) and not self._estimate
        if exact:  # the abandoned attempts sent the same request: the server's count of it
            for a in attempts:
                if "prompt_tokens" in a:
                    a.update(prompt_tokens=usage.get("input_tokens", 0) or a["prompt_tokens"])
        failed = [a for a in attempts if "prompt_tokens" in a]
        extra = {"wait_s": round(time.perf_counter() - first, 4), "attempts": attempts,
                 "finish_reason": metadata.get("finish_reason"), "metadata": _plain(metadata),
                 "failed_prompt_tokens": sum(a["prompt_tokens"] for a in failed),
                 "failed_completion_tokens": sum(a["completion_tokens"] for a in failed), "raw": content}
        if exact:
            return Completion(text, usage.get("input_tokens", 0), usage.get("output_tokens", 0), latency, False,
                              counted_by=REPORTED, **extra)
        try:
            prompt, reply = self._count(messages), self.count_tokens(full) if full else 0
        except Exception:  # noqa: BLE001 - a tokenizer that fails counts nothing: the characters say
            prompt = reply = None
        if prompt is None or reply is None:
            return Completion(text, _prompt_estimate(messages), estimate_tokens(full), latency, True,
                              counted_by=f"characters ({CHARS_PER_TOKEN} a token)", **extra)
        return Completion(text, prompt, reply, latency, True, counted_by=self.counted_by, **extra)

    def _count(self, messages: list[BaseMessage]) -> int | None:
        """A request's tokens by the model's tokenizer, the chat template's added (None: no tokenizer known)."""
        if not self._counter:
            return None
        counts = [self.count_tokens(_text(m.content)) or 0 for m in messages]
        return sum(counts) + CHAT_TEMPLATE_TOKENS * (len(messages) + 1) if any(counts) else None


def _prompt_estimate(messages: list[BaseMessage]) -> int:
    return sum(estimate_tokens(m.content if isinstance(m.content, str) else str(m.content)) for m in messages)


def _due(flight: Flight, limits: AttemptLimits, streams: bool) -> tuple[float, str]:
    """When the attempt in ``flight`` is to be abandoned unless more comes, and the limit that says so."""
    ceiling = (flight.began + limits.ceiling_s,
               f"the whole reply took longer than its ceiling of {limits.ceiling_s:.1f} s" if flight.first else
               f"no reply within {limits.ceiling_s:.1f} s (the whole reply's ceiling)")
    if not streams:
        return ceiling
    if flight.first is None:
        phase = (flight.began + limits.first_token_s,
                 f"no first token within {limits.first_token_s:.1f} s (the first-token limit)")
    else:
        phase = (flight.latest + limits.idle_s,
                 f"nothing arrived for {limits.idle_s:.1f} s after {flight.chars:,} characters (the idle limit "
                 "between pieces)")
    return min(phase, ceiling)


class _NoStream(Exception):
    """A streamed request that gave no chunk."""


def _text(content) -> str:
    """A message's (or chunk's) content as text."""
    return content if isinstance(content, str) else "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def _plain(value):
    """``value`` as JSON-ready data (response metadata may hold objects)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return {}


def base_url_problem(url: str | None) -> str | None:
    """What is wrong with an OpenAI-compatible server's base URL, with the fix; None when it looks right."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return (f"the base URL {url!r} must start with http:// or https://, e.g. "
                f"http://{url.strip().split('://')[-1]}")
    return None


OPENAI_URL = "https://api.openai.com/v1"


def _server(url: str | None) -> tuple:
    """What names one server: scheme, host, port and path (no base URL: OpenAI's API)."""
    parts = urlsplit((url or OPENAI_URL).strip())
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port, parts.path.rstrip("/")


def bound_key(settings: LLMSettings, base_url: str | None = None) -> str | None:
    """The API key to send to ``base_url`` (default the settings' own): the settings' key only when it was given for
    that very server (``key_url``), else None. A key is never sent to a server it was not configured for."""
    url = settings.base_url if base_url is None else base_url
    if settings.api_key and _server(settings.key_url) == _server(url):
        return settings.api_key
    return None


def is_openai(base_url: str | None) -> bool:
    """Whether the server is OpenAI's own API (no base URL, or api.openai.com)."""
    return not base_url or urlsplit(base_url).hostname == "api.openai.com"


#: OpenAI reasoning models take only their default temperature (o1, o3, o4-mini, gpt-5 but not gpt-5-chat).
_FIXED_TEMPERATURE = re.compile(r"^(o\d|gpt-5(?!-chat))", re.I)


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
        from core.llm.replay_model import ReplayChatModel  # heavy: loads langchain_core

        model = ReplayChatModel(messages=iter(replies[skip:]), source=str(path), count=len(replies))
        return ChatLLM(model, f"replay:{path.name}", estimate_usage=True, **_tokenizer_file(settings))
    import httpx  # heavy: loaded with the model
    from langchain_openai import ChatOpenAI

    problem = base_url_problem(settings.base_url)
    if problem:
        raise LLMNotConfigured(problem)
    secrets.register(settings.api_key)
    key = bound_key(settings)
    if not key:
        if not settings.base_url:
            elsewhere = (f" (the key set is for {settings.key_url}, and a key goes only to the server it was given "
                         "for)") if settings.api_key else ""
            raise LLMNotConfigured(f"model {spec!r} needs an API key for OpenAI's API{elsewhere}: set "
                                   "OPENAI_API_KEY, or set OPENAI_BASE_URL (--base-url) to an OpenAI-compatible "
                                   "server")
        key = "unused"  # local servers take any key; a key given for another server is never sent
    cap = settings.max_reply_tokens
    options = {}
    if cap:
        # OpenAI takes max_completion_tokens (what LangChain sends); llama.cpp, vLLM and Ollama servers know
        # max_tokens (llama.cpp ignores the other).
        options = {"max_tokens": cap} if is_openai(settings.base_url) else {"extra_body": {"max_tokens": cap}}
    temperature = None if is_openai(settings.base_url) and _FIXED_TEMPERATURE.match(spec) else settings.temperature
    if settings.top_p is not None:
        options["top_p"] = settings.top_p
    if settings.seed is not None:  # OpenAI, vLLM and llama.cpp take a seed; a server that ignores it still answers
        options["seed"] = settings.seed
    from core.llm import server_info  # heavy: httpx
    from core.llm.transport import CappedTransport, proxy_for, tls  # heavy: httpx

    transport = CappedTransport(reply_chars(cap), proxy=proxy_for(settings.base_url or OPENAI_URL))
    client = httpx.Client(transport=transport, timeout=settings.timeout_s, follow_redirects=True)
    # never used (calls are synchronous): given so that LangChain makes none with a TLS context of its own
    unused = httpx.AsyncClient(verify=tls())
    model = ChatOpenAI(model=spec, base_url=settings.base_url, api_key=key, temperature=temperature,
                       timeout=settings.timeout_s, max_retries=0, stream_usage=True, http_client=client,
                       http_async_client=unused, **options)
    label = f"{spec} @ {settings.base_url}" if settings.base_url else spec
    counting = _tokenizer_file(settings)
    if not counting and settings.server_tokenizer and settings.base_url and not is_openai(settings.base_url):
        counting = {"counter": partial(server_info.count_tokens, settings.base_url, spec, bound_key(settings)),
                    "counted_by": SERVER_TOKENIZER}
    learn = partial(server_info.window_from_error, settings.base_url, spec, bound_key(settings))
    return ChatLLM(model, label, max_retries=settings.max_retries, retry_base_s=settings.retry_base_s,
                   secret=settings.api_key, timeout_s=settings.timeout_s, max_reply_tokens=cap, streams=True,
                   window_from_error=learn if settings.base_url else None, **counting)


def _tokenizer_file(settings: LLMSettings) -> dict:
    """The counter of the tokenizer file the settings name, as ChatLLM takes it ({} when none is set);
    LLMNotConfigured when it cannot be used."""
    if not settings.tokenizer:
        return {}
    try:
        return {"counter": tokenizer_file.open_tokenizer(settings.tokenizer),
                "counted_by": tokenizer_file.counted_by(settings.tokenizer)}
    except tokenizer_file.TokenizerFileError as e:
        raise LLMNotConfigured(str(e)) from None
