"""How soon each page shows its main content after navigation, measured in headless Chromium as a person
navigates: a click on the page's link in the sidebar, then the time until the page's title and its main content (a
page's chart, table or first control, below) are drawn. Once the page's script has run, the content it draws further
down (``CONTENT``, e.g. the Benchmark's smoke button below its form) must be there and no exception box anywhere: a
page that draws its first control and then fails is reported broken, not fast. The Benchmark's Results tab, drawn
only when open, is checked with a click on it for every stored benchmark (``check_results``).

The first page of a fresh server is set beside Streamlit's own floors on this machine, each timed on a fresh server in
a new browser, interleaved with the app's ``--fresh`` times so that load falls on all alike: an app drawing only a
title (``TITLE_APP``, the least a first look can take) and one drawing a title and a three-point chart
(``CHART_APP``: the first figure waits for Streamlit's Plotly bundle, 4.7 MB of JavaScript); and, for what the first
look's own elements cost the browser, one drawing them and computing nothing (``SAME_ELEMENTS_APP``). Prints the
medians and their ratios: the first look (title, question and controls) ≤ 1.25× the title floor, the first figure (the network)
≤ 1.2× the chart floor; what holds the first look (its title's time, and in how many loads the rest of it came
only with the figure); then each page's median (target 0.6 s) and worst (target 1.5 s) over ``--rounds`` rounds;
and an ended run opened by its link in a new tab (``LINKED`` tabs: the time to its outcome's "Check the decision"
button, printed beside the title floor, without a target of its own).
Every figure is printed with the load average and core count at its time; exits 1 when a figure misses or a page
breaks. How soon an agent's event reaches the browser (target: 300 ms) is measured by tests/test_e2e_browser.py.

Starts the app like bench/screenshots.py (a free localhost port, a temporary PLANRAG_HOME with three demo runs and
the smoke benchmarks of the demo and of the plugin scenarios, no model, requests leaving localhost blocked);
``--app`` times another checkout's app.py (e.g. a ``git worktree`` of the commit before a change, for a side-by-side
comparison in one sitting). The figures rest on this machine's load: compare only figures taken together.

Usage: python bench/bench_pages.py [--rounds 3] [--fresh 3] [--app PATH/app.py]
"""
from __future__ import annotations

import argparse
import os
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
#: Page title -> what the page draws last once its script has run (attached, not necessarily in view).
CONTENT = {
    "Benchmark": "button:has-text('Run the smoke benchmark')",  # below the Run tab's form (Results: check_results)
}
EXCEPTION = "[data-testid=stException]"
#: What shows the first page's (Scenarios') own content: its title, the question picker and the question's facts.
FIRST_LOOK = ("h1", "[data-testid=stSelectbox]", "[data-testid=stMetric]")
FIGURE = "[data-testid=stPlotlyChart] .main-svg"
TITLE_APP = """
import streamlit as st
st.title("Floor")
"""
CHART_APP = """
import plotly.graph_objects as go
import streamlit as st
st.title("Floor")
st.plotly_chart(go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2])))
"""
#: The first look's elements as the app draws them (a sidebar with its menu, toggle and name box; a title, two
#: segmented controls, a question picker and a metric), computing nothing: the browser loads each kind's code on its
#: first use, which a title alone does not ask for. Printed beside the title floor, without a target of its own.
SAME_ELEMENTS_APP = """
import streamlit as st
st.set_page_config(page_title="Floor", page_icon="🧭", layout="wide")
def page():
    st.sidebar.toggle("Hide answers")
    st.sidebar.text_input("Your name")
    st.title("Scenarios")
    left, right = st.columns(2)
    left.segmented_control("Scenario", ["Locating", "Building"], default="Locating")
    right.segmented_control("Source", ["DQA", "Demo"], default="Demo")
    st.selectbox("Question", ["1", "2"])
    text, facts = st.columns([3, 1])
    text.markdown("The question")
    facts.metric("Candidate decisions", 12)
st.navigation([st.Page(page, title="Scenarios", icon=":material/hub:"),
               st.Page(lambda: None, title="Run", icon=":material/play_circle:", url_path="run")]).run()
"""
FIRST_LOOK_RATIO = 1.25  # the first look / the title floor
FIRST_FIGURE_RATIO = 1.2  # the first figure / the chart floor
WITH_FIGURE_S = 0.2  # a first look drawn this close to the figure waited for it
LINKED = 5  # new tabs opening an ended run by its link


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
bench_jobs.start(smoke_config(), who=local_admin()).join(600)
bench_jobs.start(smoke_config(source="scenario", db="sqlite"), who=local_admin()).join(600)
print(jobs.open_store().list(status="finished")[0].id)
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
    page.get_by_role("tab", name="Results").click()  # drawn only when open: a rerun of the page
    idle(page)
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


def first_look(browser, url: str, look: tuple[str, ...] = FIRST_LOOK,
               figure: bool = True) -> tuple[Page, float, float | None, float]:
    """A new browser page opening ``url``, and the seconds to its first look (``look``), to its first figure and to
    the look's first part (the title)."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    start = time.perf_counter()
    page.goto(url)
    page.locator(look[0]).first.wait_for(state="visible", timeout=60_000)
    title = time.perf_counter() - start
    for selector in look[1:]:
        page.locator(selector).first.wait_for(state="visible", timeout=60_000)
    seen = time.perf_counter() - start
    if not figure:
        return page, seen, None, title
    page.locator(FIGURE).first.wait_for(state="visible", timeout=60_000)
    return page, seen, time.perf_counter() - start, title


def linked_run(browser, url: str, run_id: str) -> float:
    """Seconds from a new tab's visit of an ended run's link (``/run?run=ID``) to its outcome's "Check the decision"
    button: the page a colleague's link opens."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page = context.new_page()
        start = time.perf_counter()
        page.goto(f"{url}/run?run={run_id}")
        page.get_by_role("button", name="Check the decision").wait_for(timeout=60_000)
        return time.perf_counter() - start
    finally:
        context.close()


def fresh(p, script: Path, home: Path, look: tuple[str, ...], figure: bool) -> tuple[float, float | None, str, float]:
    """The first look and first figure of ``script`` on a fresh server (data in ``home``) in a new browser, the load
    at the time and the look's title."""
    with streamlit_app(home, script=script) as url:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, seen, drawn, title = first_look(browser, url, look, figure)
            idle(page)
            return seen, drawn, load(), title
        finally:
            browser.close()


def load() -> str:
    """The load averages (1, 5, 15 min) and the cores this process may use."""
    return f"load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}, {len(os.sched_getaffinity(0))} cores"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="navigation rounds through every page")
    parser.add_argument("--fresh", type=int, default=3, help="fresh servers for the first page and each floor")
    parser.add_argument("--target", type=float, default=0.6, help="a page's median, seconds (default 0.6)")
    parser.add_argument("--worst", type=float, default=1.5, help="a page's worst, seconds (default 1.5)")
    parser.add_argument("--app", type=Path, default=ROOT / "app.py", help="the app to time (default: this one's)")
    args = parser.parse_args()
    app = args.app.resolve()
    with tempfile.TemporaryDirectory(prefix="planrag-pages-") as tmp:
        home, floors = Path(tmp) / "home", Path(tmp) / "floors"
        home.mkdir()
        floors.mkdir()
        (floors / "title.py").write_text(TITLE_APP)
        (floors / "chart.py").write_text(CHART_APP)
        (floors / "same.py").write_text(SAME_ELEMENTS_APP)
        # seeded by this checkout (an older app reads what it stores: old homes open, tests/test_legacy_stores.py),
        # so an older checkout given by --app is timed on the same runs and benchmarks
        ended = subprocess.run([sys.executable, "-c", SEED], cwd=ROOT, env=app_env(home), check=True,
                               capture_output=True, text=True).stdout.split()[-1]  # SEED prints an ended run last
        with sync_playwright() as p:
            firsts: dict[str, list[tuple[float, float | None, str, float]]] = {"title": [], "chart": [], "same": [],
                                                                         "app": []}
            for _ in range(args.fresh):  # interleaved: load that comes and goes falls on all four alike
                firsts["title"].append(fresh(p, floors / "title.py", floors, ("h1",), False))
                firsts["chart"].append(fresh(p, floors / "chart.py", floors, ("h1",), True))
                firsts["same"].append(fresh(p, floors / "same.py", floors, FIRST_LOOK, False))
                firsts["app"].append(fresh(p, app, home, FIRST_LOOK, True))
            with streamlit_app(home, script=app) as url:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = first_look(browser, url)[0]
                idle(page)
                times: dict[str, list[tuple[float, str]]] = {title: [] for title in MAIN_CONTENT}
                try:
                    for _ in range(args.rounds):
                        for title in [*list(MAIN_CONTENT)[1:], list(MAIN_CONTENT)[0]]:  # the first page is open
                            times[title].append((navigate(page, title), load()))
                    check_results(page, sorted(p.parent.name for p in (home / "bench").glob("*/results.sqlite")))
                    linked = [(linked_run(browser, url, ended), load()) for _ in range(LINKED)]
                except Broken as e:
                    print(f"BROKEN page: {e}")
                    return 1
                finally:
                    browser.close()
    print(f"{app}: medians of {args.fresh} fresh servers")
    missed = []

    def median(values: list[float]) -> float:
        return statistics.median(values)

    title_floor = median([seen for seen, *_ in firsts["title"]])
    chart_floor = median([drawn for _, drawn, *_ in firsts["chart"]])
    look = median([seen for seen, *_ in firsts["app"]])
    figure = median([drawn for _, drawn, *_ in firsts["app"]])
    same = median([seen for seen, *_ in firsts["same"]])
    for name, seconds, index, key in (("title floor (an app drawing only a title)", title_floor, 0, "title"),
                                      ("chart floor (an app drawing a title and a chart) -> chart", chart_floor, 1,
                                       "chart"),
                                      ("the first look's elements, nothing computed", same, 0, "same")):
        runs = ", ".join(f"{run[index]:.2f}" for run in firsts[key])
        print(f"  {name}: {seconds:.2f} s" + (f" = {same / title_floor:.2f}x the title floor" if key == "same" else "")
              + f"  [{runs}]")
    for name, seconds, least, ratio, index in (
            ("first look (title, question, controls)", look, title_floor, FIRST_LOOK_RATIO, 0),
            ("first figure (the network)", figure, chart_floor, FIRST_FIGURE_RATIO, 1)):
        over = seconds / least > ratio
        missed += [name] if over else []
        runs = "; ".join(f"{run[index]:.2f} ({run[2]})" for run in firsts["app"])
        print(f"  {name}: {seconds:.2f} s = {seconds / least:.2f}x its floor"
              + (f"  MISS (target {ratio:.2f}x)" if over else "")
              + (f", {seconds / same:.2f}x the same elements'" if index == 0 else "") + f"  [{runs}]")
    # What holds the first look: the title (the app's first run on the server) and the controls, which the browser may
    # draw only once Plotly's bundle is in (measured: without the network figure the controls came with the title)
    held = sum(drawn - seen < WITH_FIGURE_S for seen, drawn, *_ in firsts["app"])
    print(f"  the first look's title: {median([run[3] for run in firsts['app']]):.2f} s; the rest of it came with the "
          f"figure (within {WITH_FIGURE_S} s of it) in {held} of {len(firsts['app'])} loads")
    print(f"navigation -> main content, {args.rounds} rounds:")
    for title, runs in times.items():
        seconds = [s for s, _ in runs]
        flag = "".join(f"  MISS ({what} target {target:.1f} s)" for what, value, target in
                       (("median", median(seconds), args.target), ("worst", max(seconds), args.worst))
                       if value > target)
        missed += [title] if flag else []
        print(f"  {title:<15} median {median(seconds):.2f} s · worst {max(seconds):.2f} s{flag}"
              f"  [{'; '.join(f'{s:.2f} ({at})' for s, at in runs)}]")
    seconds = [s for s, _ in linked]
    print(f"an ended run opened by its link in a new tab -> its outcome: median {median(seconds):.2f} s = "
          f"{median(seconds) / title_floor:.2f}x the title floor · worst {max(seconds):.2f} s (n={len(seconds)})  "
          f"[{'; '.join(f'{s:.2f} ({at})' for s, at in linked)}]")
    print(f"{len(missed)} of {len(times) + 2} figures miss the target" + (f": {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
