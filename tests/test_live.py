"""ui.live's ``meanwhile`` (issue 41: a run's events on the page within a moment, not at the view's next draw): within
one of the view's own reruns (by its timer) of work that goes on, the step is taken about every CLOSELY_S seconds
until the next draw, its output added where the draw left room for it; the whole page's run takes no step (the rest
of the page waits for none), and work that does not go on is drawn once. AppTest runs no fragment's timer: a
timer's rerun is stood in for by ``_timer_run``."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def follows(going_for_s: float):
    """A page following work that goes on for ``going_for_s`` seconds: each step meanwhile says its number."""
    import time

    import streamlit as st

    from ui.live import live, meanwhile

    start = st.session_state.setdefault("start", time.monotonic())
    steps = st.session_state.setdefault("steps", [])

    def draw():
        st.write("drawn")
        box = st.container()
        st.write("below")

        def step():
            steps.append(time.monotonic() - start)
            box.write(f"step {len(steps)}")

        meanwhile(step)

    live(draw, going=lambda: time.monotonic() - start < going_for_s, every=0.5)


def test_a_step_is_taken_meanwhile_and_its_output_goes_where_the_draw_left_room(monkeypatch):
    from ui import live
    from ui.live import CLOSELY_S

    monkeypatch.setattr(live, "_timer_run", lambda: True)
    at = AppTest.from_function(follows, args=(60.0,), default_timeout=30).run()
    steps = at.session_state["steps"]
    assert len(steps) >= 2 and all(b - a >= CLOSELY_S * 0.9 for a, b in zip(steps, steps[1:]))
    said = [m.value for m in at.markdown]
    assert said == ["drawn", *[f"step {n}" for n in range(1, len(steps) + 1)], "below"]


def test_the_whole_pages_run_takes_no_step():
    at = AppTest.from_function(follows, args=(60.0,), default_timeout=30).run()
    assert at.session_state["steps"] == [] and [m.value for m in at.markdown] == ["drawn", "below"]


def test_work_that_does_not_go_on_is_drawn_once_and_no_step_is_taken(monkeypatch):
    from ui import live

    monkeypatch.setattr(live, "_timer_run", lambda: True)
    at = AppTest.from_function(follows, args=(0.0,), default_timeout=30).run()
    assert at.session_state["steps"] == [] and [m.value for m in at.markdown] == ["drawn", "below"]
