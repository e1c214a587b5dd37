"""Run control in headless Chromium, offline: ``streamlit run app.py`` on a free port; on the demo Locating question 1,
a PlanRAG replay with approve-replans pauses at its re-plan: the banner "Waiting for your review" is at the top,
the review form comes before the timeline, and the plan column shows the proposed plan. Approving it, the next model
call hangs (a silent server, simulated in the test's server process): the page shows the elapsed wait, and Stop
ends the run, kept as ``stopped``.

Prints one figure: the time from the Stop click to the run being stopped in the run store (target: a second or
two). Screenshots go to a temporary folder, or to PLANRAG_SCREENSHOTS."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from core.store.runs import RunStore
from tests.test_e2e_browser import app_server, approve_as, chromium, wait_healthy  # noqa: F401 (chromium: a fixture)

HANG_CALL = 4  # the model call (counted in the server process) that never answers: the first after the review

# `streamlit run` where replayed replies come at once, except call HANG_CALL, which hangs like a silent server.
HANGING_STREAMLIT = f"""
import sys, threading
import core.llm.replay_model as replay_model
generate = replay_model.ReplayChatModel._generate
calls = []
def hanging(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == {HANG_CALL}:
        threading.Event().wait(600)
    return generate(self, *args, **kwargs)
replay_model.ReplayChatModel._generate = hanging
from streamlit.web.cli import main
sys.argv[0] = "streamlit"
main()
"""


@pytest.fixture
def server(tmp_path):
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
    env.update(PLANRAG_HOME=str(home))
    with app_server(HANGING_STREAMLIT, env, tmp_path / "server.log") as (url, process):
        yield url, process, home


def test_pause_screen_then_stop_a_hanging_run(chromium, server, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    url, process, home = server
    page = chromium.new_page(viewport={"width": 1500, "height": 1300})
    page.set_default_timeout(30_000)
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    wait_healthy(url, process)
    page.goto(url)
    page.get_by_role("heading", name="Scenarios").wait_for()  # the demo Locating question 1 is chosen
    page.get_by_role("link", name="Run", exact=True).click()
    page.get_by_role("heading", name="Run").wait_for()
    page.get_by_text("Approve re-plans").click()
    page.get_by_role("button", name="Start").click()

    banner = page.get_by_test_id("stAlert").filter(has_text="Waiting for your review — run")
    banner.wait_for()
    form = page.get_by_text("The agent wants to change its plan")
    timeline = page.locator('[class*="st-key-timeline-"]')
    expect(timeline).to_have_count(1)  # the timeline of the script run before may stand until this one ends
    proposed = page.get_by_text("Proposed plan — waiting for your review", exact=True)
    expect(proposed).to_be_visible()
    page.screenshot(path=shots / "run-pause-review-first.png", full_page=True)
    y = {name: loc.bounding_box()["y"] for name, loc in
         (("banner", banner), ("form", form), ("timeline", timeline), ("proposed", proposed))}
    assert y["banner"] < y["form"] < y["timeline"] and y["proposed"] > y["form"], y

    approve_as(page, "Ana Costa")
    waiting = page.get_by_text("waiting for the model (LLM call")  # which call and attempt (issue 29)
    waiting.wait_for()
    expect(waiting).to_contain_text(" s")
    # the screenshot shows a few seconds waited: wait until the page says so (an event, not a fixed time)
    seconds = r"/waiting for the model \(LLM call \d+, attempt \d of \d[^)]*\): ([2-9]|\d\d)\.\d s/"
    page.wait_for_function(f"() => {seconds}.test(document.body.innerText)", timeout=30_000)
    page.screenshot(path=shots / "run-waiting-for-the-model.png", full_page=True)
    [run] = RunStore(home / "runs.sqlite").list()
    assert run.status == "running"
    clicked = time.time()
    page.get_by_role("button", name="Stop").click()
    store = RunStore(home / "runs.sqlite")
    while store.get(run.id, events=False).status == "running":
        assert time.time() - clicked < 120, "the run did not stop"  # a hang guard, not a speed target
        time.sleep(0.05)
    stopped_after = time.time() - clicked
    page.get_by_text("stopped by the analyst").first.wait_for()
    page.screenshot(path=shots / "run-stopped.png", full_page=True)
    record = store.get(run.id)
    assert record.status == "stopped" and record.events[-1].error_kind == "stopped"
    expect(page.get_by_role("button", name="Resume from the last checkpoint")).to_be_visible()
    print(f"\nStop click -> run stopped in the store: {stopped_after:.2f} s (target: a second or two)")
