"""Run: start an agent on the current question, watch its plan and steps as they happen, review its plans, and
read its outcome. Paused runs (also from before a restart) can be opened and resumed."""
import streamlit as st

from core import jobs
from core.agents.config import RunSettings
from core.agents.techniques import TECHNIQUES
from core.summary import technique_label
from pages.common import current_question
from pages.plan_review import show_review
from pages.run_options import choose_database, choose_hitl, choose_model, choose_plan_version, start_run
from pages.run_view import md, open_run, run_label, show_outcome, show_run

st.title("Run")

paused = [r for r in jobs.open_store().list(status="paused", limit=None) if not jobs.running(r.id)]
if paused:
    with st.expander(f":material/pause_circle: Paused runs ({len(paused)})"):
        for record in paused:
            text, button = st.columns([5, 1], vertical_alignment="center")
            text.markdown(md(run_label(record.id, record.settings, record.created)))
            if button.button("Open", key=f"open-{record.id}"):
                open_run(record, "pages/run.py")

question, database = current_question()
st.caption(f"Question `{question.id}` · {question.target}")

with st.container(border=True):
    left, middle, right = st.columns(3)
    with left:
        technique = st.selectbox("Technique", list(TECHNIQUES), format_func=technique_label, key="run_technique",
                                 index=list(TECHNIQUES).index("planrag"))
        hitl = choose_hitl(technique, key="run_hitl")
        plan_version = choose_plan_version(question.scenario, technique, key="run_plan_version")
    with middle:
        db, unavailable_reason = choose_database(key="run_db")
    with right:
        model = choose_model(question, technique, db, key="run_llm")
        settings = RunSettings(question.scenario, question.number, db, technique, model or "", hitl=hitl,
                               source=question.source, plan_version=plan_version)
        busy = jobs.running(st.session_state.get("run_id", ""))
        if st.button("Start", type="primary", icon=":material/play_arrow:", width="stretch",
                     disabled=bool(unavailable_reason or not model or busy),
                     help="Wait until the run below pauses or ends." if busy else None):
            st.session_state["run_id"] = start_run(settings)
        if unavailable_reason:
            st.caption(f"{db} is unavailable: {unavailable_reason}")

run_id = st.session_state.get("run_id")
if not run_id:
    st.stop()
record = show_run(run_id)
if record is None:
    st.stop()
if record.status == "paused":
    show_review(record)
elif record.status in ("finished", "failed"):
    st.divider()
    show_outcome(record)
    if st.button("Check the decision", icon=":material/fact_check:", type="primary"):
        open_run(record, "pages/decision.py")
