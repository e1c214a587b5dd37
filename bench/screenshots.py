"""Screenshots of the app's pages for the README (all but the Run page at a pause and finished, which
tests/test_e2e_browser.py takes), and the first-render time.

Starts ``streamlit run app.py`` on a free localhost port with a temporary PLANRAG_HOME (no user data is read or
written) and no OPENAI_* variables, drives it in headless Chromium (Debian's /usr/bin/chromium, or $CHROMIUM;
Playwright never downloads a browser) and writes docs/screenshots/*.png. Every request that leaves localhost is
blocked and printed (tests/browser.py): the app must work offline. Prints the time from navigation to the first
page's title (target: 2 s after the server is up). Needs the DQA data (DQA_DIR or ../shared/dqa).

No model is used: Compare runs the shipped scripted demo where re-planning matters (Distribution centre question 2,
assets/replays), whose PlanRAG run History opens and the Run page shows the timeline of; the Benchmark page runs
scripted transcripts (tests/bench_scripts.py) of DQA questions 1-3, and its Compare sets tab drills down into a
question; Learned plans shows the versions ``python -m core autoplan train`` learns from the tests' scripted
transcript, trained into the temporary home before the app starts. The Run page mid-run is the scripted demo's
PlanRAG run after its re-plan, taken on an app of its own whose model is a stub OpenAI-compatible server
(tests/streaming_stub.py, on 127.0.0.1) streaming the demo's scripted replies, held in the middle of one.

Usage: python bench/screenshots.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.scenarios.dqa.source import DQA  # noqa: E402
from core.config.settings import dqa_dir  # noqa: E402
from tests.bench_scripts import write_transcripts  # noqa: E402
from tests.browser import CHROMIUM_ARGS, outside_attempts  # noqa: E402
from tests.streaming_stub import StreamingStub  # noqa: E402

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
VIEWPORT = {"width": 1440, "height": 1400}
WIDE = {"width": 1920, "height": 1480}  # for the pages with wide tables (Compare, History, Benchmark, Learned plans)
FIRST_RENDER_TARGET_S = 2.0
AUTOPLAN_TRAIN = ["autoplan", "train", "--scenario", "locating", "--db", "sqlite", "--llm",
                  f"replay:{ROOT / 'tests' / 'transcripts' / 'autoplan' / 'locating_sql_train.json'}",
                  "--train", "2-3", "--batch", "2", "--iterations", "2",
                  "--reflection", "one-call", "--reward", "rich"]  # as tests/test_autoplan.py (its transcript's
                                                                     # form): v1 and v2
BENCH_VARIANTS = {  # technique -> scenario -> what the transcript of questions 1-3 does (tests/bench_scripts.py)
    "planrag": {"locating": ["right", "right", "wrong"], "building": ["right", "right", "not_candidate"]},
    "iterrag": {"locating": ["right", "missed", "query_error"], "building": ["missed", "right", "not_candidate"]},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(home: Path) -> dict[str, str]:
    """The environment of the app and its commands: data in ``home``, no model configured, only the shipped
    replays."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_") and k != "PLANRAG_REPLAYS"}
    env["PLANRAG_HOME"] = str(home)
    return env


def prepare(home: Path) -> Path:
    """Fill ``home`` before the app starts: AutoPlan's learned Locating plans v1 and v2 (trained on scripted
    replies), and scripted benchmark transcripts for PlanRAG and IterRAG on DQA questions 1-3 (SQLite); their folder."""
    if dqa_dir() is None:
        raise SystemExit("the DQA data is needed: set DQA_DIR (see the README)")
    trained = subprocess.run([sys.executable, "-m", "core", *AUTOPLAN_TRAIN], cwd=ROOT, env=app_env(home),
                             capture_output=True, text=True)
    if trained.returncode != 0:
        raise SystemExit(f"autoplan train failed:\n{trained.stdout}{trained.stderr}")
    print(trained.stdout.strip().splitlines()[-1])
    dqa, replays = DQA(dqa_dir()), home / "scripted"  # short: the results table shows the path
    for technique, variants in BENCH_VARIANTS.items():
        write_transcripts(dqa, replays, {scenario: [1, 2, 3] for scenario in variants}, ["sqlite"], [technique],
                          lambda q, v=variants: v[q.scenario][q.number - 1], lambda q: q.number % 2)
    return replays


@contextmanager
def streamlit_app(home: Path, timeout_s: float = 60.0, env: dict[str, str] | None = None,
                  script: Path = ROOT / "app.py"):
    """The app (or another Streamlit ``script``) running on a free localhost port with its data in ``home`` (and
    ``env`` added to its environment, e.g. a model's settings): yields its URL once its health check answers."""
    port = free_port()
    log = tempfile.TemporaryFile("w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script.name, "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"], cwd=script.parent, env={**app_env(home), **(env or {})},
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with direct.open(f"{url}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise SystemExit(f"the app did not start on {url}:\n{log.read()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=120)  # a hang guard: a loaded machine stops it slowly
        log.close()


def settle(page: Page, charts: int = 0) -> None:
    """Wait until the script run has finished and at least ``charts`` plotly charts are drawn."""
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
                           timeout=120_000)
    # code blocks highlighted and tables drawn (both come a moment after their element on a loaded machine)
    page.wait_for_function("""() => {
        const shown = selector => [...document.querySelectorAll(selector)].filter(e => e.checkVisibility());
        return !shown('[data-testid="stSkeleton"]').length
            && shown('[data-testid="stCode"]').every(e => e.textContent.trim())
            && shown('[data-testid="stDataFrame"]').every(e => e.querySelector('canvas'));
    }""", timeout=120_000)
    page.wait_for_timeout(600)  # plotly's transitions and Streamlit's element fade-in


def choose(page: Page, label: str, text: str) -> None:
    """Pick the option of the selectbox ``label`` that matches ``text`` (typed into its search)."""
    page.get_by_label(label).first.click()
    page.keyboard.type(text)
    page.get_by_role("option").first.click()


def pick(page: Page, name: str) -> None:
    """Select the segmented-control option ``name`` unless it is selected (clicking it again would deselect it)."""
    option = page.get_by_role("radio", name=name, exact=True)
    if not option.is_checked():
        option.click()


def click_node(page: Page, name: str) -> None:
    """Click the network node labelled ``name`` (its marker is the point with the same index as the label)."""
    node = page.evaluate_handle("""name => {
        for (const trace of document.querySelectorAll('.js-plotly-plot .scatterlayer .trace')) {
            const i = [...trace.querySelectorAll('.textpoint text')].map(t => t.textContent).indexOf(name);
            if (i >= 0) return trace.querySelectorAll('.points path')[i];
        }
        throw new Error('no node labelled ' + name);
    }""", name).as_element()
    node.scroll_into_view_if_needed()
    box = node.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def shoot(page: Page, out: Path, name: str, top: str = "h1", until: str | None = None) -> None:
    """Screenshot the viewport, scrolled so that the first element matching ``top`` is at its top; cut below the
    first element matching ``until`` when it ends higher up."""
    page.locator(top).first.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.mouse.move(2, 2)  # no hover label
    page.wait_for_timeout(400)
    path = out / f"{name}.png"
    size = page.viewport_size
    if until:
        box = page.locator(until).first.bounding_box()
        size = {**size, "height": min(size["height"], round(box["y"] + box["height"] + 32))}
    page.screenshot(path=path, clip={"x": 0, "y": 0, **size})
    print(f"wrote {path}")


@contextmanager
def viewport(page: Page, size: dict):
    """The page at another viewport size, then back at VIEWPORT."""
    page.set_viewport_size(size)
    try:
        yield
    finally:
        page.set_viewport_size(VIEWPORT)


def first_render(page: Page, url: str, session: str) -> None:
    """Open the app and print how long its first page takes to show its title and to draw its chart."""
    start = time.perf_counter()
    page.goto(url)
    page.get_by_role("heading", name="Scenarios").wait_for()
    title = time.perf_counter() - start
    settle(page, charts=1)
    drawn = time.perf_counter() - start
    verdict = "within" if title <= FIRST_RENDER_TARGET_S else "OVER"
    print(f"{session}: first page title visible {title:.2f} s after navigation ({verdict} the "
          f"{FIRST_RENDER_TARGET_S:.0f} s target), its network chart drawn after {drawn:.2f} s "
          f"(load average {os.getloadavg()[0]:.1f})")


def scenarios(page: Page, out: Path) -> None:
    page.get_by_role("radio", name="DQA benchmark").click()
    page.get_by_text('the country named "SWE"').wait_for()
    settle(page, charts=1)
    click_node(page, "krakow")
    page.get_by_role("button", name="Explore from here").wait_for()  # the clicked node's rows
    settle(page, charts=1)
    shoot(page, out, "scenarios-locating")
    page.get_by_role("radio", name="Building").click()
    page.get_by_text("market price of furniture").wait_for()
    settle(page, charts=1)
    shoot(page, out, "scenarios-building")


def decision_check(page: Page, out: Path) -> None:
    page.get_by_role("radio", name="Locating").click()
    page.get_by_text('the country named "SWE"').wait_for()
    settle(page, charts=1)
    page.get_by_role("link", name="Decision check").click()
    page.get_by_role("heading", name="Decision check").wait_for()
    settle(page, charts=2)
    choose(page, "Pick a candidate", "novgorod")
    page.get_by_text("rank 2 of 79").wait_for()
    settle(page, charts=2)
    shoot(page, out, "decision")
    shoot(page, out, "decision-what-if", "h3:has-text('What if')")


def settings(page: Page, out: Path) -> None:
    page.get_by_role("link", name="Settings").click()
    page.get_by_role("heading", name="Settings").wait_for()
    page.get_by_role("button", name="Test connections").click()
    page.get_by_text("ladybug (cypher) is available").wait_for()
    page.get_by_role("button", name="Use and test").click()
    page.get_by_text("200 locating questions").wait_for()
    settle(page)
    shoot(page, out, "settings")


def compare(page: Page, out: Path, url: str) -> None:
    """The scripted demo where re-planning matters (docs/scenarios.md): Distribution centre question 2."""
    page.goto(f"{url}/compare?q=scenario/depot/2")
    page.get_by_role("heading", name="Compare").wait_for()
    page.get_by_text("scenario/depot/2").first.wait_for()
    settle(page)
    page.get_by_text("PlanRAG w/o RP", exact=True).click()
    settle(page)
    choose(page, "LLM", "Recorded replays")
    page.get_by_role("button", name="Run side by side").click()
    page.get_by_text("Decision:").nth(2).wait_for(timeout=60_000)  # the three runs ended
    with viewport(page, WIDE):
        settle(page)
        shoot(page, out, "compare")


def history(page: Page, out: Path) -> None:
    page.get_by_role("link", name="History").click()
    page.get_by_role("heading", name="History").wait_for()
    choose(page, "Open a run", "PlanRAG · scenario/depot/2")
    page.get_by_text("Final answer:").first.wait_for()
    with viewport(page, WIDE):
        settle(page)
        shoot(page, out, "history")
    page.get_by_role("button", name="Open in the Run view").click()  # the run's timeline, on the Run page
    page.get_by_role("heading", name="Run", exact=True).wait_for()
    page.get_by_text("Where the time went").click()
    page.get_by_text("In LLM calls").wait_for()
    settle(page, charts=1)
    shoot(page, out, "run-timeline", top="[data-testid='stExpander']:has-text('Where the time went')")


def benchmark(page: Page, out: Path, replays: Path) -> None:
    page.get_by_role("link", name="Benchmark").click()
    page.get_by_role("heading", name="Benchmark").wait_for()
    choose(page, "Techniques", "IterRAG")
    page.get_by_label("Model", exact=True).fill(f"replay:{replays}")
    page.get_by_role("textbox", name="Questions", exact=True).fill("1-3")
    page.get_by_label("Results name", exact=True).fill("scripted-replays")
    page.get_by_role("button", name="Start").click()
    page.get_by_text("the results are on the Results tab").wait_for(timeout=60_000)
    page.get_by_role("link", name="Benchmark").click()  # a fresh run of the page reads the finished results
    page.get_by_role("tab", name="Results").click()
    page.get_by_text("Accuracy % per scenario and database").wait_for()
    with viewport(page, WIDE):
        settle(page, charts=4)
        shoot(page, out, "benchmark", until="[data-testid='stPlotlyChart']")  # the accuracy table and bars
    page.get_by_role("tab", name="Compare sets").click()  # PlanRAG against IterRAG, drilled down into a question
    panel = page.get_by_role("tabpanel", name="Compare sets")
    panel.get_by_text("Paired questions").first.wait_for()
    settle(page)
    changes = panel.locator("[data-testid='stDataFrame']").last
    changes.scroll_into_view_if_needed()
    box = changes.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 18)  # the first row's box
    page.get_by_role("button", name="Open both side by side in Compare").wait_for()
    with viewport(page, WIDE):
        settle(page)
        shoot(page, out, "benchmark-compare-sets", top="h1")


def learned_plans(page: Page, out: Path, url: str) -> None:
    page.goto(f"{url}/plans?q=dqa/locating/1")  # the trained scenario's question (Compare left the depot's current)
    page.get_by_role("heading", name="Learned plans").wait_for()
    page.get_by_role("heading", name="Accuracy by iteration").wait_for()
    page.locator("[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg").first.wait_for()
    with viewport(page, WIDE):
        settle(page)
        shoot(page, out, "plans", until="[data-testid='stDataFrame'] >> nth=1")  # down to the iterations' table


MIDRUN_REPLIES = ROOT / "assets" / "replays" / "scenario_depot_2_sql_planrag.json"  # the scripted demo's PlanRAG
MIDRUN_HELD = 5  # the reply held mid-way: the fifth, after the re-plan (the new plan's second step)


class HeldStub(StreamingStub):
    """Streams the replies line by line; only the ``held``-th waits before its last line until ``release``."""

    def __init__(self, replies: list[str], held: int):
        super().__init__([r.splitlines(keepends=True) for r in replies], gap=lambda: 0.05)
        self.held = held

    def _chat(self, handler, body: dict) -> None:
        self.hold = len(self.requests) + 1 == self.held
        super()._chat(handler, body)


def run_midrun(page: Page, url: str, out: Path) -> None:
    """The Run page while the scripted demo's PlanRAG run goes on: the new plan as a checklist, its current step
    highlighted, the steps so far and the reply the model is writing."""
    page.goto(f"{url}/run?q=scenario/depot/2")
    page.get_by_role("heading", name="Run", exact=True).wait_for()
    settle(page)
    page.get_by_text("None (automatic)").click()
    settle(page)
    page.get_by_role("button", name="Start", exact=True).click()
    page.get_by_text("I can compute the costs from the observed data").first.wait_for()  # the held reply, written
    page.wait_for_timeout(1000)  # the page's next draws (a run going on never settles)
    shoot(page, out, "run-midrun")


def run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    blocked: list[str] = []
    with tempfile.TemporaryDirectory(prefix="planrag-") as home:
        replays = prepare(Path(home))
        with streamlit_app(Path(home)) as url:
            browse(url, out, replays, blocked)
    midrun(out, blocked)
    print("requests that left localhost (blocked): " + (", ".join(sorted(set(blocked))) or "none"))


def midrun(out: Path, blocked: list[str]) -> None:
    """The Run page mid-run (``run_midrun``), on an app of its own whose model is the held stub."""
    stub = HeldStub(json.loads(MIDRUN_REPLIES.read_text()), MIDRUN_HELD)
    try:
        with tempfile.TemporaryDirectory(prefix="planrag-") as home, \
                streamlit_app(Path(home), env={"OPENAI_MODEL": "stand-in", "OPENAI_BASE_URL": stub.url}) as url:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                context = browser.new_context(viewport=VIEWPORT)
                context.set_default_timeout(120_000)  # a hang guard, as in ``browse``
                attempted = outside_attempts(context)
                run_midrun(context.new_page(), url, out)
                stub.release.set()  # the run ends before the app stops
                browser.close()
                blocked.extend(attempted)
    finally:
        stub.close()


def browse(url: str, out: Path, replays: Path, blocked: list[str]) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(120_000)  # a hang guard: a loaded machine draws slowly
        attempted = outside_attempts(context)
        first_render(context.new_page(), url, "server's first session")
        page = context.new_page()
        first_render(page, url, "a second session")
        scenarios(page, out)
        decision_check(page, out)
        settings(page, out)
        compare(page, out, url)
        history(page, out)
        benchmark(page, out, replays)
        learned_plans(page, out, url)
        browser.close()
        blocked.extend(attempted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    run(parser.parse_args().out.resolve())


if __name__ == "__main__":
    main()
