"""Issue 40 in headless Chromium, offline, on one app server for the module: "Check the decision" lands on the run's
best decision, pick and regret; the Run page's inbox draws itself again when a run comes to wait, after a review made
in it and after another analyst's review, with no reload. Screenshots go to a temporary folder, or to
PLANRAG_SCREENSHOTS."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.page_app import isolate
from tests.test_e2e_browser import app_server, chromium, wait_healthy  # noqa: F401 (chromium: a fixture)
from tests.test_e2e_inbox import PLAIN_STREAMLIT
from tests.test_e2e_links import idle
from tests.test_page_run_control import paused_run

VIEWPORT = {"width": 1400, "height": 900}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """One app server for the module's tests: its URL and its data home."""
    home = tmp_path_factory.mktemp("peers-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
    env.update(PLANRAG_HOME=str(home))
    with app_server(PLAIN_STREAMLIT, env, home.parent / "server.log") as (url, process):
        wait_healthy(url, process)
        yield url, home


@pytest.fixture
def shots(tmp_path) -> Path:
    return Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)


def named(page, name: str) -> None:
    page.get_by_role("textbox", name="Your name", exact=True).fill(name)  # the sidebar's, once
    page.keyboard.press("Enter")


def test_check_the_decision_lands_on_best_pick_and_regret(chromium, app, shots):  # noqa: F811
    from playwright.sync_api import expect

    url, _ = app
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(f"{url}/run?q=demo/locating/1")
    named(page, "Ana")
    page.get_by_role("button", name="Start", exact=True).click()
    check = page.get_by_role("button", name="Check the decision")
    check.scroll_into_view_if_needed()
    page.mouse.wheel(0, 5000)  # the page scrolled to its end, as after reading the run
    check.click()
    expect(page.get_by_role("heading", name="Decision check")).to_be_visible()
    expect(page.get_by_text("The agent's pick comes from run")).to_be_in_viewport()
    for label in ("Best decision", "Pick", "Regret"):
        expect(page.get_by_test_id("stMetricLabel").filter(has_text=label).first).to_be_in_viewport()
    page.screenshot(path=shots / "check-the-decision-landing.png")


def test_the_inbox_draws_itself_again_after_any_analysts_review(chromium, app, monkeypatch, shots):  # noqa: F811
    from playwright.sync_api import expect

    url, home = app
    isolate(monkeypatch, home)
    ana = chromium.new_context(viewport=VIEWPORT).new_page()
    ana.goto(f"{url}/run?q=demo/building/1")
    named(ana, "Ana")
    expect(ana.get_by_role("button", name="Start", exact=True)).to_be_enabled()
    expect(ana.get_by_text("Inbox:")).to_have_count(0)

    run_id = paused_run(hitl="approve-every-plan")  # another process's run comes to wait for its first plan
    ana.get_by_text("Inbox: 1 waiting for review").click()  # with no reload
    expect(ana.get_by_text("waits for approval of its plan (review 1)")).to_be_visible()
    ana.get_by_role("button", name="Approve", exact=True).click()
    expect(ana.get_by_text("waits for approval of a new plan (review 2)")).to_be_visible()  # no click, no reload
    ana.screenshot(path=shots / "inbox-after-its-own-review.png", full_page=True)

    ben = chromium.new_context(viewport=VIEWPORT).new_page()
    ben.goto(f"{url}/run?run={run_id}")
    name = ben.get_by_role("textbox", name="Your name, recorded with your review")
    name.wait_for()
    # Typed once the page has settled, as Ben reads the form first: in CI (load about 10) the name was not taken once
    # (Approve stayed disabled for 60 s), likely typed between two runs of the page drawing the form, the second
    # drawing the box again empty; not reproduced here in 30 tries at load 1.5-8 (12 of them beside two CPU hogs).
    idle(ben)
    name.fill("Ben")
    ben.keyboard.press("Enter")
    ben.get_by_text("you review as Ben").wait_for()
    ben.get_by_role("button", name="Approve as proposed").click()
    expect(ana.get_by_text("(review 2)")).to_have_count(0)  # Ben's review shows in Ana's inbox by itself


def test_compare_sets_drills_down_into_a_question_and_opens_both_runs(chromium, app, monkeypatch, shots):  # noqa: F811
    """A question where two result sets' settings differ: ticked, it shows how each decided it; one click opens both
    runs side by side on Compare (LangSmith's drill-down)."""
    from playwright.sync_api import expect

    from core.benchmark.results import ResultStore
    from tests.test_benchmark_reports import RESULTS
    from tests.test_page_state import demo_run

    url, home = app
    isolate(monkeypatch, home)
    runs = {technique: demo_run(technique=technique) for technique in ("iterrag", "planrag")}
    store = ResultStore(home / "bench" / "drill")
    for technique, right in (("iterrag", False), ("planrag", True)):
        store.put({**RESULTS[0], "source": "demo", "scenario": "locating", "question": 1, "technique": technique,
                   "model": "replays", "correct": right, "decision": "ganges" if not right else "doab",
                   "run_id": runs[technique], "finished": 0.0})
    store.close()
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(f"{url}/benchmark")
    page.get_by_role("tab", name="Compare sets").click()
    expect(page.get_by_text("1 of 1 questions shown")).to_be_visible()
    changes = page.locator("[data-testid='stDataFrame']").last
    changes.scroll_into_view_if_needed()  # a click by position: the row in the viewport, the page laid out,
    idle(page)
    changes.locator("canvas").first.wait_for()  # and the grid drawn
    box = changes.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 18)  # the row's tick box
    expect(page.get_by_text("demo/locating/1: improved")).to_be_visible()
    page.screenshot(path=shots / "compare-sets-drill-down.png", full_page=True)
    page.get_by_role("button", name="Open both side by side in Compare").click()
    expect(page.get_by_role("heading", name="Decisions of these runs")).to_be_visible()
    for run_id in runs.values():
        expect(page.get_by_text(run_id).first).to_be_visible()
