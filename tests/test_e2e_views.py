"""The Run page's grade override in headless Chromium, offline (issue 40): after Save the popover closes, and the
overridden metrics read whole in a 1400 px window. Screenshots go to a temporary folder, or to PLANRAG_SCREENSHOTS."""
from __future__ import annotations

import os
from pathlib import Path

from core.store.overrides import OverrideStore
from tests.page_app import isolate
from tests.test_e2e_browser import app_server, chromium, wait_healthy  # noqa: F401 (chromium: a fixture)
from tests.test_e2e_inbox import PLAIN_STREAMLIT


def test_an_override_saved_closes_its_popover(chromium, monkeypatch, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    home = isolate(monkeypatch, tmp_path / "home")
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PLANRAG_HOME=str(home))
    with app_server(PLAIN_STREAMLIT, env, tmp_path / "server.log") as (url, process):
        wait_healthy(url, process)
        page = chromium.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{url}/run?q=demo/locating/1")
        page.get_by_role("textbox", name="Your name", exact=True).fill("Ana")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Start", exact=True).click()
        page.get_by_role("button", name="Override the grade").click()
        save = page.get_by_role("button", name="Save override")
        expect(save).to_be_visible()
        page.get_by_role("textbox", name="Why").fill("the answer hedges")
        save.click()
        expect(page.get_by_text("Grade overridden by Ana").first).to_be_visible()
        expect(page.get_by_role("button", name="Save override")).to_be_hidden()  # the popover closed
        expect(page.get_by_text("Decision (overridden)").first).to_be_visible()
        page.screenshot(path=shots / "run-override-saved.png", full_page=True)
        assert [o.by for o in OverrideStore(home).all().values()] == ["Ana"]
