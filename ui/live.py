"""The one way a page follows work in progress (a run, runs side by side, run samples, a benchmark, a pause waiting
for its review): ``live`` draws it in a Streamlit fragment that reruns on its own every few tenths of a second
while the work goes on (``st.fragment(run_every=...)``). Each rerun reads what is new after a cursor (a job's
``events(after)``, core.jobs), whoever drives the work: a thread of this process or another process. Once the work
stops going on, the whole page is drawn again (``st.rerun()``), laid out for what comes next (the outcome, a review
form). Work that does not go on is drawn once, with no timer. A small part that changes faster than that pace (a
model's reply as it streams) is drawn again more often on its own (``closely``), a fragment inside the view's."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

EVERY_S = 0.5  # how often a page following work redraws it
CLOSELY_S = 0.15  # how often a small part of it that changes fast is drawn again (a model's reply as it streams)


def live(draw: Callable[[], None], going: Callable[[], bool], every: float = EVERY_S) -> None:
    """``draw()`` the work, again every ``every`` seconds while ``going()``; the whole page again once it is not."""
    if not going():
        draw()
        return
    st.fragment(_follow, run_every=every)(draw, going)


def _follow(draw: Callable[[], None], going: Callable[[], bool]) -> None:
    draw()
    if not going():
        st.rerun()


def closely(draw: Callable[[], None], every: float = CLOSELY_S) -> None:
    """Within a ``live`` view's draw: ``draw()`` a small, quickly drawn part of it (the reply a model is writing)
    again every ``every`` seconds, where it stands, until the view is drawn again (which calls this again for as
    long as the part changes fast; a draw that does not drops it, and Streamlit stops its timer). The view itself
    keeps its slower pace: drawing all of it that often would load the server."""
    st.fragment(_again, run_every=every)(draw)


def _again(draw: Callable[[], None]) -> None:
    draw()
