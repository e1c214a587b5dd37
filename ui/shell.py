"""What every page runs first, before its own content: the browser tab's set-up, sign-in, the session's scenarios
folder and the project home's notices, then the app's navigation (app.py; ui/router.py for a page Streamlit ran by
itself)."""
from __future__ import annotations

import contextlib
import threading
import time

import streamlit as st

from core import scenarios
from core.config import home
from core.config import settings as core_settings
from core.store import database
from ui import access
from ui.common import answers_switch, landing


def prepare() -> None:
    """Set the page up, gate it (sign-in), and say what is wrong with the project home; stop if it cannot be used."""
    # An emoji icon: the browser would fetch a :material/...: favicon from fonts.gstatic.com (the app works offline).
    st.set_page_config(page_title="PlanRAG Workbench", page_icon="🧭", layout="wide")
    access.gate()  # sign-in, when configured; no serving a network without it (ui/access.py)
    # This session's scenarios folder (Settings), for every page.
    scenarios.use_folder(st.session_state.get("scenarios_dir"))
    answers_switch()
    landing()  # a page a button switched to opens at its top
    try:  # a project home that cannot be used: a fallback one, said on every page (core.config.home)
        moved = home.use_fallback()
        _this_run.away = _store_away()  # said in the page's place by ``run``, which then runs nothing of the page
        if _this_run.away is None:
            database.check()  # a team store whose schema is behind: said, and nothing else runs
    except home.HomeError as e:
        st.error(str(e), icon=":material/error:")
        st.stop()
    for notice in [moved, *home.notices()]:
        if notice:
            st.warning(notice, icon=":material/warning:")


#: Seconds the warm-up lets the first page's browser draw (fetching Plotly's bundle from this process) before it
#: imports: its imports hold the import lock and take a core of two, so a page drawn meanwhile waits for them. A page
#: that starts runs (``runs_ahead``) cuts the wait short.
WARM_UP_AFTER_S = 4.0


#: The longest the warm-up waits for pages to end before its next step (a server whose pages never stop still
#: warms up).
WARM_UP_YIELDS_S = 10.0
#: How long no page must have run before the warm-up's next step: it goes on while an analyst reads a page, not in
#: the gaps (up to a second) of one going from page to page, where a step held the next page's first visit back
#: (History 0.98-1.92 s against 0.76-0.94 s without a warm-up, Benchmark 1.3-2.8 s against 1.15-1.33 s).
WARM_UP_QUIET_S = 2.0
_pages = threading.Condition()  # guards _running and _last_end: the script runs of pages in progress (``run``)
_running = 0
_last_end = 0.0  # time.monotonic() when the last page's script run ended


_runs_ahead = threading.Event()  # a page that starts runs was drawn (``runs_ahead``)


@st.cache_resource(show_spinner=False)
def warming() -> threading.Thread:
    """Once per server, in the background, after the first page is out (app.py starts it once the page has run):
    start the local run process (core.jobs.local, when runs go there), and load what the first run would wait for
    here (core.jobs.opening.warm_up), a step at a time (``between_steps``). A run started before then starts or
    imports what it needs itself."""
    thread = threading.Thread(target=_warm_up, name="warm-up", daemon=True)
    thread.start()
    return thread


def runs_ahead() -> None:
    """This page starts runs (Run, Compare): a run is likely next, so the warm-up begins at once and takes each step
    as soon as no page runs, without a quiet moment (a fresh server's first run lagged a warm one by 3.0-3.1 s when
    Start was clicked on a settled Run page, by 1.35-2.05 s so; the cost: a page first visited within seconds may
    wait for one step, at most 0.9 s here)."""
    _runs_ahead.set()


def _warm_up() -> None:
    from core.jobs import local, opening  # heavy (the LLM client, httpx: 75 ms), which the first page has no use for

    _runs_ahead.wait(WARM_UP_AFTER_S)
    try:
        ahead = local.enabled()
    except ValueError:  # PLANRAG_JOBS names no mode: said where a run is started
        ahead = False
    if ahead:  # the local run process loads what a run needs in its own process, apart from the pages
        local.process_for()
    opening.warm_up(between=between_steps)  # what this process needs of it: a review's claim, the pages' own


def between_steps(longest_s: float = WARM_UP_YIELDS_S) -> bool:
    """Before each warm-up step: wait until no page runs and, unless a page that starts runs was drawn, none has run
    for WARM_UP_QUIET_S (``pages_idle``); whether so within ``longest_s`` seconds."""
    return pages_idle(longest_s, 0.0 if _runs_ahead.is_set() else WARM_UP_QUIET_S)


def pages_idle(longest_s: float = WARM_UP_YIELDS_S, quiet_s: float = WARM_UP_QUIET_S) -> bool:
    """Wait until no page's script has run for ``quiet_s`` seconds, ``longest_s`` seconds at most; whether so."""
    deadline = time.monotonic() + longest_s
    with _pages:
        while True:
            now, quiet_from = time.monotonic(), _last_end + quiet_s
            if _running == 0 and now >= quiet_from:
                return True
            if now >= deadline:
                return False
            _pages.wait((min(deadline, quiet_from) if _running == 0 else deadline) - now)


@contextlib.contextmanager
def _page_running():
    global _running, _last_end
    with _pages:
        _running += 1
    try:
        yield
    finally:
        with _pages:
            _running -= 1
            _last_end = time.monotonic()
            _pages.notify_all()


STORE_RETRY_S = 5  # how often a page the team store's outage interrupted looks whether it is back
#: How long a page waits for the team store before it says the store is away (a store pool waits 30 s for a
#: connection before it gives up: the page would show nothing that long).
PROBE_S = 3.0
_this_run = threading.local()  # the team store's state ``prepare`` found for this script run (its thread's)


def _store_away() -> Exception | None:
    """Why the team store cannot be reached now, found within PROBE_S seconds; None when it can or there is none."""
    url = core_settings.database_url()
    return database.unreachable(url, PROBE_S) if url else None


def run(page) -> None:
    """Run the page (anything with ``run()``); the team store away, found by ``prepare`` or met mid-page, is said in
    one line, and the page runs again once the store answers (looked at every STORE_RETRY_S seconds;
    core.store.database.is_lost)."""
    away, _this_run.away = getattr(_this_run, "away", None), None
    if away is None:
        try:
            with _page_running():
                page.run()
            return
        except Exception as e:
            if not database.is_lost(e):
                raise
            away = e
    st.error(f"The team store cannot be reached ({database.lost_reason(away)}): the page goes on once it is back.",
             icon=":material/cloud_off:")
    st.fragment(_when_back, run_every=STORE_RETRY_S)()


def _when_back() -> None:
    """The whole page again once the team store answers."""
    url = core_settings.database_url()
    if url and database.back(url):
        st.rerun()


def navigation():
    """The app's pages in its menu (``st.navigation``): the page this session asked for, to run."""
    return st.navigation({
        "Decide": [
            st.Page("pages/scenarios.py", title="Scenarios", icon=":material/hub:", default=True),
            st.Page("pages/run.py", title="Run", icon=":material/play_circle:"),
            st.Page("pages/decision.py", title="Decision check", icon=":material/fact_check:"),
            st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
        ],
        "Review": [
            st.Page("pages/history.py", title="History", icon=":material/history:"),
            st.Page("pages/benchmark.py", title="Benchmark", icon=":material/leaderboard:"),
            st.Page("pages/plans.py", title="Learned plans", icon=":material/route:"),
            st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
        ],
    })
