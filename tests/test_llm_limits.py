"""A reply still arriving is never cut, an abandoned attempt costs nothing hidden (issue 45 items 1-2), and a model
server sending without end is read only up to the reply cap (issue 44 section D). Against the hostile stubs of
tests/hostile_stub.py on free local ports."""
from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from core.llm.client import AttemptLimits, LLMError, LLMSettings, open_llm
from core.llm.transport import BODY_BYTES_PER_CHAR, SLACK_BYTES
from tests.hostile_stub import EndlessStream, HugeReply, PacedStream

MESSAGES = [HumanMessage("Question: where?")]


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.close()


def _llm(url: str, **kw):
    llm = open_llm("stand-in", LLMSettings(**{"base_url": url, "api_key": None, "max_retries": 0, **kw}))
    llm._sleep = lambda s: None
    return llm


def test_a_stream_still_flowing_is_never_cut_however_long_it_takes(servers):
    """Pieces every 0.1 s for about 3 s, with a 1 s limit: the old whole-attempt deadline (1.75 s) cut this reply;
    silence is what counts now, and there is none longer than the idle limit."""
    pieces = [(0.1, f"w{i} ") for i in range(30)]
    servers.append(server := PacedStream([pieces]))
    seen = []
    c = _llm(server.url, timeout_s=1.0).complete(MESSAGES, [], on_text=seen.append)
    assert c.text == "".join(p for _, p in pieces).strip() and c.finish_reason == "stop"
    assert len(c.attempts) == 1 and seen == [p for _, p in pieces]  # one attempt; only what is new each time


def test_the_first_token_may_take_longer_than_the_idle_limit(servers):
    """A server reading a long prompt sends nothing for a while: 1.5 s before the first piece is within the
    first-token limit (3 x 1 s), though past the idle limit (1 s)."""
    servers.append(server := PacedStream([[(1.5, "Final answer: "), (0.05, "krakow")]]))
    c = _llm(server.url, timeout_s=1.0).complete(MESSAGES, [])  # nobody follows the text: streamed all the same
    assert c.text == "Final answer: krakow" and len(c.attempts) == 1 and server.requests[0]["stream"] is True


def test_silence_past_the_first_token_limit_is_a_timeout_that_says_so(servers):
    servers.append(server := PacedStream([[(30, "late")]]))
    with pytest.raises(LLMError, match=r"no first token within 0\.6 s \(the first-token limit\)") as e:
        _llm(server.url, timeout_s=0.2).complete(MESSAGES, [])
    assert e.value.kind == "timeout"
    assert server.gone.wait(10)  # the server, still reading the prompt, sees the client gone


def test_a_stream_gone_silent_is_abandoned_its_connection_closed_and_its_tokens_counted(servers):
    """Silent mid-reply past the idle limit: the attempt ends as a timeout naming the idle limit, the server
    sees the client gone (it stops generating), the retry answers, and what the abandoned attempt spent (the
    prompt, as the server counted it on the retry, and the text read) is counted and marked."""
    stalled = [(0.0, "Thought: I am "), (0.0, "thinking"), (30, " more")]
    servers.append(server := PacedStream([stalled, [(0.0, "Final answer: krakow")]]))
    retried = []
    c = _llm(server.url, timeout_s=0.3, max_retries=1).complete(MESSAGES, [], on_retry=retried.append)
    assert c.text == "Final answer: krakow"
    first = c.attempts[0]
    assert first["error_kind"] == "timeout" and "the idle limit between pieces" in first["error"]
    assert "connection closed" in first["error"] and "after 22 characters" in first["error"]
    assert server.gone.wait(10)  # the server's next write failed: the client had shut the connection
    assert (first["prompt_tokens"], first["completion_tokens"]) == (100, 6)  # the server's count; 22 chars read
    assert (c.failed_prompt_tokens, c.failed_completion_tokens) == (100, 6)
    assert retried and retried[0]["prompt_tokens"] > 0  # the retry event says what it spent


def test_the_attempt_limits_the_status_line_states_are_those_that_bind():
    from ui.run_view import _limits

    limits = AttemptLimits(60.0)
    assert (limits.first_token_s, limits.idle_s, limits.ceiling_s) == (180.0, 60.0, 600.0)
    assert _limits({"streams": True, **limits.as_dict()}) == (
        ", first words within 3 min 00 s, then cut only after 1 min 00 s of silence, whole reply within 10 min 00 s")
    assert _limits({"streams": False, **limits.as_dict()}) == ", whole reply within 10 min 00 s"


# --- hostile servers (issue 44 section D) ---

def test_a_stream_that_never_ends_is_read_up_to_the_reply_cap_then_closed(servers):
    servers.append(server := EndlessStream())
    pieces = []
    c = _llm(server.url, max_reply_tokens=100, timeout_s=30).complete(MESSAGES, [], on_text=pieces.append)
    assert c.finish_reason == "length" and c.metadata["stream_closed"]
    assert len(c.text) <= 100 * 16 and sum(map(len, pieces)) == 100 * 16  # the view got no more than the cap
    assert server.gone.wait(10)  # the call ended at the cap: the server's writes failed
    # it stopped long before its bound of 5,000,000 pieces (what it wrote past the 6,554 read sat in socket buffers)
    assert server.pieces < 200_000


@pytest.mark.parametrize("announce", [False, True], ids=["unannounced", "content-length"])
def test_a_300_mb_reply_is_read_only_up_to_its_byte_cap(servers, announce):
    servers.append(server := HugeReply(announce=announce))
    llm = _llm(server.url, max_reply_tokens=100, timeout_s=30)
    with pytest.raises(LLMError, match=r"far more than the reply cap allows") as e:
        llm.complete(MESSAGES, [])
    assert e.value.kind == "server"
    server.gone.wait(10)
    cap = 100 * 16 * BODY_BYTES_PER_CHAR + SLACK_BYTES
    assert server.sent_bytes < cap + (32 << 20)  # far from 300 MB: reading stopped at the cap (socket buffers aside)


def test_the_page_draws_at_most_the_end_of_a_long_reply_in_flight():
    """A reply in flight of 200,000 characters: each redraw sends its last LIVE_REPLY_CHARS characters (and how
    long it is so far), not the whole text (the browser got 8 MB frames and froze)."""
    from streamlit.testing.v1 import AppTest

    def page():
        from ui.run_view import _show_reply

        _show_reply(lambda: "".join(f"w{i} " for i in range(40_000)), {})

    at = AppTest.from_function(page).run()
    from ui.run_view import LIVE_REPLY_CHARS

    shown = at.caption[0].value
    assert len(shown) < LIVE_REPLY_CHARS + 100 and "characters so far" in shown and shown.endswith("w39999")


def test_the_capped_transport_keeps_the_environments_proxy(monkeypatch):
    """The model client's own transport goes through the proxy the environment names, as httpx's would."""
    from core.llm.transport import proxy_for

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert proxy_for("https://api.openai.com/v1") == "http://proxy.example:3128"
    assert proxy_for("http://127.0.0.1:8080/v1") is None
