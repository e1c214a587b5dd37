"""The app's gate (AppTest): without sign-in it serves this machine as today, and refuses every page on a network
address unless PLANRAG_ALLOW_ANONYMOUS=1; in single-user mode the person is the local admin, recorded by name."""
from __future__ import annotations

import pytest

from tests.page_app import isolate, open_file, open_page


@pytest.fixture
def address(monkeypatch):
    """Set the address the app listens on, as ``--server.address`` would (read through st.get_option)."""
    import streamlit

    options = {}
    read = streamlit.get_option
    monkeypatch.setattr(streamlit, "get_option", lambda key: options.get(key, read(key)))
    return lambda value: options.__setitem__("server.address", value)


def test_a_network_address_without_sign_in_is_refused_before_any_page(monkeypatch, tmp_path, address):
    isolate(monkeypatch, tmp_path)
    monkeypatch.delenv("PLANRAG_ALLOW_ANONYMOUS", raising=False)
    address("0.0.0.0")
    at = open_file("app.py")  # the gate comes before the navigation: no page runs
    assert "PLANRAG_ALLOW_ANONYMOUS=1" in at.error[0].value
    assert not at.title and not at.button
    monkeypatch.setenv("PLANRAG_ALLOW_ANONYMOUS", "1")
    assert open_file("app.py").title[0].value == "Scenarios"


def test_on_localhost_the_single_user_is_the_admin(monkeypatch, tmp_path, address):
    isolate(monkeypatch, tmp_path)
    address("localhost")
    at = open_page("pages/settings.py")
    assert not at.error
    assert [s.value for s in at.subheader] == ["Language model", "Limits of each run", "Databases",
                                               "Where runs are kept", "DQA benchmark", "Scenarios folder"]  # issue 40: the name in the sidebar
    assert not any(t.disabled for t in at.text_input)


OPERATOR_KEY = "sk-operator-0123456789abcdef"
MY_KEY = "sk-typed-for-this-url-012345"


def test_the_settings_test_of_a_visitors_url_never_gets_the_environments_key(monkeypatch, tmp_path):
    """Issue 26's first finding, on the page: a base URL of one's own, the key left empty, Test."""
    from tests.keystub import KeyStub

    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", OPERATOR_KEY)  # the operator's, for OpenAI's API
    visitor = KeyStub()
    try:
        at = open_file("pages/settings.py")
        at.segmented_control(key="llm_provider").set_value("compatible").run()
        at.text_input(key="llm_model").set_value("gpt-4o")
        at.text_input(key="llm_base_url").set_value(visitor.url)
        at.button(key="llm_test").click().run()
        assert at.success and visitor.keys and not visitor.got(OPERATOR_KEY)
        at.button(key="llm_use").click().run()  # kept for the session: still bound to OpenAI's API
        assert at.session_state["llm"].key_url is None
        at.text_input(key="llm_key").set_value(MY_KEY)  # a key typed with this URL goes to it
        at.button(key="llm_test").click().run()
        assert visitor.keys[-1] == f"Bearer {MY_KEY}" and not visitor.got(OPERATOR_KEY)
    finally:
        visitor.close()


def test_a_malformed_secrets_file_stops_every_page_naming_its_file_and_line(monkeypatch, tmp_path, address):
    """Finding 7 of issue 36: one missing quote turned sign-in off and made everyone admin on 127.0.0.1."""
    import streamlit

    isolate(monkeypatch, tmp_path)
    address("127.0.0.1")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[auth]\nredirect_uri = "http://127.0.0.1:8501/oauth2callback"\ncookie_secret = "abc\n')
    read = streamlit.get_option
    monkeypatch.setattr(streamlit, "get_option",
                        lambda key: [str(secrets)] if key == "secrets.files" else read(key))
    at = open_file("app.py")
    said = at.error[0].value.replace("\\", "")  # as Markdown escapes it
    assert str(secrets) in said and "line 3" in said and "serves nothing" in said
    assert not at.title and not at.button


def test_in_single_user_mode_the_identity_is_the_local_user(monkeypatch, tmp_path, address):
    """Issue 36: without sign-in the identity is "local user", never the Unix account."""
    import getpass

    isolate(monkeypatch, tmp_path)
    address("localhost")
    at = open_page("pages/settings.py")
    assert at.text_input(key="reviewer_input").value == "" != getpass.getuser()  # issue 40: empty until given
    assert any("recorded as local user" in c.value for c in at.sidebar.caption)


@pytest.mark.parametrize("public, secure", [("https://workbench.example.org", True), ("http://127.0.0.1:8501", False)])
def test_the_sign_in_cookie_is_secure_when_the_public_url_is_https(public, secure, monkeypatch):
    """Finding 5 of issue 36: the sign-in cookie was never ``Secure``."""
    from starlette.responses import Response
    from streamlit.web.server.starlette import starlette_auth_routes as routes

    from ui import access

    monkeypatch.setattr(routes, "_set_single_cookie", routes._set_single_cookie)  # put back after the test
    monkeypatch.setattr(routes, "get_cookie_secret", lambda: "test-cookie-secret-0123456789abcdef")
    monkeypatch.setattr("streamlit.auth_util.get_secrets_auth_section",
                        lambda: {"redirect_uri": f"{public}/oauth2callback"})
    access.secure_cookies()
    response = Response()
    routes._set_single_cookie(response, "_streamlit_user", "{}")
    header = response.headers["set-cookie"].lower()
    assert "httponly" in header and ("; secure" in header) == secure
