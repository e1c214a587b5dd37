"""The LLM reply cache: replies kept on disk (SQLite) or in the team store, keyed by the model, its parameters (temperature, stop
sequences, max reply tokens, base URL; top-p and seed when set; the sample number of a benchmark epoch after
the first) and the full prompt (every message), so an identical rerun costs
nothing and repeats itself exactly.

:class:`CachingLLM` stands in for a :class:`core.llm.client.ChatLLM`: it answers from the cache when it can and opens
the model only at its first miss (a replay then starts at the right reply; a fully cached run needs no key).
:func:`caching_opener` makes the ``llm_opener`` that AgentRuntime takes.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from langchain_core.messages import BaseMessage

from sims.files import read_bytes

from core.benchmark.budget import Budget
from core.store.database import Database, is_url, location, upsert
from core.llm.client import REPLAY_PREFIX, ChatLLM, Completion, LLMSettings, open_llm, replay_path
from core.llm.tokenizer_file import counted_by, open_tokenizer


def _set_up(con: sqlite3.Connection) -> None:
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA synchronous = NORMAL")  # a killed process keeps every committed reply
    con.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, created REAL, data TEXT)")


class ReplyCache:
    """Replies by key, in one SQLite file or the team store; safe to share between threads and processes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        target = location(self.path)
        if not is_url(target):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = Database(target, "LLM reply cache", _set_up)

    def get(self, key: str) -> Completion | None:
        rows = self.db.rows("SELECT data FROM replies WHERE key = ?", (key,))
        return Completion(**json.loads(rows[0][0])) if rows else None

    def put(self, key: str, model: str, completion: Completion) -> None:
        with self.db.transaction() as con:
            con.execute(upsert("replies", ("key", "model", "created", "data"), ("key",)),
                        (key, model, time.time(), json.dumps(asdict(completion))))

    def close(self) -> None:
        self.db.close()


def model_identity(spec: str) -> str:
    """What names the model in a key: its name, or for a replay the hash of the file's bytes (an edited
    transcript is a different model)."""
    if not spec.startswith(REPLAY_PREFIX):
        return spec
    path = replay_path(spec)
    try:
        return "replay:" + hashlib.sha256(read_bytes(path, "replay file")).hexdigest()
    except OSError:
        return f"replay:{path}"  # missing: opening it reports the error


def cache_key(identity: dict, stop: list[str], messages: list[BaseMessage]) -> str:
    """The key of one call: model and parameters (``identity``), stop sequences and every message."""
    prompt = [[m.type, m.content] for m in messages]
    text = json.dumps({**identity, "stop": stop, "messages": prompt}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class CachingLLM:
    """A ChatLLM stand-in for benchmarks: a reply cache (None: none), a wait before each model call (``throttle``),
    a gate each call passes (``gate``: calls at once, told of timeouts) and a budget each call is reserved in.
    ``calls``, ``hits`` and ``wait_s`` count model calls, cached replies and time in ``complete``; tokens are
    counted with the tokenizer file of ``settings`` when set."""

    def __init__(self, opener: Callable[[int], ChatLLM], identity: dict, cache: ReplyCache | None,
                 throttle: Callable[[], None] | None = None, gate=None, budget: Budget | None = None,
                 settings: LLMSettings | None = None):
        self._opener = opener  # answered -> the model, positioned after the replies already given
        tokenizer = settings.tokenizer if settings else None
        self.count_tokens = open_tokenizer(tokenizer) if tokenizer else None
        self.counted_by = counted_by(tokenizer) if tokenizer else None
        self._identity = identity
        self._cache = cache
        self._throttle = throttle
        self._gate = gate
        self._budget = budget
        self._model: ChatLLM | None = None
        self.calls = self.hits = 0
        self.wait_s = 0.0
        self.first_call_at: float | None = None  # perf_counter at the first complete()

    def cancel(self) -> None:
        """ChatLLM.cancel of the model (opened at the first call that is not cached)."""
        if self._model is not None:
            self._model.cancel()

    def complete(self, messages: list[BaseMessage], stop: list[str], on_retry=None) -> Completion:
        """The cached reply (``cached``, its original latency, no attempts now), else the model's (stored)."""
        start = time.perf_counter()
        self.first_call_at = self.first_call_at or start
        try:
            key = cache_key(self._identity, stop, messages) if self._cache else None
            cached = self._cache.get(key) if key else None
            if cached:
                self.hits += 1
                return replace(cached, cached=True, attempts=[], wait_s=round(time.perf_counter() - start, 4),
                               failed_prompt_tokens=0, failed_completion_tokens=0)  # nothing abandoned now
            if self._budget:
                self._budget.reserve()  # BudgetReached at a cap
            try:
                if self._model is None:
                    self._model = self._opener(self.hits + self.calls)
                completion = self._call(messages, stop, on_retry)
            except BaseException as e:
                if self._budget:
                    self._budget.release(getattr(e, "attempts", None) or [])  # an LLMError's abandoned attempts
                raise
            if self._budget:
                self._budget.settle(completion)
            self.calls += 1
            if key:
                self._cache.put(key, self._identity["model"], completion)
            return completion
        finally:
            self.wait_s += time.perf_counter() - start

    def _call(self, messages: list[BaseMessage], stop: list[str], on_retry) -> Completion:
        """The model's reply, after the throttle and through the gate, with the time waited for it (``wait_s``:
        the model's attempts, and the throttle and the gate before them)."""
        waiting = time.perf_counter()
        if self._throttle:
            self._throttle()
        if self._gate is None:
            completion = self._model.complete(messages, stop, on_retry=on_retry)
        else:
            with self._gate:
                completion = self._model.complete(messages, stop, on_retry=self._gate.watch(on_retry))
        return replace(completion, wait_s=max(completion.wait_s or 0.0, round(time.perf_counter() - waiting, 4)))


def caching_opener(cache: ReplyCache | None, throttle: Callable[[], None] | None = None,
                   on_open: Callable[[CachingLLM], None] | None = None, gate=None, budget: Budget | None = None,
                   sample: Callable[[], int] | None = None):
    """An ``llm_opener`` for AgentRuntime (open_llm's signature) giving CachingLLMs with ``gate`` and ``budget``;
    ``on_open`` sees each. ``sample`` gives the opening thread's epoch: epochs after the first are keyed apart, so
    each asks the model anew and a rerun of epoch e is served epoch e's own reply."""

    def opener(spec: str, settings: LLMSettings, *, skip: int = 0) -> CachingLLM:
        replay = spec.startswith(REPLAY_PREFIX)
        identity = {"model": model_identity(spec), "temperature": settings.temperature,
                    "max_tokens": settings.max_reply_tokens, "base_url": None if replay else settings.base_url}
        for option in ("top_p", "seed"):  # only when set, so earlier cached replies stay keyed as they were
            if getattr(settings, option, None) is not None:
                identity[option] = getattr(settings, option)
        if sample and sample() > 1:  # epoch 1 keeps the key it always had
            identity["sample"] = sample()
        llm = CachingLLM(lambda answered: open_llm(spec, settings, skip=skip + answered), identity, cache, throttle,
                         gate, budget, settings)
        if on_open:
            on_open(llm)
        return llm

    return opener
