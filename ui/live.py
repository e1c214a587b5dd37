"""The one way a page follows work in progress (a run, runs side by side, run samples, a benchmark, a pause waiting
for its review): ``live`` draws it in a Streamlit fragment that reruns on its own every few tenths of a second
while the work goes on (``st.fragment(run_every=...)``). Each rerun reads what is new after a cursor (a job's
``events(after)``, core.jobs), whoever drives the work: a thread of this process or another process. Once the work
stops going on, the whole page is drawn again (``st.rerun()``), laid out for what comes next (the outcome, a review
form). Work that does not go on is drawn once, with no timer (in the same fragment, see ``live``).

A small part that changes faster than that pace (a model's reply as it streams) is drawn again more often
(``closely``) by the same fragment run, in its own slot, until the view's next draw, and what comes meanwhile (a
run's next events) is added as it comes (``meanwhile``): not by a fragment of its own inside the view's. Streamlit
names a nested fragment by the container it is drawn in, not by its place there, so one drawn after a growing list
of events keeps its name as its place moves, and its timer's rerun could write to a place the page no longer has
(the browser then drops the whole page: "Bad delta path index")."""
from __future__ import annotations

import contextvars
import time
from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from core.store import database

EVERY_S = 0.5  # how often a page following work redraws it
CLOSELY_S = 0.15  # how often a small part of it that changes fast is drawn again (a model's reply as it streams)

#: the parts a ``live`` view's draw asked to have drawn closely: (their slot, how to draw them), and the steps it
#: asked to have taken meanwhile: (None, the step)
_closely: contextvars.ContextVar[list | None] = contextvars.ContextVar("closely", default=None)


def live(draw: Callable[[], None], going: Callable[[], bool], every: float = EVERY_S) -> None:
    """``draw()`` the work, again every ``every`` seconds while ``going()``; the whole page again once it is not.
    Work that does not go on is drawn in the same fragment with no timer: a timer's last rerun, sent before the
    browser heard that the work ended, finds it and draws it once more (no fragment gone: no page to drop)."""
    if going():
        st.fragment(_follow, run_every=every)(draw, going, every)
    else:
        st.fragment(_follow)(draw, None, every)


def _follow(draw: Callable[[], None], going: Callable[[], bool] | None, every: float) -> None:
    try:
        _draw(draw, going, every)
    except Exception as e:
        if going is None or not database.is_lost(e):
            raise  # a draw within the page's run: the page says it (ui.shell.run)
        # the timer's own run: said in the view's place, tried again at the next tick
        st.error(f"The team store cannot be reached ({database.lost_reason(e)}): this view goes on once it is "
                 "back.", icon=":material/cloud_off:")


def _draw(draw: Callable[[], None], going: Callable[[], bool] | None, every: float) -> None:
    parts: list = []
    token = _closely.set(parts)
    try:
        draw()
    finally:
        _closely.reset(token)
    if going is None:  # laid out as ended: nothing more to follow
        return
    if not going():
        st.rerun()
    if not _timer_run():  # the page's own run goes on to draw the rest of the page; the view's timer takes over
        return
    until = time.monotonic() + every - CLOSELY_S  # the view's next draw comes at its pace
    while parts and time.monotonic() < until:
        time.sleep(CLOSELY_S)
        if not going():
            st.rerun()
        for slot, part in parts:
            if slot is None:
                part()
                continue
            with slot.container():
                part()


def _timer_run() -> bool:
    """Whether this script run is a fragment's own rerun (its timer's), not the whole page's run."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def closely(draw: Callable[[], None]) -> None:
    """Within a ``live`` view's draw: ``draw()`` a small part that changes fast (the reply a model is writing) where it
    stands, and (in the view's own reruns, by its timer) again about every CLOSELY_S seconds until the view is drawn
    again; the rest keeps its slower pace. Outside a ``live`` view's draw, drawn once."""
    slot = st.empty()
    with slot.container():
        draw()
    parts = _closely.get()
    if parts is not None:
        parts.append((slot, draw))


def meanwhile(step: Callable[[], None]) -> None:
    """In a ``live`` view's own reruns (by its timer) of work that goes on: ``step()`` about every CLOSELY_S seconds
    until the view is drawn again, drawing what came since where it belongs (a run's next events, below those
    drawn): on the page within a moment, not at the next draw. Never in the whole page's run, nor elsewhere."""
    parts = _closely.get()
    if parts is not None:
        parts.append((None, step))
