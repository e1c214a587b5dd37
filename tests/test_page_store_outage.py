"""An open page while the team store is away (issue 37 section 1): it says so in one line, not a PoolTimeout
traceback, and goes on once the store is back. The store is a PostgreSQL cluster of the test's own
(tests/pg_cluster.py), stopped and started; the machine's shared cluster is never touched."""
from __future__ import annotations

import pytest

from core.store.runs import new_run_id
from core.model.run_settings import RunSettings
from tests.page_app import APP, isolate
from tests.pg_cluster import upgraded

ROOT = APP.parent


@pytest.fixture
def own_store(monkeypatch, tmp_path):
    """The team store on a cluster of the test's own, at this code's schema; its cluster."""
    with upgraded() as cluster:
        monkeypatch.setenv("PLANRAG_DATABASE_URL", cluster.url())
        isolate(monkeypatch, tmp_path)
        yield cluster


#: app.py routing to the History page (an AppTest given a page runs that page by itself, not through app.py)
_APP_ON_HISTORY = f"""
from ui import threads
threads.guard()
import streamlit as st
from ui import shell
shell.prepare()
shell.run(st.navigation([st.Page({str(ROOT / "pages" / "history.py")!r}, title="History", default=True)]))
"""


def test_an_open_page_says_the_store_is_away_and_goes_on_once_it_is_back(own_store):
    """The page looks for the store within PROBE_S seconds (its pool's own wait is 30 s): the outage is said at once,
    in one line."""
    from streamlit.testing.v1 import AppTest

    from core.jobs.opening import open_store
    from ui import shell

    run_id = new_run_id()
    open_store().create(run_id, RunSettings("locating", 1, "sqlite", "iterrag", "m"))
    page = AppTest.from_string(_APP_ON_HISTORY, default_timeout=120).run()
    assert not page.exception and not page.error
    own_store.stop()
    page.run()  # the page's probe waits PROBE_S for a connection, not the pool's 30 s, then says why
    assert not page.exception, [(e.value, e.stack_trace) for e in page.exception]
    assert [e.value.split(" (")[0] for e in page.error] == ["The team store cannot be reached"]
    assert "the page goes on once it is back" in page.error[0].value
    assert f"couldn't get a connection after {shell.PROBE_S:.2f} sec" in page.error[0].value
    own_store.start()
    page.run()
    assert not page.exception and not page.error
    assert any(run_id[:8] in str(d.value) for d in page.dataframe) or run_id[:8] in str(page.markdown)


def test_a_page_streamlit_runs_by_itself_says_the_store_is_away_and_goes_on_once_it_is_back(own_store,
                                                                                            monkeypatch):
    """The first session of a fresh server on a bookmarked page: Streamlit runs the page by itself, without app.py
    (ui/router.py; AppTest does so on a session's first run too). The store away is said in the same one line as on
    every page, and once it is back the page is drawn, once."""
    from streamlit.testing.v1 import AppTest

    from core.jobs.opening import open_store
    from ui import router

    run_id = new_run_id()
    open_store().create(run_id, RunSettings("locating", 1, "sqlite", "iterrag", "m"))
    by_itself = []
    real = router._by_itself
    monkeypatch.setattr(router, "_by_itself", lambda: by_itself.append(real()) or by_itself[-1])
    own_store.stop()
    page = AppTest(APP, default_timeout=120)
    page.switch_page("pages/history.py")
    page.run()
    assert by_itself[:1] == [True]  # the page ran by itself (the v1 multipage path), not through app.py
    assert not page.exception, [(e.value, e.stack_trace) for e in page.exception]
    assert [e.value.split(" (")[0] for e in page.error] == ["The team store cannot be reached"]
    assert "the page goes on once it is back" in page.error[0].value
    own_store.start()
    page.run()
    assert not page.exception and not page.error
    assert [t.value for t in page.title] == ["History"]
    assert any(run_id[:8] in str(d.value) for d in page.dataframe) or run_id[:8] in str(page.markdown)


_LIVE_VIEW = """
from psycopg_pool import PoolTimeout
from ui.live import live

def draw():
    raise PoolTimeout("couldn't get a connection after 30.00 sec")

live(draw, going=lambda: True)
"""


def test_a_live_view_that_meets_the_outage_says_so_in_its_place():
    """A view following work (ui.live) whose read meets the store away says so in one line, not a traceback; its
    timer tries again at the next tick."""
    from streamlit.testing.v1 import AppTest

    view = AppTest.from_string(_LIVE_VIEW, default_timeout=30).run()
    assert not view.exception
    assert [e.value for e in view.error] == ["The team store cannot be reached (couldn't get a connection after "
                                             "30.00 sec): this view goes on once it is back."]
