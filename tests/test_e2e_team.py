"""The team deployment as two analysts see it, in headless Chromium (issue 25): the app on the team store with the
job queue, two browser sessions. Ana starts a PlanRAG replay on the demo Locating question 1 with no worker up:
her page says the run is queued and that no worker is running. A worker starts (``python -m core worker``, its own
home folder): the run goes on and pauses at its re-plan. Ben opens the run's link in his own session and sees it
waiting for review; he approves it, and Ana's page, following the store, shows the run go on to its end.
Screenshots go to a temporary folder, or to PLANRAG_SCREENSHOTS."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import empty_team_store
from tests.test_e2e_browser import app_server, approve_as, chromium, wait_healthy  # noqa: F401 (chromium: a fixture)

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = "import sys\nfrom streamlit.web.cli import main\nsys.argv[0] = 'streamlit'\nmain()\n"


@pytest.fixture
def team_server(tmp_path, team_database):
    empty_team_store(team_database)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
    env.update(PLANRAG_HOME=str(tmp_path / "app"), PLANRAG_DATABASE_URL=team_database, PLANRAG_JOBS="queue")
    with app_server(LAUNCH, env, tmp_path / "server.log") as (url, process):
        yield url, process, env


def test_two_analysts_follow_and_review_a_run_a_worker_drives(chromium, team_server, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    url, process, env = team_server
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    wait_healthy(url, process)
    ana = chromium.new_context(viewport={"width": 1500, "height": 1200}).new_page()
    ben = chromium.new_context(viewport={"width": 1500, "height": 1200}).new_page()
    for page in (ana, ben):
        page.set_default_timeout(60_000)
    ana.goto(url)
    ana.get_by_role("heading", name="Scenarios").wait_for()
    ana.get_by_role("link", name="Run", exact=True).click()
    ana.get_by_role("heading", name="Run").wait_for()
    ana.get_by_text("Approve re-plans").click()
    ana.get_by_role("button", name="Start").click()
    ana.get_by_text("Queued: a worker of the team's job queue will take it up.").wait_for()
    expect(ana.get_by_text("No worker is running")).to_be_visible()
    ana.screenshot(path=shots / "team-queued-no-worker.png", full_page=True)

    worker = subprocess.Popen([sys.executable, "-m", "core", "worker", "--name", "w1"], cwd=ROOT,
                              env={**env, "PLANRAG_HOME": str(tmp_path / "worker")}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert " ready: " in worker.stdout.readline()
        ana.get_by_test_id("stAlert").filter(has_text="Waiting for your review — run").wait_for()
        run_id = ana.evaluate("() => new URLSearchParams(location.search).get('run')")
        assert run_id
        ben.goto(f"{url}/run?run={run_id}")
        ben.get_by_test_id("stAlert").filter(has_text="Waiting for your review — run").wait_for()
        approve_as(ben, "Ben Ode")
        ana.get_by_text("Final answer").first.wait_for()  # Ana's page followed the run to its end on the worker
        ana.screenshot(path=shots / "team-finished-on-a-worker.png", full_page=True)
        ben.get_by_text("Final answer").first.wait_for()
    finally:
        worker.terminate()
        worker.wait(30)
