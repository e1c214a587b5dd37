"""Every page gets what app.py does before it routes, even when Streamlit runs the page by itself.

Streamlit runs a script of the ``pages/`` folder by itself, without the entry script, for a session that opens the
page's address before any session's run has called ``st.navigation`` (its multipage feature from before
``st.navigation``, switched off by the first call; ``AppTest`` switches it on again for each run): on a fresh
server a bookmarked page would otherwise skip the thread guards, sign-in and the page's set-up (its menu is the
folder's until the session's next run, which goes through app.py).
"""
from __future__ import annotations

import importlib
from pathlib import Path

from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from ui import threads


def through_router() -> None:
    """The first statement of every page: when Streamlit ran this page by itself, do first what app.py does before
    it routes (the thread guards, the page's set-up, sign-in), then let the page go on."""
    threads.guard()  # before the page's first imports (a no-op once app.py has run in this process)
    if _by_itself():
        # heavy (the stores, scenarios and sign-in), imported only once the guards hold; by import_module, not
        # ``from ui import shell``: Python's fast path for a module another thread is importing waits for that thread
        # outside the interpreter's lock, and if that import ends in an exception (a session's run stopped mid-import)
        # the statement fails with "cannot import name 'shell' from 'ui'"; import_module takes the lock and imports it
        shell = importlib.import_module("ui.shell")
        shell.prepare()
        shell.warming()  # it waits for this page to be drawn (ui.shell.WARM_UP_AFTER_S)


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
