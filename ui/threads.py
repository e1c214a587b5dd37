"""What keeps the app server's threads (one per session's script run, and the runs' jobs) from tripping over each
other where a library is not thread-safe.

- Page compilation: Streamlit compiles a page the first time a session opens it (an ``AppTest`` on every run, with a
  cache of its own), under its script cache's lock: it parses the page (``ast.parse``) and compiles the tree. Both
  steps take the syntax-tree lock (``core.config.interpreter``), so no two trees are built at once (CPython 3.11
  fails then), always after the cache's lock. Taking the import lock around the whole cache deadlocked 8 sessions
  opening pages at once on a fresh server (one inside the cache when the guard came in, then parsing, another
  holding the lock and waiting for the cache), and the server's event loop, which empties the cache when the last
  session leaves, must not wait for another thread's imports.
- Plotly's look at optional modules: plotly checks whether a value is a pandas Series by peeking at ``sys.modules``,
  where a module another thread is still importing already stands half-built ("partially initialized module 'pandas'
  has no attribute 'Series'" in a session drawing a figure while another imports pandas). The peek sees only modules
  that have finished importing, the check CPython's import system makes (and narwhals makes for the same reason).
"""
from __future__ import annotations

import functools
import importlib
import sys

from _plotly_utils import optional_imports
from streamlit.runtime.scriptrunner import script_cache

from core.config import interpreter


#: Streamlit modules the server's event loop imports as a session starts (for its nudge to install agent skills),
#: imported before the import lock is installed: the loop waited there for the first page's imports of the app,
#: holding every message of the page back (0.25-0.26 s, in 2 of 7 fresh servers measured).
EVENT_LOOP_IMPORTS = ("streamlit.web.skills", "streamlit.runtime.backend_operation_handler")


def guard() -> None:
    """Install the interpreter's guards and these two (once per process), the event loop's imports done first."""
    for name in EVENT_LOOP_IMPORTS:
        importlib.import_module(name)
    interpreter.install()
    # the cache's compile of a parsed page (the module's name shadows the built-in; ast.parse is locked already)
    script_cache.compile = interpreter.locked(getattr(script_cache, "compile", compile), interpreter.SYNTAX_LOCK)
    if not getattr(optional_imports.get_module, "finished_imports_only", False):
        _peek_finished_imports_only(optional_imports.get_module)


def _peek_finished_imports_only(get_module) -> None:
    """Put a ``get_module`` that ignores half-imported modules wherever plotly's modules hold the original (each
    imports it by name; a plotly module imported later takes it from ``optional_imports``)."""

    @functools.wraps(get_module)
    def finished_only(name, should_load=True):
        module = sys.modules.get(name)
        if not should_load and getattr(getattr(module, "__spec__", None), "_initializing", False):
            return None  # another thread is still importing it: nothing of it can be in the value looked at
        return get_module(name, should_load)

    finished_only.finished_imports_only = True
    for module in list(sys.modules.values()):
        if getattr(module, "get_module", None) is get_module:
            module.get_module = finished_only
