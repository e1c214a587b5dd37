"""One inbox of everything waiting for review, across runs and analysts: every paused (and interrupted) run of the
run store with what it waits for and who is looking at it now (the store's "viewing" marks). A paused run's row
shows the proposal itself (the plan, and for a re-plan what changed from the plan in force; or the query), with
approve, edit, reject with a note (needed) and open the run; any run can be closed. A review here claims the pause
like the run page's form does, so a race with another analyst is refused with who won, and a row never moves to
another pause without a click (ui.plan_review.moved_on). Approve (and approve edited), reject and close are the
gate's ``inbox_approve``, ``inbox_reject`` and ``inbox_close``, asked by core.jobs.runs where they are carried out,
for this session's identity. On the Run page the inbox is drawn again whenever what waits changes (``follow_inbox``):
a run that comes to wait, a review made here or by another analyst, shows without a reload."""
from __future__ import annotations

import time
from functools import partial

import streamlit as st

import core.jobs.runs as jobs
from core.auth.gate import Refused
from core.model.run_settings import Pause, Review
from core.store.plans import diff_steps
from core.store.runs import PauseTaken, RunRecord
from ui import access
from ui.common import review_name, session_reviewer
from ui.live import live
from ui.plan_review import made_here, moved_on
from ui.run_options import runtime_factory
from ui.run_view import open_run, run_label, steps_markdown
from ui.untrusted import md

EVERY_S = 2.0  # how often the Run page checks whether what waits has changed
WAITS_FOR = {"plan": "approval of its plan", "replan": "approval of a new plan", "query": "approval of a query"}
CHANGE = {"same": "{}", "removed": ":red[~~{}~~] (removed)", "added": ":green[{}] (added)"}
ERROR = "inbox_error"
OPENED = "_inbox_opened"  # whether the analyst has the inbox open


def looking(record: RunRecord, me: str) -> str:
    """Who else looks at the run now, in words ("" when no one)."""
    others = {who: at for who, at in jobs.open_store().viewers(record.id).items() if who != me}
    return ", ".join(f"{who} ({int(time.time() - at)} s ago)" for who, at in others.items())


def mark_viewing(run_id: str) -> None:
    """Record that this session looks at the run now, under its identity; a mark it made under a name it had before
    is taken back (one browser, one line)."""
    me, marks = session_reviewer(), st.session_state.setdefault("_viewing_as", {})
    store = jobs.open_store()
    if marks.get(run_id) not in (None, me):
        store.unview(run_id, marks[run_id])
    store.viewing(run_id, me)
    marks[run_id] = me


def _key(record: RunRecord, what: str) -> str:
    """A widget of the row for the run's current pause (a new pause, new widgets: nothing typed carries over)."""
    return f"inbox-{what}-{record.id}-{record.pause.get('id')}"


def _review(record: RunRecord, action: str) -> None:
    """Apply the row's ``action`` to the pause it shows: approve, edit (the row's edited plan or query, approved)
    or reject (with the row's note, needed)."""
    st.session_state.pop(ERROR, None)
    pause = Pause(**record.pause)
    note = st.session_state.get(_key(record, "note"), "").strip()
    if action == "reject" and not note:
        what = "query" if pause.kind == "query" else "new plan"
        st.session_state[ERROR] = (f"Run {record.id}: write a note for the agent to reject its proposal (what should "
                                   f"its {what} do differently?).")
        return
    edited = st.session_state.get(_key(record, "edited"), "")
    if action == "edit" and pause.kind == "query":
        review = Review.edit_query(edited, note)
    elif action == "edit":
        review = Review.edit(edited.splitlines(), note)
    else:
        review = Review.reject(note) if action == "reject" else Review.approve(note)
    try:
        jobs.resume(record, review.validate(pause.kind), runtime_factory(), pause_id=pause.id,
                    who=access.current(), action="inbox_reject" if action == "reject" else "inbox_approve")
        made_here(record.id, pause.id)
    except Refused as e:
        st.session_state[ERROR] = f"Refused: {e}."
    except (PauseTaken, jobs.RunBusy):
        st.session_state[ERROR] = (f"Your review of run {record.id} was not applied: "
                                   f"{jobs.open_store().describe_state(record.id, pause.id)}.")
    except ValueError as e:
        st.session_state[ERROR] = f"Run {record.id}: {e}."


def _close(run_id: str) -> None:
    """Close a run from the inbox (status stopped), recorded under this session's identity."""
    st.session_state.pop(ERROR, None)
    try:
        jobs.stop(run_id, who=access.current(), action="inbox_close")
    except Refused as e:
        st.session_state[ERROR] = f"Refused: {e}."


def proposal(pause: Pause) -> None:
    """What the pause asks the analyst to approve: the query (with its plan step), the plan, or for a re-plan the
    new plan against the plan in force."""
    if pause.kind == "query":
        if pause.current_step:
            st.markdown(f"For the plan step: **{md(pause.current_step)}**")
        st.code(pause.query, language=pause.language or None, wrap_lines=True)
    elif pause.kind == "replan" and pause.old_plan:
        changes = diff_steps(pause.old_plan, pause.plan)
        st.markdown("\n".join(f"- {CHANGE[mark].format(md(step))}" for mark, step in changes))
        if all(mark == "same" for mark, _ in changes):
            st.caption("The same steps as the plan in force.")
        else:
            st.caption("The new plan against the plan in force: added steps in green, removed ones struck out.")
    else:
        st.markdown(steps_markdown(pause.plan))


def _actions(record: RunRecord, named: bool) -> None:
    """Approve, edit, reject with a note and open the run, for the pause the row shows."""
    pause = Pause(**record.pause)
    query = pause.kind == "query"
    may_approve, may_reject = (named and access.allowed("inbox_approve"), named and access.allowed("inbox_reject"))
    approve, edit, reject, opened = st.columns(4)
    approve.button("Approve", key=f"inbox-approve-{record.id}", icon=":material/check:", on_click=_review,
                   args=(record, "approve"), disabled=not may_approve, width="stretch",
                   help="Approve the proposal as shown")
    with edit.popover("Edit", icon=":material/edit:", disabled=not may_approve, width="stretch"):
        st.text_area("The query" if query else "The plan, one step a line", key=_key(record, "edited"), height=160,
                     value=pause.query if query else "\n".join(pause.plan))
        st.button("Run this query" if query else "Approve this plan", key=f"inbox-edited-{record.id}",
                  type="primary", on_click=_review, args=(record, "edit"))
    with reject.popover("Reject", icon=":material/undo:", disabled=not may_reject, width="stretch"):
        st.text_input("Note for the agent (needed)", key=_key(record, "note"),
                      placeholder="What should it do differently?")
        st.button("Reject with this note", key=f"inbox-reject-{record.id}", type="primary", on_click=_review,
                  args=(record, "reject"))
    if opened.button("Open the run", key=f"open-{record.id}", icon=":material/open_in_new:", width="stretch",
                     help="Open it on the Run page: its steps so far and the full review form"):
        open_run(record, "pages/run.py")


def _row(record: RunRecord, me: str, named: bool) -> None:
    paused = record.status == "paused" and bool(record.pause)
    text, closed = st.columns([6, 1], vertical_alignment="center")
    what = (f"waits for {WAITS_FOR.get(record.pause.get('kind'), 'a review')} ({review_name(record.pause.get('id'))})"
            if paused else record.status)
    others = looking(record, me)
    text.markdown(md(f"{run_label(record.id, record.settings, record.created)} · {what}")
                  + (f"  \n:material/visibility: {md(others)} looking" if others else ""))
    closed.button("Close", key=f"close-{record.id}", icon=":material/close:", on_click=_close, args=(record.id,),
                  **access.disabled("inbox_close"), help="End this run now (status stopped)")
    if not paused:
        if st.button("Open the run", key=f"open-{record.id}", icon=":material/open_in_new:"):
            open_run(record, "pages/run.py")
        return
    if moved_on(record, "inbox"):
        return
    proposal(Pause(**record.pause))
    _actions(record, named)


def show_inbox(waiting: list[RunRecord]) -> None:
    """The list (see the module doc); what the gate would refuse this session is disabled."""
    said = st.container()  # always drawn: an error shown moves nothing below it, so an open popover stays open
    if st.session_state.get(ERROR):
        said.error(md(st.session_state[ERROR]), icon=":material/block:")
    st.caption("Read each proposal and approve, edit or reject it here (a rejection needs a note for the agent), "
               "open its run, or close a run you will not go on with (it ends as stopped, its trace kept; it can "
               "still be resumed or branched from History).")
    me = session_reviewer()
    named = access.ask_name("inbox_name")
    for record in waiting:
        with st.container(border=True):
            _row(record, me, named)


def waiting_runs() -> list[RunRecord]:
    """The runs waiting for the analysts, newest first: paused (for a review) or interrupted, and not going on."""
    store = jobs.open_store()
    found = store.list(limit=None, status="paused") + store.list(limit=None, status="interrupted")
    return sorted((r for r in found if not jobs.running(r.id)), key=lambda r: r.created, reverse=True)


def _what_waits(waiting: list[RunRecord]) -> list[tuple]:
    """What the inbox shows of the waiting runs, to tell when it must be drawn again: each run and its pause."""
    return [(r.id, r.status, (r.pause or {}).get("id")) for r in waiting]


def _redraw_if_changed(shown: list[tuple]) -> None:
    """The whole page again when what waits is no longer what the inbox shows (its own draw stays in the page)."""
    if _what_waits(waiting_runs()) != shown:
        st.rerun()


def _opened() -> None:
    """The inbox opened or closed: it stays so when it is drawn again after nothing waited for a while."""
    st.session_state[OPENED] = bool(st.session_state.get("inbox_expander"))


def follow_inbox() -> None:
    """The inbox (nothing while no run waits), and the whole page drawn again when what waits changes (checked every
    EVERY_S seconds by a ``live`` fragment that draws nothing), so what another analyst does shows by itself."""
    # the inbox's widgets (the name, notes, edits, the expander) are drawn by the page, not in the fragment, so its
    # timer's reruns neither redraw nor reset them
    waiting = waiting_runs()
    if waiting:
        paused = sum(r.status == "paused" for r in waiting)
        with st.expander(f":material/inbox: Inbox: {paused} waiting for review, {len(waiting) - paused} interrupted",
                         expanded=st.session_state.get(OPENED, False), key="inbox_expander", on_change=_opened):
            show_inbox(waiting)
    live(partial(_redraw_if_changed, _what_waits(waiting)), going=lambda: True, every=EVERY_S)
