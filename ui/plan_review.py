"""The analyst's review at a pause. A plan: an editable list (edit, reorder, add, delete steps) with Approve as
proposed, Approve edited, and Reject with a note. A query (review mode "approve every query"): the query with the
step it serves, editable, with Approve, Run the edited query, and Reject with a note.

A review names the pause it was made for (its id): a review of a pause that is no longer current (another tab or
person reviewed it first) is refused, with the run's state now. Approving as proposed with edits in the form asks
first whether to apply or discard them. A review resumes the run in the background."""
from __future__ import annotations

from functools import partial

import streamlit as st

import core.jobs.runs as jobs
from core.analysis.format import clock
from core.auth.gate import Refused
from core.model.run_settings import Pause, Review
from core.llm.client import REPLAY_PREFIX
from core.store.runs import PauseTaken, RunRecord
from ui import access
from ui.common import review_name, session_reviewer
from ui.run_options import runtime_factory
from ui.live import live
from ui.run_view import steps_markdown
from ui.untrusted import md


MINE = "_reviews_made"  # (run id, pause id) of the reviews this session applied
SEEN = "_pauses_seen"  # {(where, run id): pause id} the pause each review of this session last showed
DONE = {"approve": "approved", "edit": "edited and approved", "reject": "rejected"}


def pause_taken(record: RunRecord) -> None:
    """When this session showed a pause of the run that someone else (another session or process) then
    reviewed: say who and when, and that anything entered in its form was not applied (once)."""
    shown = st.session_state.pop(f"_pause_shown-{record.id}", None)
    current = (record.pause or {}).get("id") if record.status == "paused" else None
    if shown and shown != current and (record.id, shown) not in st.session_state.get(MINE, set()):
        st.warning(f"{md(jobs.open_store().describe_state(record.id, shown)).capitalize()}. Anything you "
                   "entered in its form was not applied.", icon=":material/group:")


def made_here(run_id: str, pause_id: str) -> None:
    """Note a review this session applied (the next pause of the run is then shown without asking)."""
    st.session_state.setdefault(MINE, set()).add((run_id, pause_id))


def _show_pause(where: str, run_id: str, pause_id: str) -> None:
    st.session_state.setdefault(SEEN, {})[(where, run_id)] = pause_id


def moved_on(record: RunRecord, where: str) -> bool:
    """Whether a review (``where``: the run page's form, the inbox's row) waits for a click before it shows the run's
    new pause: when the pause it showed was reviewed by someone else, it says who reviewed which and when, with a
    button to show the new one (the caller draws no review meanwhile)."""
    seen = st.session_state.setdefault(SEEN, {})
    now, shown = record.pause.get("id"), seen.get((where, record.id))
    if shown is None or shown == now or (record.id, shown) in st.session_state.get(MINE, set()):
        seen[(where, record.id)] = now
        return False
    taken = jobs.open_store().review_of(record.id, shown)
    said = (f"{md(taken['reviewer'])} {DONE.get(taken['action'], 'reviewed')} {review_name(shown)} at "
            f"{clock(taken['at'])}" if taken else f"{review_name(shown)} was reviewed elsewhere")
    st.warning(f"{said}; this is {review_name(now)}, a new proposal you have not read yet.", icon=":material/group:")
    st.button(f"Show {review_name(now)}", key=f"{where}-show-{record.id}-{now}", icon=":material/visibility:",
              on_click=_show_pause, args=(where, record.id, now))
    return True


def current(run_id: str, pause_id: str) -> bool:
    """Whether the run still waits at the pause ``pause_id`` (not reviewed elsewhere, not closed)."""
    record = jobs.open_store().get(run_id, events=False)
    return record.status == "paused" and (record.pause or {}).get("id") == pause_id


def _draft(prefix: str, plan: list[str]) -> list[list]:
    """The plan being edited: [uid, text] per step (uids keep each step's text box as steps move)."""
    return st.session_state.setdefault(prefix, [[i, step] for i, step in enumerate(plan)])


def _box(prefix: str, uid: int) -> str:
    return f"{prefix}-step-{uid}"


def _edited_steps(prefix: str) -> list[str]:
    return [st.session_state.get(_box(prefix, uid), text) for uid, text in st.session_state[prefix]]


def _keep_texts(prefix: str) -> None:
    """Copy the text boxes into the draft, so nothing typed is lost when steps move."""
    st.session_state[prefix] = [[uid, text] for (uid, _), text in zip(st.session_state[prefix], _edited_steps(prefix))]


def _move(prefix: str, i: int, delta: int) -> None:
    _keep_texts(prefix)
    draft = st.session_state[prefix]
    draft[i], draft[i + delta] = draft[i + delta], draft[i]


def _delete(prefix: str, i: int) -> None:
    _keep_texts(prefix)
    del st.session_state[prefix][i]


def _add(prefix: str) -> None:
    _keep_texts(prefix)
    draft = st.session_state[prefix]
    draft.append([max((uid for uid, _ in draft), default=-1) + 1, ""])


def _edits(record: RunRecord, prefix: str, pause: Pause) -> bool:
    """Whether the form holds edits of the proposed plan or query."""
    if pause.kind == "query":
        return st.session_state.get(f"{prefix}-query", pause.query).strip() != pause.query.strip()
    return [s.strip() for s in _edited_steps(prefix) if s.strip()] != list(pause.plan)


def _review(record: RunRecord, pause: Pause, prefix: str, action: str, make_runtime) -> None:
    """Apply the review ``action``: approve (as proposed; asks first when the form holds edits), approve-edits,
    edit (the form's plan or query) or reject."""
    error = f"review-error-{record.id}"
    st.session_state.pop(error, None)
    st.session_state.pop(f"{prefix}-confirm", None)
    note = st.session_state.get(f"{prefix}-note", "").strip()
    if action == "approve" and _edits(record, prefix, pause):
        st.session_state[f"{prefix}-confirm"] = True  # never approve as proposed over edits without asking
        return
    if action == "reject" and not note:
        what = "query" if pause.kind == "query" else "new plan"
        st.session_state[error] = f"Write a note for the agent: what should its {what} do differently?"
        return
    reviewer = session_reviewer()
    if action == "edit" and pause.kind == "query":
        review = Review.edit_query(st.session_state.get(f"{prefix}-query", pause.query), note, reviewer)
    elif action == "edit":
        review = Review.edit(_edited_steps(prefix), note, reviewer)
    else:
        review = Review.reject(note, reviewer) if action == "reject" else Review.approve(note, reviewer)
    try:
        jobs.resume(record, review.validate(pause.kind), make_runtime, pause_id=pause.id, who=access.current())
        made_here(record.id, pause.id)
    except Refused as e:
        access.show_refusal(e)
    except PauseTaken as e:
        st.session_state[error] = f"Your review was not applied: {e}."
    except jobs.RunBusy:  # another review took the pause a moment before and its job drives the run now
        st.session_state[error] = (f"Your review was not applied: "
                                   f"{jobs.open_store().describe_state(record.id, pause.id)}.")
    except ValueError as e:
        st.session_state[error] = str(e)


def _plan_form(pause: Pause, prefix: str) -> None:
    draft = _draft(prefix, pause.plan)
    for i, (uid, text) in enumerate(draft):
        st.session_state.setdefault(_box(prefix, uid), text)
        number, box, up, down, delete = st.columns([0.5, 12, 0.8, 0.8, 0.8], vertical_alignment="center")
        number.markdown(f"**{i + 1}.**")
        box.text_input("Plan step", key=_box(prefix, uid), label_visibility="collapsed",
                       placeholder="Describe the step")
        up.button("", icon=":material/arrow_upward:", key=f"{prefix}-up-{uid}", disabled=i == 0, help="Move up",
                  on_click=_move, args=(prefix, i, -1))
        down.button("", icon=":material/arrow_downward:", key=f"{prefix}-down-{uid}", disabled=i == len(draft) - 1,
                    help="Move down", on_click=_move, args=(prefix, i, 1))
        delete.button("", icon=":material/delete:", key=f"{prefix}-delete-{uid}", help="Delete the step",
                      on_click=_delete, args=(prefix, i))
    st.button("Add a step", icon=":material/add:", key=f"{prefix}-add", on_click=_add, args=(prefix,))


def show_review(record: RunRecord) -> None:
    """The review form of a paused run, for its current pause (once this session has seen it: ``moved_on``)."""
    if moved_on(record, "form"):
        live(lambda: None, going=partial(current, record.id, record.pause.get("id")), every=2.0)
        return
    pause = Pause(**record.pause)
    prefix = f"review-{record.id}-{pause.id or len(record.events)}"  # one draft per pause
    since = f" · waiting since {clock(pause.at)}" if pause.at else ""
    query = pause.kind == "query"
    if query:
        st.subheader(":material/database: The agent wants to run a query")
        if pause.current_step:
            st.markdown(f"For the plan step: **{md(pause.current_step)}**")
    elif pause.kind == "replan":
        st.subheader(":material/edit_note: The agent wants to change its plan")
        with st.expander("The plan it would replace"):
            st.markdown(steps_markdown(pause.old_plan))
    else:
        st.subheader(":material/edit_note: The agent proposes a plan")
    st.session_state[f"_pause_shown-{record.id}"] = pause.id
    live(lambda: None, going=partial(current, record.id, pause.id), every=2.0)  # the page again once it is not
    named = access.ask_name("review_name", "Your name, recorded with your review")
    st.caption(f"{review_name(pause.id).capitalize()} of run `{record.id}`{since}. Your review applies to this "
               "proposal only"
               + (f"; you review as **{md(session_reviewer())}**" + ("." if access.signin_on() else
                                                                     " (change it in the sidebar).") if named else "."))
    action = "query_decision" if query else "review"
    if not access.allowed(action):
        st.info(f"You can read this pause; reviewing needs the analyst role (yours: {access.role()}).",
                icon=":material/visibility:")
    if record.settings.llm.startswith(REPLAY_PREFIX):
        st.info("This run replays recorded replies: the agent cannot respond to your review (its next replies are "
                "the recorded ones, whatever you decide).", icon=":material/replay:")
    if query:
        st.caption("Approve the query, edit it and run your version, or reject it with a note (the agent "
                   "receives the note instead of rows).")
        st.session_state.setdefault(f"{prefix}-query", pause.query)
        st.text_area("Query", key=f"{prefix}-query", height=120)
    else:
        st.caption("Edit, reorder, add or delete steps; then approve the plan as proposed or as edited, or reject "
                   "it with a note (the agent then makes a new plan).")
        _plan_form(pause, prefix)
    st.text_input("Note for the agent", key=f"{prefix}-note",
                  placeholder="Optional when approving; needed to reject (tell the agent what to change)")
    make_runtime = runtime_factory()
    if st.session_state.get(f"{prefix}-confirm"):
        what = "query" if query else "plan"
        st.warning(f"You edited the {what}. Apply your edits, or discard them and approve the {what} as the agent "
                   "proposed it?", icon=":material/help:")
        mine, theirs = st.columns(2)
        mine.button("Apply my edits", type="primary", icon=":material/edit:", key=f"{prefix}-confirm-edit",
                    on_click=_review, args=(record, pause, prefix, "edit", make_runtime), width="stretch")
        theirs.button("Discard my edits, approve as proposed", key=f"{prefix}-confirm-discard",
                      on_click=_discard_and_approve, args=(record, pause, prefix, make_runtime), width="stretch")
    approve, edited, reject = st.columns(3)
    approve.button("Approve as proposed", type="primary", icon=":material/check:", key=f"{prefix}-approve",
                   on_click=_review, args=(record, pause, prefix, "approve", make_runtime), width="stretch",
                   disabled=not named or not access.allowed(action))
    edited.button("Run the edited query" if query else "Approve edited", icon=":material/edit:",
                  key=f"{prefix}-edit", on_click=_review, args=(record, pause, prefix, "edit", make_runtime),
                  width="stretch", disabled=not named or not access.allowed(action))
    reject.button("Reject with the note", icon=":material/undo:", key=f"{prefix}-reject",
                  on_click=_review, args=(record, pause, prefix, "reject", make_runtime), width="stretch",
                  disabled=not named or not access.allowed(action))
    show_review_error(record.id)
    with st.expander("The agent's reply"):
        st.text(pause.reply)


def show_review_error(run_id: str) -> None:
    """Why the last review of this session on the run was not applied (until its next review)."""
    if error := st.session_state.get(f"review-error-{run_id}"):
        st.error(md(error), icon=":material/error:")


def _discard_and_approve(record: RunRecord, pause: Pause, prefix: str, make_runtime) -> None:
    """Drop the form's edits, then approve as proposed."""
    if pause.kind == "query":
        st.session_state[f"{prefix}-query"] = pause.query
    else:
        st.session_state[prefix] = [[i, step] for i, step in enumerate(pause.plan)]
        for key in [k for k in st.session_state if str(k).startswith(f"{prefix}-step-")]:
            del st.session_state[key]
    _review(record, pause, prefix, "approve", make_runtime)
