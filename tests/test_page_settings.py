"""The Settings page (AppTest): the DQA directory test (success and failure), the LLM test with a replay file,
keeping the LLM and database settings in the session, and never sending a key back to the browser."""
import json

from streamlit.testing.v1 import AppTest

from core.llm.client import LLMSettings
from core.config.settings import DatabaseSettings
from tests.conftest import ROOT
from tests import page_app
from tests.page_app import open_file, shown
from tests.stub_server import completion
from tests.test_llm import StandIn

REPLAY = ROOT / "tests" / "transcripts" / "locating_sql_planrag.json"


def open_page(**state) -> AppTest:
    return open_file("pages/settings.py", **state)


def test_dqa_directory_test_success(dqa_dir):
    at = open_page()
    at.text_input(key="dqa_dir_input").set_value(str(dqa_dir))
    at.button(key="dqa_test").click().run()
    assert "200 locating questions, 101 building questions" in shown(at.success[0].value)
    assert at.session_state["dqa_dir"] == str(dqa_dir)


def test_dqa_directory_test_failure_keeps_the_previous_directory(tmp_path):
    at = open_page(dqa_dir="/previous")
    at.text_input(key="dqa_dir_input").set_value(str(tmp_path))
    at.button(key="dqa_test").click().run()
    assert "not found" in shown(at.error[0].value) and str(tmp_path) in shown(at.error[0].value)
    assert at.session_state["dqa_dir"] == "/previous"
    at.button(key="llm_use").click().run()  # another button: the last test result stays on the page
    assert "not found" in shown(at.error[0].value)


def test_replay_file_llm_test_and_use():
    at = open_page()
    at.segmented_control(key="llm_provider").set_value("replay").run()
    at.text_input(key="llm_replay").set_value(str(REPLAY))
    at.button(key="llm_test").click().run()
    replies = len(json.loads(REPLAY.read_text()))
    assert shown(at.success[0].value) == f"replay file {REPLAY} holds {replies} replies"
    at.button(key="llm_use").click().run()
    assert at.session_state["llm"].model == f"replay:{REPLAY}"


def test_bad_replay_file_error_is_shown(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    at = open_page(llm=LLMSettings(model=f"replay:{bad}"))
    assert at.segmented_control(key="llm_provider").value == "replay"
    at.button(key="llm_test").click().run()
    assert "is not JSON" in shown(at.error[0].value) and not at.exception


def test_api_key_stays_in_the_session(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    at = open_page()
    key = at.text_input(key="llm_key")
    assert key.value == "" and "kept" in key.proto.placeholder  # the environment's key is not sent back
    at.text_input(key="llm_model").set_value("gpt-test")
    key.set_value("sk-typed")
    at.button(key="llm_use").click().run()
    assert at.session_state["llm"] == LLMSettings(model="gpt-test", api_key="sk-typed")
    assert "sk-typed" not in repr(at.session_state["llm"])


def test_compatible_server_test_is_a_one_token_call():
    server = StandIn([(200, completion("OK"))])
    try:
        at = open_page()
        at.segmented_control(key="llm_provider").set_value("compatible").run()
        at.text_input(key="llm_model").set_value("stand-in")
        at.text_input(key="llm_base_url").set_value(server.url)
        at.button(key="llm_test").click().run()
    finally:
        server.close()
    assert shown(at.success[0].value).startswith(f"stand-in @ {server.url} answered in")
    assert server.requests[0]["body"]["max_tokens"] == 1  # what llama.cpp-style servers understand


def test_server_timeout_retries_and_reply_cap_are_session_settings():
    at = open_page()
    at.segmented_control(key="llm_provider").set_value("compatible").run()
    at.text_input(key="llm_model").set_value("stand-in")
    at.text_input(key="llm_base_url").set_value("http://localhost:8080/v1")
    at.number_input(key="llm_timeout").set_value(15.0)
    at.number_input(key="llm_retries").set_value(0)
    at.number_input(key="llm_max_tokens").set_value(512)
    at.button(key="llm_use").click().run()
    kept = at.session_state["llm"]
    assert (kept.timeout_s, kept.max_retries, kept.max_reply_tokens) == (15.0, 0, 512)


def test_a_base_url_without_http_gets_a_hint():
    at = open_page()
    at.segmented_control(key="llm_provider").set_value("compatible").run()
    at.text_input(key="llm_model").set_value("stand-in")
    at.text_input(key="llm_base_url").set_value("localhost:8080/v1")
    at.button(key="llm_test").click().run()
    assert "must start with http:// or https://, e.g. http://localhost:8080/v1" in shown(at.error[0].value)


def test_openai_test_without_a_key_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    at = open_page()
    at.text_input(key="llm_model").set_value("gpt-test")
    at.button(key="llm_test").click().run()
    # issue 28: named as this page's inputs, not as command-line flags and environment variables
    said = shown(at.error[0].value)
    assert "enter the API key" in said and "Base URL" in said and "--" not in said and "OPENAI_" not in said


def test_database_settings_kept_in_the_session():
    at = open_page()
    at.text_input(key="db_neo4j_uri").set_value("bolt://example:7687")
    at.text_input(key="db_neo4j_password").set_value("secret")
    at.button(key="db_use").click().run()
    kept = at.session_state["db_settings"]
    assert isinstance(kept, DatabaseSettings)
    assert (kept.neo4j_uri, kept.neo4j_password) == ("bolt://example:7687", "secret")


def test_the_reviewer_name_is_kept_for_the_session():
    """Issue 40: the name is given once, in the sidebar of every page (Settings has no field of its own)."""
    at = page_app.open_page("pages/settings.py")
    assert at.sidebar.text_input(key="reviewer_input").value == ""  # none until given
    at.sidebar.text_input(key="reviewer_input").set_value("  Ana Lyst ").run()
    assert at.session_state["reviewer"] == "Ana Lyst"
    at.switch_page("pages/history.py").run()
    assert at.sidebar.text_input(key="reviewer_input").value == "Ana Lyst"


def test_the_page_says_where_runs_are_kept(monkeypatch, tmp_path):
    """Issue 25: the embedded project home, or the team store's URL (its password hidden)."""
    at = open_page()
    assert any("SQLite files under" in c.value and "PLANRAG_DATABASE_URL" in c.value for c in at.caption)
    monkeypatch.setenv("PLANRAG_DATABASE_URL", "postgresql://ana:s3cret@db.example:5432/team")
    at = open_page()
    shown = [c.value for c in at.caption if "The team store" in c.value]
    assert shown and "postgresql://ana:***@db.example:5432/team" in shown[0] and "s3cret" not in shown[0]


def test_the_page_says_where_runs_run(monkeypatch, tmp_path):
    """Without a team store: a process of their own (the default) or this app's process (PLANRAG_JOBS=threads)."""
    page_app.isolate(monkeypatch, tmp_path)
    monkeypatch.delenv("PLANRAG_DATABASE_URL", raising=False)
    said = {}
    for mode in ("process", "threads"):
        monkeypatch.setenv("PLANRAG_JOBS", mode)
        at = open_page()
        said[mode] = [shown(c.value) for c in at.caption if "Runs " in c.value]
    assert said["process"] == ["Runs run in a process of their own that this app starts (PLANRAG_JOBS=process, the "
                               "default), so that pages stay quick while agents work; benchmark items run in this "
                               "app's process. PLANRAG_JOBS=threads runs both in this app's process."]
    assert said["threads"] == ["Runs and benchmark items run in this app's process (PLANRAG_JOBS=threads)."]
