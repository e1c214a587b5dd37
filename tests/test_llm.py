"""core.llm.client: configuration errors, the replay model, and ChatOpenAI against a local stand-in server (no network):
stop sequences, usage, retries with backoff, auth errors, and the API key kept out of messages."""
from __future__ import annotations

import json
import socket
import threading

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from core.config import secrets
from core.llm.client import LLMError, LLMNotConfigured, LLMSettings, cut_reply, estimate_tokens, open_llm
from tests.stub_server import StubServer, completion, send, send_json, send_stream

KEY = "sk-test-DO-NOT-LEAK-1234567890"
STOP = ["\nObservation:"]
HANG = 0  # a StandIn status: never answer
DRIP = -1  # a StandIn status: send the headers, then a space every DRIP_EVERY_S (at most DRIP_BYTES), then the reply
DRIP_EVERY_S, DRIP_BYTES = 0.05, 100


class StandIn(StubServer):
    """A local OpenAI-compatible server answering chat completions from a script of (status, body) pairs (other
    requests, e.g. Ollama's /api/show, 404): a dict body is sent as
    JSON, a str as an HTML page; status HANG never answers (until the server closes), as a stuck server; status DRIP
    trickles its reply (a dict) a space at a time, as a server that keeps the connection busy but never finishes."""

    def __init__(self, script: list[tuple[int, dict | str]]):
        self.script = list(script)
        self.requests: list[dict] = []
        self.closing = threading.Event()
        super().__init__({"POST /v1/chat/completions": self._chat})  # no Ollama /api/show, no /tokenize

    def _chat(self, handler, body: dict) -> None:
        status, payload = self.script[0]
        if body.get("stream") and status != HANG and not (status == 200 and isinstance(payload, dict)
                                       and (payload.get("choices") or [{}])[0].get("message")):
            # what is scripted is no streamed completion: this server does not stream (the client asks again)
            return send_json(handler, 400, {"error": {"message": "streaming is not supported", "type": "x"}})
        self.requests.append({"path": handler.path, "auth": handler.headers.get("Authorization"), "body": body})
        self.script.pop(0)
        if status == HANG:
            self.closing.wait()
        elif status == DRIP:
            self._drip(handler, b" " * DRIP_BYTES + json.dumps(payload).encode())
        elif isinstance(payload, str):
            send(handler, status, payload.encode(), "text/html")
        elif body.get("stream"):
            send_stream(handler, payload)  # a completion asked for as a stream is streamed
        else:
            send_json(handler, status, payload)

    def _drip(self, handler, data: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        try:
            for _ in range(DRIP_BYTES):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                if self.closing.wait(DRIP_EVERY_S):
                    return
            handler.wfile.write(data[DRIP_BYTES:])
        except OSError:  # the client gave up
            pass

    def close(self):
        self.closing.set()
        super().close()


@pytest.fixture
def serve():
    servers = []

    def start(*script):
        servers.append(StandIn(list(script)))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def _settings(url: str, **kw) -> LLMSettings:
    return LLMSettings(model="stand-in", base_url=url, api_key=KEY, key_url=url, retry_base_s=0.001, **kw)


MESSAGES = [SystemMessage("You are a decision-making agent."), HumanMessage("Question: where?")]


def test_no_model_configured_says_what_to_set(monkeypatch):
    for name in ("OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LLMNotConfigured, match="no LLM configured.*OPENAI_MODEL.*replay:FILE"):
        open_llm()
    with pytest.raises(LLMNotConfigured, match="OPENAI_API_KEY"):
        open_llm("gpt-4")


def test_settings_come_from_the_environment_and_hide_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_MODEL", "m1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    s = LLMSettings()
    assert (s.model, s.base_url, s.api_key) == ("m1", "http://localhost:8000/v1", KEY)
    assert KEY not in repr(s)
    assert s.temperature == 0.0


def test_local_server_needs_no_key(serve):
    server = serve((200, completion("Thought: hi")))
    llm = open_llm("stand-in", LLMSettings(base_url=server.url, api_key=None))
    assert llm.complete(MESSAGES, STOP).text == "Thought: hi"


def test_stop_sequences_usage_and_client_side_cut(serve):
    server = serve((200, completion("Thought: t\nAction: Graph DB\nAction input: MATCH (n) RETURN n\n"
                                     "Observation: made up", 120, 30)))
    llm = open_llm(None, _settings(server.url))
    c = llm.complete(MESSAGES, STOP)
    assert c.text.endswith("RETURN n") and "made up" not in c.text
    assert (c.prompt_tokens, c.completion_tokens, c.estimated) == (120, 30, False)
    body = server.requests[0]["body"]
    assert body["stop"] == STOP and body["temperature"] == 0.0 and body["model"] == "stand-in"
    assert server.requests[0]["auth"] == f"Bearer {KEY}"


def test_rate_limits_and_server_errors_are_retried(serve):
    server = serve((429, {"error": {"message": "slow down"}}), (503, {"error": {"message": "busy"}}),
                   (200, completion("Final answer: krakow")))
    sleeps = []
    llm = open_llm(None, _settings(server.url))
    llm._sleep = sleeps.append
    assert llm.complete(MESSAGES, STOP).text == "Final answer: krakow"
    assert len(server.requests) == 3 and len(sleeps) == 2 and sleeps[1] > sleeps[0] > 0


def test_retries_give_up_with_a_clear_error(serve):
    server = serve(*[(500, {"error": {"message": "down"}})] * 3)
    llm = open_llm(None, _settings(server.url, max_retries=2))
    llm._sleep = lambda s: None
    with pytest.raises(LLMError, match="server error after 3 attempts") as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "server"


def test_an_unreachable_server_is_a_network_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    llm = open_llm(None, _settings(f"http://127.0.0.1:{port}/v1", max_retries=1))
    with pytest.raises(LLMError, match="check the base URL") as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "network"


def test_auth_error_is_not_retried_and_hides_the_key(serve):
    server = serve((401, {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}))
    llm = open_llm(None, _settings(server.url))
    with pytest.raises(LLMError) as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "auth" and "OPENAI_API_KEY" in str(e.value)
    assert KEY not in str(e.value) and len(server.requests) == 1


def test_a_model_refusing_stop_sequences_is_called_without_them(serve):
    server = serve((400, {"error": {"message": "Unsupported parameter: 'stop' is not supported with this model."}}),
                   (200, completion("Thought: ok\nObservation: x")))
    llm = open_llm(None, _settings(server.url))
    assert llm.complete(MESSAGES, STOP).text == "Thought: ok"
    assert "stop" not in server.requests[1]["body"]


def test_replay_plays_back_in_order_with_estimated_usage(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(["Thought: one\nObservation: fake", "Final answer: two"]))
    llm = open_llm(f"replay:{path}")
    first = llm.complete(MESSAGES, STOP)
    assert first.text == "Thought: one" and first.estimated
    assert first.prompt_tokens == sum(estimate_tokens(m.content) for m in MESSAGES)
    assert first.completion_tokens == estimate_tokens("Thought: one\nObservation: fake")
    assert llm.complete(MESSAGES, STOP).text == "Final answer: two"
    with pytest.raises(LLMError, match="ran out of replies: it holds 2") as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "replay"


def test_replay_skips_replies_used_before_a_pause(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(["a", "b", "c"]))
    assert open_llm(f"replay:{path}", skip=2).complete(MESSAGES, STOP).text == "c"


@pytest.mark.parametrize("content", ['{"a": 1}', "[1, 2]", "not json"])
def test_replay_file_must_be_an_array_of_strings(tmp_path, content):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(LLMNotConfigured, match="replay file"):
        open_llm(f"replay:{path}")


def test_cut_reply_stops_at_a_line_starting_an_observation():
    assert cut_reply("Action input: SELECT 1\n**Observation:** rows") == "Action input: SELECT 1"
    assert cut_reply("Thought: the observation: was odd") == "Thought: the observation: was odd"


# --- server settings: reply cap, temperature, timeouts and retries (issue 20) ---

def test_the_reply_cap_goes_to_a_compatible_server_as_max_tokens(serve):
    # llama.cpp ignores max_completion_tokens (what LangChain sends OpenAI): a cap of 24 gave 262 tokens.
    server = serve((200, completion("Thought: short")))
    open_llm(None, _settings(server.url, max_reply_tokens=24)).complete(MESSAGES, STOP)
    body = server.requests[0]["body"]
    assert body["max_tokens"] == 24 and "max_completion_tokens" not in body


def test_openai_itself_gets_max_completion_tokens():
    llm = open_llm("gpt-4o", LLMSettings(api_key=KEY, max_reply_tokens=24))
    payload = llm.model._get_request_payload(MESSAGES)  # what would be sent; no network
    assert payload["max_completion_tokens"] == 24 and "max_tokens" not in payload and payload["temperature"] == 0


@pytest.mark.parametrize("model", ["o1", "o3-mini", "gpt-5"])
def test_openai_reasoning_models_are_sent_no_temperature(model):
    payload = open_llm(model, LLMSettings(api_key=KEY)).model._get_request_payload(MESSAGES)
    assert "temperature" not in payload


def test_a_model_refusing_temperature_0_is_called_without_it(serve):
    refusal = {"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model. Only the "
                                    "default (1) value is supported.", "type": "invalid_request_error",
                         "param": "temperature", "code": "unsupported_value"}}
    server = serve((400, refusal), (200, completion("Final answer: krakow")), (200, completion("again")))
    llm = open_llm(None, _settings(server.url))
    assert llm.complete(MESSAGES, STOP).text == "Final answer: krakow"
    assert server.requests[0]["body"]["temperature"] == 0 and "temperature" not in server.requests[1]["body"]
    llm.complete(MESSAGES, STOP)  # remembered for the next calls
    assert "temperature" not in server.requests[2]["body"] and len(server.requests) == 3


def test_settings_timeout_retries_and_cap_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PLANRAG_LLM_TIMEOUT", "15")
    monkeypatch.setenv("PLANRAG_LLM_RETRIES", "0")
    monkeypatch.setenv("PLANRAG_MAX_REPLY_TOKENS", "512")
    s = LLMSettings()
    assert (s.timeout_s, s.max_retries, s.max_reply_tokens) == (15.0, 0, 512)
    assert LLMSettings.unattended().timeout_s == 15.0
    monkeypatch.setenv("PLANRAG_LLM_RETRIES", "many")
    with pytest.raises(ValueError, match="PLANRAG_LLM_RETRIES='many' is not a valid whole number"):
        LLMSettings()


def test_interactive_runs_fail_sooner_than_unattended_ones(monkeypatch):
    for name in ("PLANRAG_LLM_TIMEOUT", "PLANRAG_LLM_RETRIES"):
        monkeypatch.delenv(name, raising=False)
    interactive, unattended = LLMSettings(), LLMSettings.unattended()
    # worst case for a hung server, growing timeouts included: 60 + 90 + 120 s interactive (was 5 x 120 s)
    assert interactive.timeout_s * interactive.max_retries < unattended.timeout_s * unattended.max_retries
    assert interactive.max_retries == 2 and interactive.timeout_s == 60


@pytest.mark.parametrize("flag, value, message", [("timeout_s", float("nan"), "--llm-timeout must be a finite"),
                                                  ("retries", -1, "--llm-retries must be 0 or more"),
                                                  ("reply_tokens", 0, "--max-reply-tokens must be above 0")])
def test_invalid_limits_get_a_clear_error(flag, value, message):
    with pytest.raises(ValueError, match=message):
        LLMSettings().with_limits(**{flag: value})


def test_a_base_url_without_its_scheme_gets_a_hint():
    with pytest.raises(LLMNotConfigured, match=r"must start with http:// or https://, e\.g\. http://localhost:8080/v1"):
        open_llm("m", LLMSettings(base_url="localhost:8080/v1", api_key=None))


def test_every_attempt_is_recorded_and_each_retry_reported(serve):
    server = serve((503, {"error": {"message": "busy"}}), (200, completion("Final answer: krakow")))
    llm = open_llm(None, _settings(server.url))
    llm._sleep = lambda s: None
    retries = []
    c = llm.complete(MESSAGES, STOP, on_retry=retries.append)
    assert [a["error_kind"] for a in c.attempts] == ["server", None]
    assert [a["attempt"] for a in c.attempts] == [1, 2] and "busy" in c.attempts[0]["error"]
    assert c.attempts[0]["start"] <= c.attempts[1]["start"]
    assert c.wait_s >= c.latency_s and c.finish_reason == "stop"
    assert len(retries) == 1 and retries[0]["error_kind"] == "server" and retries[0]["retry_in_s"] > 0


def test_a_reply_cut_by_the_cap_keeps_its_finish_reason(serve):
    server = serve((200, completion("Thought: a very long", finish_reason="length")))
    c = open_llm(None, _settings(server.url)).complete(MESSAGES, STOP)
    assert c.finish_reason == "length" and c.metadata["finish_reason"] == "length"


def test_timeouts_are_retried_with_a_longer_timeout_and_recorded(serve):
    server = serve((HANG, {}), (HANG, {}), (HANG, {}))
    llm = open_llm(None, _settings(server.url, timeout_s=0.2, max_retries=2))
    llm._sleep = lambda s: None
    with pytest.raises(LLMError, match=r"^timeout error after 3 attempts") as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "timeout" and len(server.requests) == 3
    assert [a["timeout_s"] for a in e.value.attempts] == [0.2, pytest.approx(0.3), pytest.approx(0.4)]
    assert all(a["error_kind"] == "timeout" for a in e.value.attempts)


# --- errors that are replies: HTTP 200 with an error body or an HTML page; the key kept out (issues 12, 20) ---

def test_an_error_body_with_status_200_is_a_server_error_retried_and_scrubbed(serve):
    echo = {"error": {"message": f"Invalid key {KEY} (shown as sk-test-DO******7890)", "code": 401}}
    server = serve((200, echo), (200, echo))
    llm = open_llm(None, _settings(server.url, max_retries=1))
    with pytest.raises(LLMError) as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "server" and len(server.requests) == 2
    assert "without a chat completion" in str(e.value)
    text = str(e.value) + json.dumps(e.value.attempts)
    assert KEY not in text and "sk-test-DO******7890" not in text and "sk-test-DO" not in text


def test_an_html_page_with_status_200_is_a_server_error_then_the_retry_answers(serve):
    server = serve((200, "<html><body>502 Bad Gateway</body></html>"), (200, completion("Final answer: x1")))
    llm = open_llm(None, _settings(server.url))
    c = llm.complete(MESSAGES, STOP)
    assert c.text == "Final answer: x1" and c.attempts[0]["error_kind"] == "server"
    assert "Bad Gateway" in c.attempts[0]["error"]


def test_a_masked_echo_of_the_key_is_scrubbed(serve):
    server = serve((401, {"error": {"message": "Incorrect API key provided: sk-test-DO******7890.",
                                    "code": "invalid_api_key"}}))
    with pytest.raises(LLMError) as e:
        open_llm(None, _settings(server.url)).complete(MESSAGES, STOP)
    assert "******7890" not in str(e.value) and "Incorrect API key provided: ***." in str(e.value)


def test_a_short_dummy_key_mangles_nothing(serve):
    server = serve((400, {"error": {"message": "maximum context length is 8192 tokens; x exceeded"}}))
    llm = open_llm("ctx", LLMSettings(base_url=server.url, api_key="x"))
    with pytest.raises(LLMError) as e:
        llm.complete(MESSAGES, STOP)
    assert "maximum context length is 8192 tokens; x exceeded" in str(e.value)
    assert llm.label.startswith("ctx @ ") and "x" in secrets.scrub("x ctx max")


@pytest.mark.parametrize("status, error", [
    (400, {"message": "This model's maximum context length is 8192 tokens. However, you requested 9944 tokens "
                      "(7896 in the messages, 2048 in the completion).", "code": "context_length_exceeded"}),  # vLLM
    (400, {"code": 400, "message": "the request exceeds the available context size, try increasing it",
           "type": "exceed_context_size_error", "n_prompt_tokens": 9944, "n_ctx": 8192}),  # llama.cpp
])
def test_a_request_past_the_context_window_is_a_context_error_not_retried(serve, status, error):
    server = serve((status, {"error": error}), (200, completion("unused")))
    with pytest.raises(LLMError, match=r"^context error \(the request is longer than the model's context window") as e:
        open_llm(None, _settings(server.url)).complete(MESSAGES, STOP)
    assert e.value.kind == "context" and len(server.requests) == 1 and len(e.value.attempts) == 1


def test_a_compatible_server_wanting_max_completion_tokens_gets_the_cap_so(serve):
    refusal = {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                                    "'max_completion_tokens' instead.", "type": "invalid_request_error",
                         "param": "max_tokens", "code": "unsupported_parameter"}}
    server = serve((400, refusal), (200, completion("Final answer: krakow")), (200, completion("again")))
    llm = open_llm(None, _settings(server.url, max_reply_tokens=24))
    assert llm.complete(MESSAGES, STOP).text == "Final answer: krakow"
    llm.complete(MESSAGES, STOP)  # remembered for the next calls
    assert server.requests[0]["body"]["max_tokens"] == 24
    for request in server.requests[1:]:
        assert request["body"]["max_completion_tokens"] == 24 and "max_tokens" not in request["body"]


def test_an_empty_choices_list_is_a_server_error_then_the_retry_answers(serve):
    empty = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stand-in", "choices": []}
    server = serve((200, empty), (200, completion("Final answer: x1")))
    c = open_llm(None, _settings(server.url)).complete(MESSAGES, STOP)
    assert c.text == "Final answer: x1" and len(server.requests) == 2
    assert c.attempts[0]["error_kind"] == "server" and "no choices" in c.attempts[0]["error"]


def test_an_empty_choices_list_every_time_fails_as_a_server_error(serve):
    empty = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stand-in", "choices": []}
    server = serve((200, empty), (200, empty))
    with pytest.raises(LLMError, match=r"^server error after 2 attempts.*no choices") as e:
        open_llm(None, _settings(server.url, max_retries=1)).complete(MESSAGES, STOP)
    assert e.value.kind == "server" and len(server.requests) == 2


def test_a_huge_reply_from_a_server_ignoring_the_cap_is_cut_and_taken_as_cut_off(serve):
    server = serve((200, completion("Thought: " + "blah " * 20_000, finish_reason="stop")))
    c = open_llm(None, _settings(server.url, max_reply_tokens=100)).complete(MESSAGES, STOP)
    assert len(c.text) <= 100 * 16 and c.finish_reason == "length"
    # streamed: read up to the cap, then the stream is closed (the rest, and the server's usage, never read)
    assert c.metadata["cut_client_side"] == 100 * 16 and c.metadata["stream_closed"] and c.estimated


def test_a_reply_within_the_cap_is_kept_whole(serve):
    text = "Thought: " + "x" * 390
    server = serve((200, completion(text)))
    c = open_llm(None, _settings(server.url, max_reply_tokens=100)).complete(MESSAGES, STOP)
    assert c.text == text and c.finish_reason == "stop" and "cut_client_side" not in c.metadata


def test_a_server_dripping_its_reply_is_a_timeout_past_the_attempt_deadline(serve):
    """The client's timeout bounds each read only: a server sending a byte at a time would hold an attempt (and
    the run) far past --llm-timeout; the attempt ends at its deadline, as a timeout, and is retried."""
    server = serve((DRIP, completion("Final answer: x1")), (DRIP, completion("Final answer: x1")))
    llm = open_llm(None, _settings(server.url, timeout_s=0.2, max_retries=1))
    llm._sleep = lambda s: None
    with pytest.raises(LLMError, match=r"^timeout error after 2 attempts.*no reply within .* ceiling") as e:
        llm.complete(MESSAGES, STOP)
    assert e.value.kind == "timeout" and len(server.requests) == 2
    assert [a["error_kind"] for a in e.value.attempts] == ["timeout", "timeout"]
