"""What the Run, History and Benchmark views share about a grade: the automatic grade's status and reason, an
analyst's override shown as such, and the form to override (or restore) a run's grade."""
from __future__ import annotations


import streamlit as st

from core.analysis.format import timestamp
from core.scenarios.dqa.source import DQAError
from core.actions.grades import override, restore
from core.model.run_settings import RunSettings
from core.store.overrides import OverrideStore
from core.scenarios.catalog import run_question
from ui import access
from ui.common import dqa_root, session_reviewer
from ui.untrusted import md

NO_DECISION = "no decision"


def override_note(run_id: str) -> str | None:
    """``overridden by ana on 2026-11-23 08:40: krakow (correct)``, None when the grade is automatic."""
    o = OverrideStore().get(run_id)
    if o is None:
        return None
    verdict = {True: "correct", False: "wrong", None: "no label"}[o.correct]
    decision = NO_DECISION if o.decision is None else o.decision
    return (f"Grade overridden by {o.by} on {timestamp(o.at)}: {decision} ({verdict})"
            + (f" — {o.note}" if o.note else ""))


def override_form(run_id: str, settings: RunSettings, key: str, decision=None) -> None:
    """A form to override the run's grade with the decision the analyst reads, or to restore the automatic one;
    it opens on the current override, else on the automatic ``decision``. Recorded under the session's identity
    (asked once when it has none)."""
    try:
        candidates, _ = run_question(settings, dqa_root())
    except DQAError as e:
        st.caption(f"The grade cannot be overridden here: {md(e)}")
        return
    store = OverrideStore()
    current = store.get(run_id)
    # saved or restored: the popover closes, drawn as a new element under a new key (closed by setting its state
    # before it was drawn, it stayed open once in three suite runs)
    closes = f"ov-closes-{key}"
    drawn = st.session_state.get(closes, 0)
    with st.popover("Override the grade", icon=":material/gavel:", key=f"ov-popover-{key}-{drawn}"):
        named = access.ask_name(f"ov-name-{key}")
        with st.form(f"override-{key}"):
            options = [NO_DECISION] + list(candidates)
            shown = current.decision if current else decision
            index = options.index(shown) if shown in options else 0
            decision = st.selectbox("The decision the answer commits to", options, index=index, key=f"ov-d-{key}")
            note = st.text_input("Why", value=current.note if current else "", key=f"ov-note-{key}")
            if st.form_submit_button("Save override", disabled=not (named and access.allowed("override"))):
                with access.asking():
                    override(run_id, settings, None if decision == NO_DECISION else decision,
                             who=access.current(), by=session_reviewer(), note=note.strip(), root=dqa_root(),
                             store=store)
                    st.session_state[closes] = drawn + 1
                    st.rerun()
        if current and st.button("Restore the automatic grade", key=f"ov-clear-{key}", **access.disabled("override")):
            with access.asking():
                restore(run_id, who=access.current(), store=store)
                st.session_state[closes] = drawn + 1
                st.rerun()
