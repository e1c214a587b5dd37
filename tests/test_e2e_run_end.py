"""Runs followed to their end in headless Chromium (issue 43 section 1), as an analyst follows them: one tab on the
Run page, Start, the run's steps and the model's reply as it streams, the outcome; then Start again. The model is
a stand-in server streaming its replies a few words at a time (tests/streaming_stub.py), so that each run ends in
a second or two. RUNS runs in a row, beside a CPU hog (a busy loop, as on a loaded machine); counted: pages gone
blank (no Streamlit app left in the page), the browser's uncaught errors, and the server's fragment errors (a
fragment's rerun for a fragment no longer there). All must be 0.

Long (about 3 to 4 minutes): marked ``long``, left out of the default ``make test`` (pyproject's addopts) and run by
``.ci/run`` as a step of its own (``pytest -m long``)."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

from core.store.runs import RunStore
from tests.streaming_stub import StreamingStub
from tests.test_e2e_browser import WAIT_MS, app_server, chromium, wait_healthy  # noqa: F401 (chromium: a fixture)

pytestmark = pytest.mark.long

RUNS = int(os.environ.get("PLANRAG_RUN_END_RUNS", "100"))
FRAGMENT_ERRORS = ("does not exist anymore", "Couldn't find fragment", "Bad delta path", "delta path")
# the page gone blank (no app left in it), or (``run`` given) laid out for that run's outcome, its script run over
ENDED_OR_BLANK = """run => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || !document.body.innerText.trim()) return 'blank';
  if (!run) return 'shown';
  const ended = [...document.querySelectorAll('button')].some(b => b.innerText.includes('Check the decision'))
    && document.querySelector(`[class*="st-key-timeline-${run}"]`)
    && !document.querySelector('[data-testid="stStatusWidget"]');
  return ended ? 'ended' : null;
}"""
PLAIN_STREAMLIT = "import sys\nfrom streamlit.web.cli import main\nsys.argv[0] = 'streamlit'\nmain()\n"


def replies(n: int) -> list[list[str]]:
    """Run ``n``'s replies, in pieces: a plan and a query, ``n % 4`` more queries, then the final answer. Runs of
    different lengths, one after another, as an analyst's questions are: the page of a run is laid out over that of
    a longer or shorter one."""
    plan = ["Plan: [Step 1: list the nodes, Step 2: choose]\n", "Current step: Step 1: list the nodes\n",
            f"Thought: run {n} looks ", "at the nodes.\n", "Action: Relational DB\n",
            "Action input: SELECT * FROM trade_node LIMIT 3"]
    more = [["Re-plan: N\n", "Current step: Step 1: list the nodes\n", f"Thought: run {n} looks again, ",
             f"time {i + 2}.\n", "Action: Relational DB\n", "Action input: SELECT trade_node FROM trade_node"]
            for i in range(n % 4)]
    answer = ["Re-plan: N\n", f"Thought: run {n} ", "has seen enough. ", "I now know the answer.\n",
              "Final answer: krakow"]
    return [plan, *more, answer]


@pytest.fixture
def hog():
    """A CPU hog beside the test: one busy process, as many at once as the machine has cores minus one (at least
    one)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(max(1, (os.cpu_count() or 2) - 1))]
    yield
    for process in hogs:
        process.kill()
        process.wait()


def test_runs_followed_to_their_end_never_blank_the_page(chromium, hog, tmp_path):  # noqa: F811
    from playwright.sync_api import expect

    draw = random.Random(43)
    stub = StreamingStub([r for n in range(RUNS) for r in replies(n)], hold=False,
                         gap=lambda: draw.uniform(0.0, 0.06))
    home = tmp_path / "home"
    # the app as an analyst starts it: its runs in its local run process (the default, PLANRAG_JOBS unset)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENAI_") and k not in ("PLANRAG_REPLAYS", "PLANRAG_JOBS")}
    env.update(PLANRAG_HOME=str(home), OPENAI_MODEL="stand-in", OPENAI_BASE_URL=stub.url)
    log = tmp_path / "server.log"
    blank, errors, started = [], [], time.monotonic()
    try:
        with app_server(PLAIN_STREAMLIT, env, log) as (url, process):
            wait_healthy(url, process)
            page = chromium.new_page(viewport={"width": 1500, "height": 1200})
            page.set_default_timeout(WAIT_MS)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/run")
            page.get_by_role("heading", name="Run").wait_for()
            store = RunStore(home / "runs.sqlite")
            for n in range(RUNS):
                start = page.get_by_role("button", name="Start")
                expect(start).to_have_count(1)  # the page redrawn: the disabled Start of the run before gone
                expect(start).to_be_enabled()
                known = {r.id for r in store.list(limit=None)}
                start.click()
                # a hang guard; the first run of a fresh server loads the agent's libraries first, many seconds on
                # a loaded machine
                deadline = time.monotonic() + WAIT_MS / 1000 * (3 if n == 0 else 1)
                while not (new := {r.id for r in store.list(limit=None)} - known):
                    assert time.monotonic() < deadline, f"run {n + 1} did not start"
                    page.wait_for_timeout(50)
                [run_id] = new
                while store.get(run_id, events=False).status != "finished":
                    assert time.monotonic() < deadline, f"run {n + 1} did not finish"
                    page.wait_for_timeout(50)
                state = page.wait_for_function(ENDED_OR_BLANK, arg=run_id).json_value()
                if state == "ended":
                    page.wait_for_timeout(300)  # the page a moment after its end: gone blank then?
                    state = page.evaluate(f"({ENDED_OR_BLANK})(null)")
                if state == "blank":
                    blank.append(n)
                    page.goto(f"{url}/run")  # a reload brings it back (the analyst's only way out)
                    page.get_by_role("heading", name="Run").wait_for()
            runs = store.list(limit=None)
    finally:
        stub.close()
    took = time.monotonic() - started
    fragment_errors = [line for line in log.read_text().splitlines() if any(e in line for e in FRAGMENT_ERRORS)]
    print(f"\n{RUNS} runs followed to their end in {took:.0f} s beside a CPU hog: {len(blank)} blank pages, "
          f"{len(errors)} page errors, {len(fragment_errors)} fragment errors in the server log")
    assert len(runs) == RUNS and all(r.status == "finished" for r in runs), [r.status for r in runs]
    assert not blank, f"the page went blank at the end of runs {blank}; page errors: {errors[:5]}"
    assert not errors, errors[:5]
    assert not fragment_errors, fragment_errors[:5]
