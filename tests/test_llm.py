"""core.llm: configuration errors, the replay model, and ChatOpenAI against a local stand-in server (no network):
stop sequences, usage, retries with backoff, auth errors, and the API key kept out of messages."""
from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from core.llm import LLMError, LLMNotConfigured, LLMSettings, cut_reply, estimate_tokens, open_llm

KEY = "sk-test-DO-NOT-LEAK-1234567890"
STOP = ["\nObservation:"]


def _completion(text: str, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class StandIn:
    """A local OpenAI-compatible server answering from a script of (status, body) pairs."""

    def __init__(self, script: list[tuple[int, dict]]):
        self.script = list(script)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                status, payload = outer.script.pop(0)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


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
    return LLMSettings(model="stand-in", base_url=url, api_key=KEY, retry_base_s=0.001, **kw)


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
    server = serve((200, _completion("Thought: hi")))
    llm = open_llm("stand-in", LLMSettings(base_url=server.url, api_key=None))
    assert llm.complete(MESSAGES, STOP).text == "Thought: hi"


def test_stop_sequences_usage_and_client_side_cut(serve):
    server = serve((200, _completion("Thought: t\nAction: Graph DB\nAction input: MATCH (n) RETURN n\n"
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
                   (200, _completion("Final answer: krakow")))
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
                   (200, _completion("Thought: ok\nObservation: x")))
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
