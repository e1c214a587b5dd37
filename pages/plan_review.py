"""The analyst's review at a pause: the proposed plan as an editable list (edit, reorder, add, delete steps) with
Approve, Approve edited, and Reject with a note. A review resumes the run in the background."""
from __future__ import annotations

import streamlit as st

from core import jobs
from core.agents.config import Pause, Review
from core.runs import RunRecord
from pages.run_options import runtime_factory
from pages.run_view import steps_markdown


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


def _review(record: RunRecord, prefix: str, action: str, make_runtime) -> None:
    note = st.session_state.get(f"{prefix}-note", "").strip()
    if action == "reject" and not note:
        st.session_state[f"{prefix}-error"] = "Write a note for the agent: what should its new plan do differently?"
        return
    if action == "edit":
        review = Review.edit(_edited_steps(prefix), note)
    else:
        review = Review.reject(note) if action == "reject" else Review.approve(note)
    try:
        jobs.resume(record, review.validate(), make_runtime)
    except (ValueError, jobs.RunBusy) as e:
        st.session_state[f"{prefix}-error"] = str(e)
    else:
        st.session_state.pop(f"{prefix}-error", None)


def show_review(record: RunRecord) -> None:
    """The review form of a paused run."""
    pause = Pause(**record.pause)
    prefix = f"review-{record.id}-{len(record.events)}"  # one draft per pause
    if pause.kind == "replan":
        st.subheader(":material/edit_note: The agent wants to change its plan")
        with st.expander("The plan it would replace"):
            st.markdown(steps_markdown(pause.old_plan))
    else:
        st.subheader(":material/edit_note: The agent proposes a plan")
    st.caption("Edit, reorder, add or delete steps; then approve the plan as proposed or as edited, or reject it "
               "with a note (the agent then makes a new plan).")
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
    st.text_input("Note for the agent", key=f"{prefix}-note",
                  placeholder="Optional when approving; needed to reject (tell the agent what to change)")
    make_runtime = runtime_factory()
    approve, edited, reject = st.columns(3)
    approve.button("Approve", type="primary", icon=":material/check:", key=f"{prefix}-approve",
                   on_click=_review, args=(record, prefix, "approve", make_runtime), width="stretch")
    edited.button("Approve edited", icon=":material/edit:", key=f"{prefix}-edit",
                  on_click=_review, args=(record, prefix, "edit", make_runtime), width="stretch")
    reject.button("Reject with the note", icon=":material/undo:", key=f"{prefix}-reject",
                  on_click=_review, args=(record, prefix, "reject", make_runtime), width="stretch")
    if error := st.session_state.get(f"{prefix}-error"):
        st.error(error)
    with st.expander("The agent's reply"):
        st.text(pause.reply)
