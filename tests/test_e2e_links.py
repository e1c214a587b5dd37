"""Links that can be shared, in headless Chromium (skipped without Debian's chromium unless REQUIRE_BROWSER=1): a
row clicked on History opens its run and puts it in the address, which opens the same run in a second session; a
link to Run names its question; a bad link says so; no Arrow conversion error in the server's log."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.test_e2e_browser import ROOT, app_server, chromium, wait_healthy  # noqa: F401 - chromium is a fixture

LAUNCHER = "import sys; from streamlit.web import cli; sys.argv[0] = 'streamlit'; sys.exit(cli.main())"
SEED = """
import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from core.llm.replays import replays
runtime = jobs.open_runtime()
for scenario, technique in (("locating", "iterrag"), ("building", "planrag"), ("locating", "planrag")):
    runtime.start(RunSettings(scenario, 1, "sqlite", technique, replays("demo", scenario, 1, "sql", technique)[0].spec,
                              source="demo"))
runtime.close()
"""


@pytest.fixture
def server(tmp_path):
    """The app with three finished demo runs in its home: its URL, process and log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
    env["PLANRAG_HOME"] = str(tmp_path / "home")
    subprocess.run([sys.executable, "-c", SEED], cwd=ROOT, env=env, check=True, capture_output=True)
    log = tmp_path / "server.log"
    with app_server(LAUNCHER, env, log) as (url, process):
        wait_healthy(url, process)
        yield url, log


def idle(page) -> None:
    page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')", timeout=60_000)


def test_a_clicked_history_row_is_a_link_another_session_opens(chromium, server):
    from playwright.sync_api import expect

    url, log = server
    first = chromium.new_context(viewport={"width": 1440, "height": 900}).new_page()
    first.goto(f"{url}/history")
    grid = first.get_by_test_id("stDataFrame").first
    expect(grid).to_be_visible()
    idle(first)
    assert first.evaluate("new URLSearchParams(location.search).get('run')") is None  # none opened until asked for
    box = grid.bounding_box()
    first.mouse.click(box["x"] + 15, box["y"] + 35 * 2 + 17)  # the second row's selection cell
    first.wait_for_function("new URLSearchParams(location.search).get('run') !== null")
    run_id = first.evaluate("new URLSearchParams(location.search).get('run')")
    expect(first.locator("code", has_text=run_id).first).to_be_visible()  # the run's panel below

    second = chromium.new_context(viewport={"width": 1440, "height": 900}).new_page()
    second.goto(first.evaluate("location.href"))
    expect(second.locator("code", has_text=run_id).first).to_be_visible()
    idle(second)
    assert second.evaluate("new URLSearchParams(location.search).get('run')") == run_id

    second.goto(f"{url}/run?q=demo/building/2")
    expect(second.get_by_text("demo/building/2").first).to_be_visible()
    second.goto(f"{url}/decision?q=demo/building/9")
    expect(second.get_by_text("which cannot be opened here")).to_be_visible()
    idle(second)
    assert "ArrowTypeError" not in log.read_text()
