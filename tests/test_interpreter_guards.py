"""The interpreter's guards for threads (core/config/interpreter.py, ui/threads.py): first imports and syntax trees
one thread at a time, and plotly's look at optional modules blind to a half-imported one. Each scenario runs in a
fresh interpreter, once without the guards (the failure it guards against shows) and once with them."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Two modules whose bodies take a while, each saying when it starts and ends.
SLOW = "import time, events\nevents.append('{name} starts')\ntime.sleep(0.3)\nevents.append('{name} ends')\n"
IMPORT_BOTH_AT_ONCE = """
import sys, threading, types
sys.path[:0] = [{root!r}, {folder!r}]
sys.modules["events"] = events = types.ModuleType("events")
events.append = (log := []).append
if {guarded}:
    from core.config import interpreter
    interpreter.install()
threads = [threading.Thread(target=__import__, args=(name,)) for name in ("slow_a", "slow_b")]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(log)
"""


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout.strip()


def test_first_imports_on_two_threads_run_one_after_the_other(tmp_path):
    """A library whose modules import each other can deadlock two threads importing it from two ends, and Python then
    hands one of them a half-built module: with one lock for first imports, module bodies never run side by side."""
    for name in ("slow_a", "slow_b"):
        (tmp_path / f"{name}.py").write_text(SLOW.format(name=name))
    unguarded = run(IMPORT_BOTH_AT_ONCE.format(root=str(ROOT), folder=str(tmp_path), guarded=False))
    assert unguarded.index("starts", 12) < unguarded.index("ends")  # both bodies ran at once
    guarded = run(IMPORT_BOTH_AT_ONCE.format(root=str(ROOT), folder=str(tmp_path), guarded=True))
    first, second = ("slow_a", "slow_b") if guarded.index("slow_a") < guarded.index("slow_b") else ("slow_b", "slow_a")
    assert guarded == str([f"{first} starts", f"{first} ends", f"{second} starts", f"{second} ends"])


def test_a_thread_holding_the_locks_holds_back_parsing_importing_and_page_compilation(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import streamlit as st\nst.write('hello')\n")
    waited = run(f"""
        import sys, threading, ast
        sys.path.insert(0, {str(ROOT)!r})
        from ui import threads
        from core.config import interpreter
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        threads.guard()
        done = []
        work = {{"parse": lambda: ast.parse("x = 1"), "import": lambda: __import__("colorsys"),
                 "compile": lambda: ScriptCache().get_bytecode({str(page)!r})}}
        with interpreter.LOCK, interpreter.SYNTAX_LOCK:
            started = [threading.Thread(target=lambda name=name, w=w: (w(), done.append(name))) for name, w in work.items()]
            for t in started:
                t.start()
            for t in started:
                t.join(0.5)
            held = sorted(work) if not done else done[:]
        for t in started:
            t.join(60)
        print(held, sorted(done))
        """)
    assert waited == "['compile', 'import', 'parse'] ['compile', 'import', 'parse']"


def test_plotly_does_not_take_a_half_imported_module_for_an_imported_one():
    looked = run(f"""
        import sys, types, importlib.machinery
        sys.path.insert(0, {str(ROOT)!r})
        from _plotly_utils import basevalidators
        half = types.ModuleType("half_imported")
        half.__spec__ = importlib.machinery.ModuleSpec("half_imported", None)
        half.__spec__._initializing = True  # as Python marks a module another thread is still importing
        sys.modules["half_imported"] = half
        before = basevalidators.get_module("half_imported", should_load=False) is half
        from ui import threads
        threads.guard()
        import plotly.io._json  # a plotly module imported after the guard takes the guarded look too
        after = [m.get_module("half_imported", should_load=False) for m in (basevalidators, plotly.io._json)]
        half.__spec__._initializing = False
        whole = basevalidators.get_module("half_imported", should_load=False) is half
        print(before, after, whole)
        """)
    assert looked == "True [None, None] True"


def test_sessions_compiling_pages_around_the_guard_and_a_first_import_do_not_deadlock(tmp_path):
    """On a fresh server the guard is installed by the first script a session runs, after Streamlit compiled it: a
    session may be inside the server's script cache, holding its lock, when the guard comes in, and then parse its
    page (which takes the interpreter's lock). Meanwhile a second session compiles another page and a first import
    holds the interpreter's lock. When the guard took the interpreter's lock around the whole cache, the second
    session held it while waiting for the cache, and the first waited for it for ever (seen with 8 sessions opening
    pages at once). Both pages compile while the import is still under way, and the cache empties then too (the
    server's event loop empties it when the last session leaves)."""
    pages = {name: tmp_path / f"{name}.py" for name in ("slow_page", "other_page")}
    for name, page in pages.items():
        page.write_text(f"import streamlit as st\nst.write({name!r})\n")
    finished = run(f"""
        import sys, threading, time
        sys.path.insert(0, {str(ROOT)!r})
        from streamlit.runtime.scriptrunner import script_cache
        server_cache = script_cache.ScriptCache()  # the server's, made at start-up, before any script ran
        read, opened = threading.Event(), script_cache.open_python_file
        script_cache.open_python_file = lambda path: (read.wait() if "slow" in path else None, opened(path))[1]
        done = []
        def compiling(name):
            server_cache.get_bytecode({str(tmp_path)!r} + "/" + name + ".py")
            done.append(name)
        first = threading.Thread(target=compiling, args=("slow_page",))
        first.start()
        time.sleep(0.3)  # the first session inside the cache, reading its page
        from ui import threads
        from core.config import interpreter
        threads.guard()  # the first script's first statement
        second = threading.Thread(target=compiling, args=("other_page",))
        second.start()
        importing, imported = threading.Event(), threading.Event()
        def first_import():
            with interpreter.LOCK:
                importing.set()
                imported.wait(60)
        third = threading.Thread(target=first_import)
        third.start()
        importing.wait()
        time.sleep(0.3)  # the second session waiting for the cache
        read.set()  # the first session's page read: it goes on to parse it, with an import under way
        for t in (first, second):
            t.join(60)
        server_cache.clear()  # the event loop, the last session gone: not held up by the import
        done.append("cleared")
        imported.set()
        third.join(60)
        print(done)
        """)
    assert finished == "['slow_page', 'other_page', 'cleared']", finished


#: A fresh interpreter where ``setup`` ran, then another thread held the lock of first imports (a first import under
#: way, saying ``held`` once it lets go) while this one did ``act`` (saying ``acted``): the order of the two.
WHILE_THE_LOCK_IS_HELD = """
import importlib, sys, threading
sys.path.insert(0, {root!r})
from core.config import interpreter
{setup}
order, held, done = [], threading.Event(), threading.Event()

def first_import_under_way():
    with interpreter.LOCK:
        held.set()
        done.wait(60)
        order.append({held_says!r})

holder = threading.Thread(target=first_import_under_way)
holder.start()
held.wait(60)
{act}
order.append({acted!r})
done.set()
holder.join()
print(order)
"""


def order_while_the_lock_is_held(setup: str, act: str, acted: str, held_says: str) -> str:
    return run(WHILE_THE_LOCK_IS_HELD.format(root=str(ROOT), setup=setup, act=act, acted=acted, held_says=held_says))


def test_a_module_already_imported_is_found_without_waiting_for_another_threads_first_import():
    """``importlib.import_module`` (app.py's and the router's, every page run) of a module already imported returns
    at once, while another thread holds the lock of first imports (the app's warm-up): it returned only once the lock
    was let go, and a page opened meanwhile took 1.0-1.5 s instead of 0.15."""
    order = order_while_the_lock_is_held("interpreter.install()\nimport json  # imported before",
                                         'importlib.import_module("json")', "json found", "lock let go")
    assert order == str(["json found", "lock let go"])


def test_the_server_event_loops_imports_as_a_session_starts_never_wait_for_a_pages_first_imports():
    """As a session starts, Streamlit's event loop imports the modules of its agent-skills nudge; on a fresh server
    the session's first page holds the import lock meanwhile (importing the app), and every message of the page
    waited behind it (0.26 s). The guard imports them before the lock exists."""
    order = order_while_the_lock_is_held(
        "from ui import threads\nthreads.guard()",
        "from streamlit.runtime.backend_operation_handler import connection_locality  # app_session's, as it starts\n"
        "from streamlit.web import skills", "session started", "page's imports done")
    assert order == str(["session started", "page's imports done"])
