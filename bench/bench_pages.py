"""How soon each page shows its main content after navigation (target: 1 s), measured in headless Chromium as a
person navigates: a click on the page's link in the sidebar, then the time until the page's title and its main
content (a page's chart, table or first control, below) are drawn. Once the page's script has run, the content
it draws further down or in a hidden tab (``CONTENT``, e.g. the Benchmark's results tables) must be there and no
exception box anywhere: a page that draws its first control and then fails is reported broken, not fast. Prints
the first page of the fresh server (a new browser opening the app: the time to its title, question and controls,
``FIRST_LOOK``, target 2 s; then to its network figure), each page's median (target 1 s) and worst (target 2 s)
over ``--rounds`` rounds, with the load (``uptime``) before and after, and flags misses; exits 1 when a page misses
or breaks. The first figure waits for Streamlit's Plotly bundle (4.7 MB of JavaScript, loaded when a page first
draws a chart, then kept): the bench also times a Streamlit app that draws only a title and a three-point chart on a
fresh server (``FLOOR_APP``), the least any first figure takes on this machine; the first page's figure is reported
beside it, not counted as a miss. How soon an agent's event reaches the browser
(target: 300 ms) is measured by tests/test_e2e_browser.py, which prints it.

Starts the app like bench/screenshots.py (a free localhost port, a temporary PLANRAG_HOME with three demo runs and
the smoke benchmarks of the demo and of the plugin scenarios, no model, requests leaving localhost blocked). The figures rest on this machine's load: run it
on a quiet machine with the core count you mean to state (e.g. ``taskset -c 0,1``).

Usage: python bench/bench_pages.py [--rounds 3] [--target 1.0]
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from screenshots import CHROMIUM, CHROMIUM_ARGS, app_env, streamlit_app  # noqa: E402

#: Page title in the sidebar -> what shows that its main content is there.
MAIN_CONTENT = {
    "Scenarios": "[data-testid=stPlotlyChart] .main-svg",
    "Run": "button:has-text('Start')",
    "Decision check": "[data-testid=stPlotlyChart] .main-svg",
    "Compare": "button:has-text('Run side by side')",
    "History": "[data-testid=stDataFrame]",
    "Benchmark": "[data-testid=stFormSubmitButton] button",
    "Learned plans": "[data-testid=stAlert], [data-testid=stDataFrame]",
    "Settings": "[data-testid=stTextInput]",
}
#: Page title -> what the page draws once its script has run, in any tab (attached, not necessarily visible).
CONTENT = {
    "Benchmark": "[data-testid=stDataFrame]",  # the Results tab's tables (the Run tab has none)
}
EXCEPTION = "[data-testid=stException]"
#: Requests leaving localhost (blocked). A pattern, not a function: each request a function sees waits on this
#: process (a page's first look fetches about 150 files), which the timings would count.
NOT_LOCAL = re.compile(r"^(?!(?:https?|wss?)://(?:127\.0\.0\.1|localhost)[:/])")
#: What shows the first page's (Scenarios') own content: its title, the question picker and the question's facts.
FIRST_LOOK = ("h1", "[data-testid=stSelectbox]", "[data-testid=stMetric]")
FIGURE = "[data-testid=stPlotlyChart] .main-svg"
FLOOR_APP = """
import plotly.graph_objects as go
import streamlit as st
st.title("Floor")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))
"""


class Broken(Exception):
    """A page showed an exception box, or not its content."""
SEED = """
import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
import core.jobs.benchmarks as bench_jobs
from core.auth.roles import local_admin
from core.benchmark.smoke import smoke_config
from core.llm.replays import replays
runtime = jobs.open_runtime()
for scenario, technique in (("locating", "iterrag"), ("locating", "planrag"), ("building", "planrag")):
    spec = replays("demo", scenario, 1, "sql", technique)[0].spec
    runtime.start(RunSettings(scenario, 1, "sqlite", technique, spec, source="demo"))
runtime.close()
bench_jobs.start(smoke_config(), who=local_admin())._thread.join(600)
bench_jobs.start(smoke_config(source="scenario", db="sqlite"), who=local_admin())._thread.join(600)
"""


def idle(page: Page) -> None:
    """Wait until the script run has finished (Streamlit's running indicator gone)."""
    page.wait_for_function("!document.querySelector('[data-testid=stStatusWidget]')", timeout=60_000)


def navigate(page: Page, title: str) -> float:
    """Seconds from a click on the page's sidebar link to its title and main content drawn."""
    link = page.locator("[data-testid=stSidebarNav] a", has_text=title).first
    start = time.perf_counter()
    link.click()
    page.locator("h1", has_text=title).first.wait_for(timeout=60_000)
    page.locator(MAIN_CONTENT[title]).first.wait_for(state="visible", timeout=60_000)
    seconds = time.perf_counter() - start
    idle(page)
    if title in CONTENT:
        try:
            page.locator(CONTENT[title]).first.wait_for(state="attached", timeout=30_000)
        except PlaywrightTimeout:
            raise Broken(f"{title}: its content ({CONTENT[title]}) is not drawn") from None
    if page.locator(EXCEPTION).count():
        raise Broken(f"{title}: {page.locator(EXCEPTION).first.inner_text()[:2000]}")
    return seconds


def check_results(page: Page, names: list[str]) -> None:
    """Open every stored benchmark on Benchmark -> Results (not timed): each must draw its tables and no exception
    box (one crashing set, e.g. the plugin scenarios' smoke benchmark, broke the page for everyone)."""
    page.locator("[data-testid=stSidebarNav] a", has_text="Benchmark").first.click()
    idle(page)
    page.get_by_role("tab", name="Results").click()
    for name in names:
        page.locator("[data-testid=stSelectbox]:visible", has_text="Results").first.click()
        page.keyboard.type(name)
        page.get_by_role("option", name=name, exact=True).click()
        idle(page)
        if page.locator(EXCEPTION).count():
            raise Broken(f"Benchmark results {name}: {page.locator(EXCEPTION).first.inner_text()[:2000]}")
        try:
            page.locator("[data-testid=stDataFrame]").first.wait_for(state="visible", timeout=30_000)
        except PlaywrightTimeout:
            raise Broken(f"Benchmark results {name}: no table drawn") from None


def first_look(browser, url: str, look: tuple[str, ...] = FIRST_LOOK) -> tuple[Page, float, float]:
    """A new browser page opening ``url``, and the seconds to its first look (``look``) and to its first figure."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.route(NOT_LOCAL, lambda route: route.abort())  # a pattern matched in the driver: local requests go straight
    start = time.perf_counter()
    page.goto(url)
    for selector in look:
        page.locator(selector).first.wait_for(state="visible", timeout=60_000)
    seen = time.perf_counter() - start
    page.locator(FIGURE).first.wait_for(state="visible", timeout=60_000)
    return page, seen, time.perf_counter() - start


def floor(p) -> float:
    """Seconds to the figure of ``FLOOR_APP`` on a fresh server, in a new browser."""
    with tempfile.TemporaryDirectory(prefix="planrag-floor-") as tmp:
        script = Path(tmp) / "floor.py"
        script.write_text(FLOOR_APP)
        with streamlit_app(Path(tmp), script=script) as url:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                return first_look(browser, url, ("h1",))[2]
            finally:
                browser.close()


def uptime() -> str:
    """The machine's load as ``uptime`` states it."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", type=float, default=1.0, help="median, seconds (default 1)")
    parser.add_argument("--worst", type=float, default=2.0, help="worst and first page, seconds (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="planrag-pages-") as tmp:
        home = Path(tmp)
        subprocess.run([sys.executable, "-c", SEED], cwd=ROOT, env=app_env(home), check=True, capture_output=True)
        with streamlit_app(home) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            load_before = uptime()
            page, first, first_figure = first_look(browser, url)
            idle(page)
            times: dict[str, list[float]] = {title: [] for title in MAIN_CONTENT}
            try:
                for _ in range(args.rounds):
                    for title in [*list(MAIN_CONTENT)[1:], list(MAIN_CONTENT)[0]]:  # the first page is open
                        times[title].append(navigate(page, title))
                check_results(page, sorted(p.parent.name for p in (home / "bench").glob("*/results.sqlite")))
            except Broken as e:
                print(f"BROKEN page: {e}")
                return 1
            finally:
                browser.close()
            least = floor(p)
    cores = len(__import__("os").sched_getaffinity(0))
    print(f"{cores} cores; before: {load_before}; after: {uptime()}")
    missed = [] if first <= args.worst else ["first page"]
    print(f"first page of a fresh server -> its title, question and controls: {first:.2f} s"
          + ("" if first <= args.worst else f"  MISS (target {args.worst:.1f} s)"))
    print(f"  -> its network figure: {first_figure:.2f} s (a one-chart app's first figure here: {least:.2f} s)")
    print(f"navigation -> main content, {args.rounds} rounds:")
    for title, seconds in times.items():
        median = statistics.median(seconds)
        flag = "".join(f"  MISS ({what} target {target:.1f} s)" for what, value, target in
                       (("median", median, args.target), ("worst", max(seconds), args.worst)) if value > target)
        missed += [title] if flag else []
        print(f"  {title:<15} median {median:.2f} s · worst {max(seconds):.2f} s{flag}")
    print(f"{len(missed)} of {len(times) + 1} figures miss the target" + (f": {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
