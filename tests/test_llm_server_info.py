"""Context windows and token counts where each server kind says them (issue 29), against small stub HTTP servers on
localhost, one per server kind: llama.cpp (``GET /props``, ``POST /tokenize``), vLLM (``/v1/models``'
``max_model_len``, ``POST /tokenize`` with a count), Ollama (``POST /api/show``), llama-cpp-python (404 on
``/props``, ``/v1/models`` with or without metadata, ``POST /extras/tokenize``); and a run that keeps to a small
window by the server's own count, saying which window it assumed and where it came from."""
from __future__ import annotations

import pytest

from core.model.technique import technique
from core.config.settings import LLMSettings
from core.llm import server_info
from core.llm.server_info import Window, count_tokens, detect_window
from core.model.run_settings import Limits, RunSettings
from tests.test_agents_runtime import ACT, FINAL, FakeBackend, make_runtime
from tests.stub_server import StubServer, completion, not_found, send_json


class Stub(StubServer):
    """A server answering GET ``pages`` (path -> JSON) and POST ``posts`` (path -> body -> JSON), else 404; POST
    /v1/chat/completions with ``replies`` in turn. Records the paths asked (``asked``)."""

    def __init__(self, pages: dict | None = None, posts: dict | None = None, replies: list[str] = ()):
        self.replies = list(replies)
        routes = {f"GET {path}": page for path, page in (pages or {}).items()}
        for path, answer in (posts or {}).items():
            routes[f"POST {path}"] = lambda handler, body, answer=answer: send_json(handler, 200, answer(body))
        super().__init__({**routes, "POST /v1/chat/completions": self._chat})

    def _chat(self, handler, body: dict) -> None:
        if not self.replies:
            return not_found(handler)
        send_json(handler, 200, completion(self.replies.pop(0), 900, 20))


@pytest.fixture
def stub():
    servers = []

    def start(**kw) -> Stub:
        servers.append(Stub(**kw))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


class WideSchema(FakeBackend):
    """The fake database with a schema of about 4,500 characters (as a DQA schema is)."""

    def schema_text(self) -> str:
        columns = ", ".join(f"column_number_{i} FLOAT" for i in range(200))
        return f"CREATE TABLE trade_node (trade_node VARCHAR(30), local_value FLOAT, {columns});"


def words(text: str) -> list[int]:
    """A stand-in tokenizer: one token per 5 characters."""
    return list(range(max(1, len(text) // 5)))


def test_llama_cpp_says_its_window_in_props_and_counts_with_tokenize(stub):
    server = stub(pages={"/props": {"default_generation_settings": {"n_ctx": 4096}}},
                  posts={"/tokenize": lambda body: {"tokens": words(body["content"])}})
    assert detect_window(server.url, "m") == Window(4096, "llama.cpp GET /props (n_ctx)")
    assert count_tokens(server.url, "m", None, "x" * 500) == 100


def test_vllm_says_max_model_len_and_counts_with_tokenize(stub):
    server = stub(pages={"/v1/models": {"data": [{"id": "other", "max_model_len": 2048},
                                                 {"id": "m", "max_model_len": 8192}]}},
                  posts={"/tokenize": lambda body: {"count": len(words(body["prompt"])), "max_model_len": 8192}})
    assert detect_window(server.url, "m") == Window(8192, "vLLM GET /v1/models (max_model_len)")
    assert count_tokens(server.url, "m", None, "x" * 500) == 100
    assert ("GET", "/props") in server.asked  # asked first, a 404


def test_ollama_says_num_ctx_or_the_models_context_length_in_api_show(stub):
    server = stub(posts={"/api/show": lambda body: {"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192",
                                                    "model_info": {"qwen2.context_length": 32768}}})
    assert detect_window(server.url, "qwen") == Window(8192, "Ollama POST /api/show (num_ctx)")
    other = stub(posts={"/api/show": lambda body: {"model_info": {"qwen2.context_length": 32768}}})
    found = detect_window(other.url, "qwen")
    assert found.tokens == 32768 and found.source.startswith("Ollama POST /api/show (the model's context_length")
    assert count_tokens(other.url, "qwen", None, "some text") is None  # Ollama has no tokenize endpoint


def test_llama_cpp_python_404s_props_and_says_its_window_only_in_metadata(stub):
    bare = stub(pages={"/v1/models": {"data": [{"id": "m", "object": "model", "owned_by": "me"}]}},
                posts={"/extras/tokenize": lambda body: {"tokens": words(body["input"])}})
    assert detect_window(bare.url, "m") is None  # nothing to say: nothing assumed
    assert ("GET", "/props") in bare.asked and ("POST", "/api/show") in bare.asked
    assert count_tokens(bare.url, "m", None, "x" * 50) == 10
    told = stub(pages={"/v1/models": {"data": [{"id": "m", "metadata": {"n_ctx": 2048}}]}})
    assert detect_window(told.url, "m") == Window(2048, "GET /v1/models (metadata.n_ctx)")


def test_a_server_without_a_tokenize_endpoint_is_not_asked_again_at_once(stub):
    server = stub()
    assert count_tokens(server.url, "m", None, "text") is None
    asked = len(server.asked)
    assert count_tokens(server.url, "m", None, "text") is None and len(server.asked) == asked
    assert server_info.FORGET_S > 0


def test_a_small_window_is_kept_by_the_servers_count_and_the_run_says_which_window(stub, tmp_path):
    """Issue 29: with --context-tokens 3000 the character estimate (3 a token) said the first request did not fit
    (the issue: 1,667 estimated, 1,070 real); by the server's tokenizer it does, and the run goes on. The window
    the run assumed and where it came from are in its settings and on its page."""
    server = stub(pages={"/props": {"default_generation_settings": {"n_ctx": 3000}}},
                  posts={"/tokenize": lambda body: {"tokens": words(body["content"])}}, replies=[ACT, FINAL])
    home = tmp_path / "home"
    runtime = make_runtime(home, WideSchema(), llm_settings=LLMSettings(api_key=None, max_reply_tokens=2048))
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "stand-in", base_url=server.url,
                                       limits=Limits(observation_chars=2000)))
    record = runtime.store.get(result.run_id)
    limits = record.settings.limits
    assert (limits.context_tokens, limits.context_source) == (3000, "llama.cpp GET /props (n_ctx)")
    assert result.status == "finished" and result.outcome.decision == "krakow"
    assert not [e for e in record.events if e.kind == "error" and e.error_kind in ("limit", "context")]
    assert ("POST", "/tokenize") in server.asked
    # the same first request by the character estimate alone: more than the 1,500 tokens the window leaves it
    from core.agents import guards
    from core.agents.nodes import context_full

    state = runtime._graph_of(technique("iterrag"), RunSettings.prompts).get_state(runtime._config(result.run_id)).values
    first = {**state, "messages": state["messages"][:1], "chars_per_token": None, "llm_calls": 0}
    message = context_full(first, limits)[1]
    assert message.startswith("context window full (about ") and message.endswith(
        "1,500 available: a 3,000-token window less 1,500 kept for the reply; the window llama.cpp GET /props "
        "(n_ctx))")
    assert guards.reply_room(3000, 2048) == 1500


def test_settings_says_which_window_a_run_assumes_and_where_it_came_from(stub):
    from tests.test_page_settings import open_page, shown

    told = stub(pages={"/props": {"default_generation_settings": {"n_ctx": 4096}}}, replies=["OK"])
    silent = stub(pages={"/v1/models": {"data": [{"id": "stand-in"}]}}, replies=["OK"])
    said = []
    for server in (told, silent):
        at = open_page()
        at.segmented_control(key="llm_provider").set_value("compatible").run()
        at.text_input(key="llm_model").set_value("stand-in")
        at.text_input(key="llm_base_url").set_value(server.url)
        at.button(key="llm_test").click().run()
        said.append(shown(at.success[0].value))
    assert said[0].endswith("context window: 4,096 tokens, from llama.cpp GET /props (n_ctx)")
    assert said[1].endswith("context window: the server does not say it, so nothing is shortened until a request "
                            "passes it and the server's error states it (set one under Limits to keep requests "
                            "within it)")


def test_the_run_page_says_the_window_the_run_assumed():
    from core.analysis.summary import window_note

    def window(**limits) -> RunSettings:
        return RunSettings("locating", 1, "sqlite", "iterrag", "x", limits=Limits(**limits))

    assert window_note(window(context_tokens=3000, context_source="llama.cpp GET /props (n_ctx)")) == (
        " · context window 3,000 tokens (llama.cpp GET /props (n_ctx))")
    assert window_note(window(context_tokens=3000, context_source="set for the run")).endswith("(set for the run)")
    assert window_note(window()) == ""
