"""One inbox of everything waiting for review, across runs and analysts: every paused (and interrupted) run of the
run store with what it waits for and who is looking at it now (the store's "viewing" marks), and approve, reject,
open (to edit) or close from the list. Approving or rejecting here claims the pause like the review form does, so
a race with another analyst is refused with who won. Approve, reject and close are the gate's ``inbox_approve``,
``inbox_reject`` and ``inbox_close``, asked by core.jobs.runs where they are carried out."""
from __future__ import annotations

import time

import streamlit as st

import core.jobs.runs as jobs
from core.auth.gate import Refused
from core.model.run_settings import Pause, Review
from core.store.runs import PauseTaken, RunRecord
from ui import access
from ui.common import session_reviewer
from ui.run_options import runtime_factory
from ui.run_view import open_run, run_label
from ui.untrusted import md

WAITS_FOR = {"plan": "approval of its plan", "replan": "approval of a new plan", "query": "approval of a query"}
REJECT_NOTE = "Rejected from the inbox: propose another plan."
ERROR = "inbox_error"


def looking(record: RunRecord, me: str) -> str:
    """Who else looks at the run now, in words ("" when no one)."""
    others = {who: at for who, at in jobs.open_store().viewers(record.id).items() if who != me}
    return ", ".join(f"{who} ({int(time.time() - at)} s ago)" for who, at in others.items())


def _review(record: RunRecord, action: str) -> None:
    """Approve or reject the run's current pause as shown in the inbox."""
    st.session_state.pop(ERROR, None)
    pause = Pause(**record.pause)
    reviewer = session_reviewer()
    if action == "reject" and pause.kind == "query":
        review = Review.reject("Rejected from the inbox: write another query.", reviewer)
    else:
        review = Review.reject(REJECT_NOTE, reviewer) if action == "reject" else Review.approve("", reviewer)
    try:
        jobs.resume(record, review.validate(pause.kind), runtime_factory(), pause_id=pause.id,
                    who=access.current(), action=f"inbox_{action}")
    except Refused as e:
        st.session_state[ERROR] = f"Refused: {e}."
    except (PauseTaken, jobs.RunBusy):
        st.session_state[ERROR] = (f"Your review of run {record.id} was not applied: "
                                   f"{jobs.open_store().describe_state(record.id, pause.id)}.")
    except ValueError as e:
        st.session_state[ERROR] = str(e)


def _close(run_id: str) -> None:
    """Close a run from the inbox (status stopped), recorded under this session's identity."""
    st.session_state.pop(ERROR, None)
    try:
        jobs.stop(run_id, who=access.current(), action="inbox_close")
    except Refused as e:
        st.session_state[ERROR] = f"Refused: {e}."


def show_inbox(waiting: list[RunRecord]) -> None:
    """The list (see the module doc); what the gate would refuse this session is disabled."""
    if st.session_state.get(ERROR):
        st.error(md(st.session_state[ERROR]), icon=":material/block:")
    st.caption("Approve or reject a proposal here, open a run to edit it, or close a run you will not go on with "
               "(it ends as stopped, its trace kept; it can still be resumed or branched from History).")
    me = session_reviewer()
    named = access.signin_on() or bool(st.session_state.get("reviewer"))
    if not named:
        st.caption("Give your name on a run's review form (Open) or on Settings to approve or reject from here.")
    for record in waiting:
        text, approve, reject, opened, closed = st.columns([4, 1.5, 1.3, 1.1, 1.1], vertical_alignment="center")
        paused = record.status == "paused" and bool(record.pause)
        what = (f"waits for {WAITS_FOR.get(record.pause.get('kind'), 'a review')} (pause {record.pause.get('id')})"
                if paused else record.status)
        others = looking(record, me)
        text.markdown(md(f"{run_label(record.id, record.settings, record.created)} · {what}")
                      + (f"  \n:material/visibility: {md(others)} looking" if others else ""))
        if paused:
            approve.button("Approve", key=f"inbox-approve-{record.id}", icon=":material/check:", on_click=_review,
                           args=(record, "approve"), disabled=not (access.allowed("inbox_approve") and named),
                           help="Approve the proposal as it is")
            reject.button("Reject", key=f"inbox-reject-{record.id}", icon=":material/undo:", on_click=_review,
                          args=(record, "reject"), disabled=not (access.allowed("inbox_reject") and named),
                          help=f"Send it back: {REJECT_NOTE}")
        if opened.button("Open", key=f"open-{record.id}", help="Open it to read it or edit the proposal"):
            open_run(record, "pages/run.py")
        closed.button("Close", key=f"close-{record.id}", icon=":material/close:", on_click=_close,
                      args=(record.id,), **access.disabled("inbox_close"), help="End this run now (status stopped)")
