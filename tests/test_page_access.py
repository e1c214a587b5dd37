"""The app's gate (AppTest): without sign-in it serves this machine as today, and refuses every page on a network
address unless PLANRAG_ALLOW_ANONYMOUS=1; in single-user mode the person is the local admin, recorded by name."""
from __future__ import annotations

import pytest
from streamlit import config as st_config

from tests.page_app import isolate, open_page


@pytest.fixture
def address(monkeypatch):
    before = st_config.get_option("server.address")

    def set_address(value):
        st_config.set_option("server.address", value)

    yield set_address
    st_config.set_option("server.address", before)


def test_a_network_address_without_sign_in_is_refused_on_every_page(monkeypatch, tmp_path, address):
    isolate(monkeypatch, tmp_path)
    monkeypatch.delenv("PLANRAG_ALLOW_ANONYMOUS", raising=False)
    address("0.0.0.0")
    for page in ("pages/scenarios.py", "pages/settings.py", "pages/run.py"):
        at = open_page(page)
        assert "PLANRAG_ALLOW_ANONYMOUS=1" in at.error[0].value
        assert not at.title and not at.button
    monkeypatch.setenv("PLANRAG_ALLOW_ANONYMOUS", "1")
    assert open_page("pages/settings.py").title[0].value == "Settings"


def test_on_localhost_the_single_user_is_the_admin(monkeypatch, tmp_path, address):
    isolate(monkeypatch, tmp_path)
    address("localhost")
    at = open_page("pages/settings.py")
    assert not at.error
    assert [s.value for s in at.subheader] == ["Language model", "Limits of each run", "Databases", "DQA benchmark",
                                               "Scenarios folder", "Reviewer"]
    assert not any(t.disabled for t in at.text_input)
