"""Connection tests for the Settings page: the LLM (a one-token call; for a replay, that its file parses) and the
DQA directory (core.scenarios.dqa.source.check_dqa). Each returns a short success message or raises with the reason."""
from __future__ import annotations

from dataclasses import replace

from core.llm.client import (REPLAY_PREFIX, LLMError, LLMNotConfigured, LLMSettings, bound_key, is_openai, open_llm,
                             read_replay, replay_path)
from core.config.secrets import scrub
from core.model.quantities import number

TEST_TIMEOUT_S = 30.0


def check_llm(settings: LLMSettings) -> str:
    """Ask the configured model for one token (no retries). Raises LLMError with the reason, never the key."""
    spec = settings.model or ""
    if spec.startswith(REPLAY_PREFIX):
        path = replay_path(spec)
        replies = read_replay(path)
        if not replies:
            raise LLMNotConfigured(f"replay file {path} holds no replies")
        return f"replay file {path} holds {len(replies)} replies"
    llm = open_llm(settings=replace(settings, max_reply_tokens=1, max_retries=0,
                                    timeout_s=min(settings.timeout_s, TEST_TIMEOUT_S)))
    try:
        from langchain_core.messages import HumanMessage  # heavy: only when a model is tried (Settings opens without)

        reply = llm.complete([HumanMessage("Reply with one word: OK")], stop=[])
    except LLMError:
        raise
    except Exception as e:  # a client error the LLM layer does not classify (e.g. a malformed base URL)
        raise LLMError("config", scrub(f"{llm.label}: {type(e).__name__}: {e}", [settings.api_key])) from None
    counting = f"; tokens counted by {llm.counted_by}" if settings.tokenizer else ""
    return f"{llm.label} answered in {number(reply.latency_s, decimals=1)} s; {window_text(settings)}{counting}"


def window_text(settings: LLMSettings) -> str:
    """The context window a run of this model assumes and where it came from, as Settings says it."""
    if not settings.base_url or is_openai(settings.base_url):
        return "context window: OpenAI's API does not say it (set one under Limits to keep requests within it)"
    from core.llm.server_info import detect_window  # heavy: httpx (45 ms), for a page that may never ask

    found = detect_window(settings.base_url, settings.model or "", bound_key(settings))
    if found is None:
        return ("context window: the server does not say it, so nothing is shortened until a request passes it and "
                "the server's error states it (set one under Limits to keep requests within it)")
    return f"context window: {number(found.tokens, decimals=0)} tokens, from {found.source}"

