"""Connection tests for the Settings page: the LLM (a one-token call; for a replay, that its file parses) and the
DQA directory (core.scenarios.dqa.source.check_dqa). Each returns a short success message or raises with the reason."""
from __future__ import annotations

from dataclasses import replace

from core.llm.client import REPLAY_PREFIX, LLMError, LLMNotConfigured, LLMSettings, open_llm, read_replay, replay_path
from core.config.secrets import scrub

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
    return f"{llm.label} answered in {reply.latency_s:.1f} s"

