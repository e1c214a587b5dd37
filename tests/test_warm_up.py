"""The app's warm-up (core.jobs.opening.warm_up, started by ui/shell.py after the first page): it loads what a first
run needs a step at a time, each step once no page has run for a moment, so that a page's first visit meanwhile
waits for one step at most, not for the whole warm-up (bench/bench_pages.py: a first visit then took 1.4 s instead of
0.2), and an analyst going from page to page meets none."""
from __future__ import annotations

import contextlib
import sys
import threading

from core.jobs import opening
from ui import shell


def test_the_warm_up_asks_before_each_step_and_loads_them_all():
    asked: list[int] = []
    opening.warm_up(between=lambda: asked.append(len(asked)))
    assert asked == list(range(len(opening.WARM_UP))) and len(opening.WARM_UP) > 1
    assert [name for name in opening.WARM_UP if name not in sys.modules] == []


@contextlib.contextmanager
def a_page_running():
    """A page's script run going on in another thread within the block; the event it yields ends it sooner."""
    page_ends, started = threading.Event(), threading.Event()

    def page():
        with shell._page_running():
            started.set()
            page_ends.wait(30)

    running = threading.Thread(target=page)
    running.start()
    try:
        assert started.wait(30)
        yield page_ends
    finally:
        page_ends.set()
        running.join(30)


def test_the_warm_up_waits_while_a_page_runs():
    with a_page_running() as page_ends:
        assert shell.pages_idle(0.2) is False  # a page runs: the step waits (here at most 0.2 s)
        waited: list[bool] = []
        waiter = threading.Thread(target=lambda: waited.append(shell.pages_idle(30)))
        waiter.start()
        page_ends.set()
        waiter.join(30)
        assert waited == [True]  # woken by the page's end and the quiet after it, not by the bound
    assert shell.pages_idle(0, quiet_s=0) is True


def test_the_warm_up_waits_for_a_quiet_moment_after_a_page():
    """An analyst going from page to page: a step waits until no page has run for a while (WARM_UP_QUIET_S), so
    that it does not begin between two pages and hold the next one's first visit back."""
    with shell._page_running():
        pass
    assert shell.pages_idle(0, quiet_s=60) is False  # a page just ended: not quiet yet (not waited for here)
    assert shell.pages_idle(30, quiet_s=0.2) is True  # quiet once 0.2 s have passed without a page


def test_a_page_that_starts_runs_lets_the_warm_up_go_on_at_once_but_never_while_a_page_runs(monkeypatch):
    """Run and Compare call ``runs_ahead``: a run is likely next, so the warm-up neither waits WARM_UP_AFTER_S after
    the first page nor for a quiet moment between steps (a fresh server's first run then lagged a warm one by
    1.35-2.05 s instead of 3.0-3.1 s: bench/bench_first_run.py), but still never takes a step while a page runs."""
    monkeypatch.setattr(shell, "_runs_ahead", threading.Event())
    monkeypatch.setattr(shell, "WARM_UP_QUIET_S", 60.0)  # not over before the next line, however loaded the machine
    with shell._page_running():
        pass
    assert shell.between_steps(0) is False  # a page just ended: the quiet moment is waited for
    started: list[bool] = []
    monkeypatch.setattr(shell, "WARM_UP_AFTER_S", 60.0)
    monkeypatch.setattr(opening, "warm_up", lambda between: started.append(between is shell.between_steps))
    warm_up = threading.Thread(target=shell._warm_up)
    warm_up.start()
    shell.runs_ahead()
    warm_up.join(30)  # begun at once, not after 60 s
    assert started == [True] and not warm_up.is_alive()
    assert shell.between_steps(0) is True  # no quiet moment needed
    with a_page_running():
        assert shell.between_steps(0.2) is False  # a page runs: the step waits for it
    assert shell.between_steps(30) is True


def test_the_pages_that_start_runs_say_runs_are_ahead_and_the_others_do_not(monkeypatch, tmp_path):
    from tests.page_app import isolate, open_page

    isolate(monkeypatch, tmp_path)
    said = {}
    for page in ("pages/run.py", "pages/compare.py", "pages/scenarios.py", "pages/history.py"):
        monkeypatch.setattr(shell, "_runs_ahead", threading.Event())
        assert not open_page(page).exception
        said[page] = shell._runs_ahead.is_set()
    assert said == {"pages/run.py": True, "pages/compare.py": True, "pages/scenarios.py": False,
                    "pages/history.py": False}


def test_with_runs_in_the_local_run_process_the_warm_up_starts_it_first(monkeypatch):
    """``PLANRAG_JOBS=process`` (the embedded default): the warm-up starts the local run process before its own
    steps, so that it loads what a run needs in its own process while the analyst reads the page; a mode that
    names nothing is left to the page that starts a run to say."""
    from core.jobs import local

    done: list[str] = []
    monkeypatch.setattr(shell, "_runs_ahead", threading.Event())
    shell._runs_ahead.set()
    monkeypatch.setattr(local, "process_for", lambda: done.append("run process"))
    monkeypatch.setattr(opening, "warm_up", lambda between: done.append("steps"))
    for mode in ("process", "threads", "no such mode"):
        monkeypatch.setenv("PLANRAG_JOBS", mode)
        shell._warm_up()
    assert done == ["run process", "steps", "steps", "steps"]
