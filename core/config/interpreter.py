"""Where the Python interpreter is not safe for threads, a lock makes it so (``install``, once per process).

The app server runs every session's page and every agent run on threads of one process (a worker, its jobs), and
each may be the first to import a library or build a syntax tree:
- **First imports.** Two threads importing libraries whose modules import each other (sqlglot, for one) can each
  hold a module the other needs; Python breaks that deadlock by handing one of them the half-built module ("cannot
  import name ... from partially initialized module"). Every first import of a module takes ``LOCK``, as Python 2's
  global import lock did; a module already imported is looked up without it.
- **Syntax trees.** CPython 3.11's AST constructor keeps its recursion depth in state every thread shares, so two
  threads building trees at once (Streamlit compiling a page; LangChain reading a graph node's source with
  ``ast.parse``) can fail with "AST constructor recursion depth mismatch" (CPython gh-106905). ``ast.parse`` takes
  ``SYNTAX_LOCK``; ``ui.threads`` makes Streamlit's compilation of a parsed page take it too.
``SYNTAX_LOCK`` is a leaf: nothing waits for another lock while holding it, so a thread may take it while it holds
``LOCK`` (a module body parsing source) or a lock of its own (Streamlit's script cache) without any other thread
waiting for those in the opposite order, and a tree waits only for other trees, never for another thread's imports.
As under Python 2's lock, a module's body must not wait for another thread that imports (none of this project's
does).
"""
from __future__ import annotations

import ast
import functools
import importlib._bootstrap as bootstrap
import sys
import threading

LOCK = threading.RLock()
SYNTAX_LOCK = threading.RLock()


def install() -> None:
    """Make first imports hold ``LOCK`` and ``ast.parse`` hold ``SYNTAX_LOCK`` (once per process)."""
    ast.parse = locked(ast.parse, SYNTAX_LOCK)
    # The import statement and importlib.import_module both load a module not yet imported through this function.
    bootstrap._find_and_load = _first_imports_locked(bootstrap._find_and_load)


def _first_imports_locked(find_and_load):
    """``importlib._bootstrap._find_and_load`` holding ``LOCK`` for a module not yet imported (or still being
    imported); a module already imported is returned at once, as the function itself would. Unlike the import
    statement, ``importlib.import_module`` (app.py's, on every page run) calls it for any module."""
    if getattr(find_and_load, "holds_interpreter_lock", False):
        return find_and_load

    @functools.wraps(find_and_load)
    def loading(name, import_):
        module = sys.modules.get(name)
        if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False):
            return module
        with LOCK:
            return find_and_load(name, import_)

    loading.holds_interpreter_lock = True
    return loading


def locked(function, lock):
    """``function`` holding ``lock`` while it runs (``function`` itself if it already holds one of these locks)."""
    if getattr(function, "holds_interpreter_lock", False):
        return function

    @functools.wraps(function)
    def holding(*args, **kwargs):
        with lock:
            return function(*args, **kwargs)

    holding.holds_interpreter_lock = True
    return holding
