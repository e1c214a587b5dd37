"""Every page gets what app.py does before it routes, even when Streamlit runs the page by itself.

Streamlit runs a script of the ``pages/`` folder by itself, without the entry script, for a session that opens the
page's address before any session's run has called ``st.navigation`` (its multipage feature from before
``st.navigation``, switched off by the first call; ``AppTest`` switches it on again for each run): on a fresh
server a bookmarked page would otherwise skip the thread guards, sign-in and the page's set-up (its menu is the
folder's until the session's next run, which goes through app.py).
"""
from __future__ import annotations

import contextvars
import importlib
import types
from pathlib import Path

import streamlit as st

from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import threads


_routed: contextvars.ContextVar[bool] = contextvars.ContextVar("routed", default=False)  # the page runs in ``_Page``


def through_router() -> None:
    """The first statement of every page: when Streamlit ran this page by itself, do first what app.py does before
    it routes (the thread guards, the page's set-up, sign-in), then run the page as app.py runs it
    (``ui.shell.run``: the team store's outage said in one line) and end this run of the script."""
    threads.guard()  # before the page's first imports (a no-op once app.py has run in this process)
    if _routed.get() or not _by_itself():
        return
    # heavy (the stores, scenarios and sign-in), imported only once the guards hold; by import_module, not
    # ``from ui import shell``: Python's fast path for a module another thread is importing waits for that thread
    # outside the interpreter's lock, and if that import ends in an exception (a session's run stopped mid-import)
    # the statement fails with "cannot import name 'shell' from 'ui'"; import_module takes the lock and imports it
    shell = importlib.import_module("ui.shell")
    shell.prepare()
    token = _routed.set(True)
    try:
        shell.run(_Page())
    finally:
        _routed.reset(token)
        shell.warming()  # it waits for this page to be drawn (ui.shell.WARM_UP_AFTER_S)
    st.stop()  # the page ran within: the rest of this script's run is done


class _Page:
    """The page Streamlit runs by itself, run again within ``ui.shell.run`` (its code as Streamlit compiled it, in a
    module of its own, as ``st.Page.run`` runs a page); its ``through_router`` then goes straight on."""

    def __init__(self):
        ctx = get_script_run_ctx()
        self.path = ctx.pages_manager.get_pages()[ctx.page_script_hash]["script_path"]
        self.code = ctx.pages_manager.get_page_script_byte_code(self.path)

    def run(self) -> None:
        module = types.ModuleType("__main__")
        module.__dict__["__file__"] = self.path
        exec(self.code, module.__dict__)  # noqa: S102 - the page's own script, as Streamlit runs it


def _by_itself() -> bool:
    """Whether Streamlit runs this page by itself: its pages for this run are the ``pages/`` folder's, the entry
    script among them (app.py's menu never lists app.py). Asked of this session's run, not of Streamlit's
    process-wide switch, which another session's router may turn off while this run is already under way."""
    ctx = get_script_run_ctx()
    if ctx is None:  # imported, not run (a test reading a page's helper)
        return False
    entry = Path(ctx.main_script_path).resolve()
    scripts = [Path(page.get("script_path") or "").resolve() for page in ctx.pages_manager.get_pages().values()]
    return len(scripts) > 1 and entry in scripts  # one page only: a page script run as the entry (AppTest)
