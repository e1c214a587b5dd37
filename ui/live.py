"""The one way a page follows work in progress (a run, runs side by side, run samples, a benchmark, a pause waiting
for its review): ``live`` draws it in a Streamlit fragment that reruns on its own every few tenths of a second
while the work goes on (``st.fragment(run_every=...)``). Each rerun reads what is new after a cursor (a job's
``events(after)``, core.jobs), whoever drives the work: a thread of this process or another process. Once the work
stops going on, the whole page is drawn again (``st.rerun()``), laid out for what comes next (the outcome, a review
form). Work that does not go on is drawn once, with no timer."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

EVERY_S = 0.5  # how often a page following work redraws it


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
