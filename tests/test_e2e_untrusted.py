"""Issue 27, section 2, as a person would meet it: headless Chromium (skipped without Debian's chromium unless
REQUIRE_BROWSER=1) loads every page with hostile data (a run whose replies, cells and column names are Markdown
images and links to an outside host, a plugin whose title, question and rules are, a benchmark of it in sets
named after the host (the Results and Compare sets tabs), and links whose parameters are) while every request and WebSocket is watched (tests/browser.py): none leaves localhost, and no link or image from the data appears."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from urllib.parse import quote

import pytest

from tests.browser import outside_attempts
from tests.test_e2e_browser import ROOT, app_server, chromium, wait_healthy  # noqa: F401 - chromium is a fixture
from tests.test_e2e_links import LAUNCHER, idle
from tests.test_page_untrusted import HOST, PAYLOAD, URL_PARAM

SEED = """
import json, sys
import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
runtime = jobs.open_runtime()
result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", "replay:" + sys.argv[1], source="demo"))
runtime.close()
from core.benchmark.runner import Bench, BenchConfig  # a benchmark of the hostile plugin, in sets named after the host
for name in sys.argv[3:]:
    Bench(BenchConfig(["iterrag", "planrag"], "replay:" + sys.argv[2], scenario="hostile", source="scenario",
                      questions="1", name=name, cache=False)).run()
print(result.run_id)
"""
# Results names are refused unless letters, digits, spaces and -_. (core.benchmark.config.check_name, issue 44):
# the most hostile names that pass are bare hosts, which Markdown would turn into links.
SET_NAMES = ["set www.evil.test", "other evil.test_phish"]


@pytest.fixture
def server(tmp_path):
    """The app with a hostile finished run and a hostile plugin scenario: its URL and the run's id."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
    env["PLANRAG_HOME"] = str(tmp_path / "home")
    folder = tmp_path / "scenarios"
    shutil.copytree(ROOT / "assets" / "scenarios" / "depot", folder / "depot")
    manifest = folder / "depot" / "scenario.toml"
    manifest.write_text(manifest.read_text().replace('name = "depot"', 'name = "hostile"')
                        .replace('title = "Distribution centre"', f'title = "Depot {PAYLOAD}"')
                        .replace("We deliver parcels", f"We deliver parcels {PAYLOAD}"))
    (folder / "depot" / "rules.md").write_text(f"Rules {PAYLOAD}\n")
    env["PLANRAG_SCENARIOS"] = str(folder)
    query = f"SELECT '{PAYLOAD}' AS \"{PAYLOAD}\", source FROM flow LIMIT 2"
    replay = tmp_path / "hostile.json"
    replay.write_text(json.dumps([f"Thought: {PAYLOAD}\nAction: Relational DB\nAction input: {query}",
                                  f"Thought: done {PAYLOAD}\nFinal answer: doab {PAYLOAD}"]))
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps([f"Thought: I now know the answer. {PAYLOAD}\nFinal answer: {PAYLOAD}"]))
    out = subprocess.run([sys.executable, "-c", SEED, str(replay), str(answer), *SET_NAMES], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip().splitlines()[-1]
    with app_server(LAUNCHER, env, tmp_path / "server.log") as (url, process):
        wait_healthy(url, process)
        yield url, run_id


def no_outside_links(page, where: str) -> None:
    """No link to the outside host and no image from it on the page as drawn (late renders given their chance)."""
    page.wait_for_timeout(500)  # late renders have their chance to fetch
    links = page.eval_on_selector_all(f"a[href*='{HOST}']", "els => els.map(e => e.href)")
    images = page.eval_on_selector_all(f"img[src*='{HOST}'], image[href*='{HOST}']",
                                       "els => els.map(e => e.outerHTML)")
    assert not links and not images, (where, links, images)


def test_no_page_fetches_or_links_outside_with_hostile_data(chromium, server):
    from playwright.sync_api import expect

    url, run_id = server
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    outside = outside_attempts(context)
    page = context.new_page()
    q = "q=demo/locating/1"
    visits = [f"run?{q}&run={run_id}", f"history?run={run_id}", f"decision?{q}&run={run_id}",
              f"compare?{q}&runs={run_id}", "scenarios?q=scenario/hostile/1", "run?q=scenario/hostile/1",
              "decision?q=scenario/hostile/1", "plans", "benchmark",
              f"run?q={quote(URL_PARAM)}", f"run?run={quote(URL_PARAM)}", f"history?run={quote(URL_PARAM)}",
              f"decision?q={quote(URL_PARAM)}", f"compare?runs={quote(URL_PARAM)}"]
    for path in visits:
        page.goto(f"{url}/{path}")
        idle(page)
        # every other page shows hostile text; these show none of the run's or plugin's text (the Decision check of
        # the demo run shows only its graded pick, a candidate's name; Run names the plugin question by its id;
        # Compare does not echo the runs its link names)
        if path not in ("plans", "benchmark", "decision?q=scenario/hostile/1", f"decision?{q}&run={run_id}",
                        "run?q=scenario/hostile/1", f"compare?runs={quote(URL_PARAM)}"):
            expect(page.get_by_text(re.compile(r"evil\.test|phish")).first).to_be_visible(timeout=60_000)
        if path == f"run?{q}&run={run_id}":  # the run's timeline (its spans' labels), drawn only once opened
            page.get_by_text("Where the time went").click()
            expect(page.get_by_test_id("stPlotlyChart")).to_be_visible(timeout=60_000)
            idle(page)
        if path == "benchmark":  # the Results tab: the plugin's title, the sets' names, the results
            page.get_by_role("tab", name="Results").click()
            expect(page.get_by_text(re.compile(r"Depot .*evil\.test"))).not_to_have_count(0, timeout=60_000)
            idle(page)
            no_outside_links(page, path + " (Results)")  # only the open tab is drawn: each is looked at
            page.get_by_role("tab", name="Compare sets").click()
            idle(page)
        no_outside_links(page, path)
    assert outside == [], outside
    page.goto(f"{url}/run?{q}&run={run_id}")
    expect(page.get_by_text(f"{HOST}/phish").first).to_be_visible()  # the hostile text is there, as text
