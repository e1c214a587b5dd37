"""Run: start an agent on the current question, watch its plan and steps as they happen (Stop ends it), review its
plans (and, if asked, each query), and read its outcome. At a pause, a banner and the review form come first.
The inbox lists every paused and interrupted run (also from before a restart), each proposal shown, with who is
looking at each: approve, edit, reject (with a note), open or close from it; any run can be branched from a step. An
opened run shows where its time went (LLM calls, queries, waits for review)."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)

import dataclasses
from functools import partial

import streamlit as st

import core.jobs.runs as jobs
from core import scenarios
from core.model.bounds import NUMBERS
from core.model.run_settings import RunSettings
from core.model.technique import DEFAULT, TECHNIQUES
from core.store.runs import ENDED
from core.analysis.summary import technique_label
from ui import access
from ui.common import (
    current_question, kept, linked_run, review_name, session_limits, show_run_in_url
)
from ui.plan_review import pause_taken, show_review, show_review_error
from ui.run_options import (
    choose_database, choose_hitl, choose_model, choose_plan_version, choose_query_review, choose_setting, start_run,
    start_samples
)
from ui.inbox import follow_inbox, mark_viewing
from ui.live import live
from ui.shell import runs_ahead
from ui.run_view import branch_form, decision_spread, load, open_run, run_label, show_outcome, show_run
from ui.timeline import show_timeline
from ui.untrusted import md, md_code

PAUSE_KINDS = {"plan": "its plan", "replan": "a new plan", "query": "a query"}
SAMPLES = "run_samples"  # the runs of the last "Run N times": {"question": id, "runs": [run ids]}


def sample_inputs(settings: RunSettings, question_id: str, unavailable: bool) -> None:
    """Run N times: N independent runs of these settings in automatic mode at a sampling temperature; their
    spread of decisions is shown below instead of one sample."""
    n = st.number_input("Samples", *NUMBERS["samples"], 1, key=kept("run_samples_n"),
                        help="Run the same question N times (no review: automatic mode) and see how the decisions "
                             "spread, each with the simulator's rank, instead of one sample.")
    if n < 2:
        return
    temperature = st.number_input("Temperature of the samples", *NUMBERS["temperature"], 0.7, 0.1, key=kept("run_samples_t"),
                                  help="At 0 many servers still vary a little; a replay repeats itself exactly.")
    if st.button(f"Run {n} times", icon=":material/stacks:", width="stretch", type="primary",
                 disabled=unavailable or not access.allowed("samples")):
        sampled = dataclasses.replace(settings, hitl="auto", review_queries=False, temperature=temperature)
        runs = start_samples(sampled, n)
        if runs is not None:
            st.session_state[SAMPLES] = {"question": question_id, "runs": runs}


def show_samples(runs: list[str]) -> None:
    """The spread of the samples' decisions (followed while they run), and any sample opened in the Run view."""
    records = [load(run_id)[0] for run_id in runs]
    ended = [r for r in records if r is not None and r.status in ENDED]
    st.subheader(f"{len(runs)} samples of the question")
    if len(ended) < len(runs):
        st.progress(len(ended) / len(runs), text=f"{len(ended)} of {len(runs)} samples ended")
    if ended:
        st.caption(f"How the {len(ended)} ended samples decided (n={len(ended)}): each decision with the samples "
                   "that picked it and the simulator's rank of it; undecided samples apart. A vote would take the "
                   "decision picked most (a tie: the one picked first).")
        decision_spread(ended)
        chosen = st.selectbox("Open a sample", ended, format_func=lambda r: run_label(r.id, r.settings, r.created),
                              key="run_sample_open")
        if st.button("Open it in the Run view", icon=":material/play_circle:"):
            st.session_state.pop(SAMPLES, None)
            open_run(chosen, "pages/run.py")


def all_ended(runs: list[str]) -> bool:
    return all((r := load(run_id)[0]) is not None and r.status in ENDED for run_id in runs)


def start_button(slot, busy: bool, unavailable: bool, reviewing: bool = False) -> bool:
    """Start, in its slot: disabled while a run of this page goes on or waits for its review (under another key,
    so that once the run ends the slot can be drawn again with the usable button, without a rerun that would drop
    the page's messages); not the primary button when Samples asks for more than one (Run N times is)."""
    samples = st.session_state.get(kept("run_samples_n"), 1)  # more than one: Run N times is the primary action
    why = ("Wait until the run below pauses or ends, or stop it." if busy else
           "The run above waits for your review: review it, or close it in the Inbox."
           if reviewing else f"Start one run, with review; Run {samples} times (below) runs all {samples} samples."
           if samples > 1 else None)
    return slot.button("Start", type="secondary" if samples > 1 else "primary", icon=":material/play_arrow:",
                       width="stretch",
                       disabled=unavailable or busy or reviewing or not access.allowed("start"),
                       key="run_start_busy" if busy else "run_start", help=why)

st.title("Run")
runs_ahead()  # what a run loads is loaded from now on, between this page's runs

run_id = linked_run()
record, job = load(run_id) if run_id else (None, None)
if run_id and record is None and job is None:
    st.error(f"Run {md_code(run_id)} is not in this app's run store (a link from another installation, or a run "
             "deleted): nothing to show. Start a run below, or open one on **History**.", icon=":material/link_off:")
    st.session_state.pop("run_id", None)
    show_run_in_url(run_id := None)
reviewing = record is not None and record.status == "paused" and not jobs.running(run_id)
if reviewing:  # the inbox says who is looking at a run waiting for review
    mark_viewing(run_id)
top = st.empty()  # one slot, emptied when not reviewing: a review form shown before must not linger as the run goes on
if reviewing:
    with top.container():
        st.warning(f"**Waiting for your review** — run {md_code(run_id)} proposes "
                   f"{PAUSE_KINDS.get(record.pause['kind'], '')} ({review_name(record.pause.get('id'))}). The run goes on "
                   "when you approve, edit or reject it.", icon=":material/pending_actions:")
        with st.container(border=True):
            show_review(record)
elif run_id:
    with top.container():
        show_review_error(run_id)  # a review refused (the pause was taken first), with the run's state now
        if record is not None:
            pause_taken(record)  # a pause shown here, reviewed elsewhere

follow_inbox()  # the page drawn again when what waits changes: a review here or by another analyst shows by itself

question, database = current_question()
if notice := st.session_state.pop("run_notice", None):  # e.g. a learned plan opened on another question
    st.info(md(notice), icon=":material/swap_horiz:")
st.caption(f"Question {md_code(question.id)} · {md(scenarios.target(question))}")

with st.container(border=True):
    st.markdown("**A new run** of this question" + (": its settings, not those of the run opened below (in its "
                                                    "header)" if run_id else ""))
    left, middle, right = st.columns(3)
    with left:
        technique = st.selectbox("Technique", list(TECHNIQUES), format_func=technique_label, key=kept("run_technique"),
                                 index=list(TECHNIQUES).index(DEFAULT))
        hitl = choose_hitl(technique, key="run_hitl")
        review_queries = choose_query_review(key="run_review_queries")
        plan_version = choose_plan_version(question.scenario, technique, key="run_plan_version")
        prompt_setting, planner = choose_setting(technique, key="run_setting")
    with middle:
        db, unavailable_reason = choose_database(key="run_db")
    with right:
        model = choose_model(question, technique, db, key="run_llm")
        settings = RunSettings(question.scenario, question.number, db, technique, model or "", hitl=hitl,
                               source=question.source, plan_version=plan_version, limits=session_limits(),
                               prompts=prompt_setting, reaper_planner=planner, review_queries=review_queries)
        busy = jobs.running(run_id or "")
        start_slot = st.empty()
        same_question = reviewing and (record.settings.source, record.settings.scenario,
                                       record.settings.question) == (question.source, question.scenario,
                                                                     question.number)
        started_here = start_button(start_slot, busy, unavailable=bool(unavailable_reason or not model),
                                    reviewing=same_question)
        if started_here and (new_run := start_run(settings)):
            st.session_state["run_id"] = run_id = new_run
            start_button(start_slot, True, unavailable=False)  # disabled while the new run is followed below
        if unavailable_reason:
            st.caption(f"{db} is unavailable: {unavailable_reason}")
        sample_inputs(settings, question.id, unavailable=bool(unavailable_reason or not model))

sampled = st.session_state.get(SAMPLES)
if sampled and sampled["question"] == question.id:
    runs = sampled["runs"]
    live(partial(show_samples, runs), going=lambda: not all_ended(runs), every=1.0)
    st.divider()

show_run_in_url(run_id)
if not run_id:
    st.stop()
record = show_run(run_id)
if record is None:
    st.stop()
if (busy or started_here) and not jobs.running(run_id):  # it ended while followed here: Start is usable again
    if started_here:
        st.rerun()  # the enabled Start's key is taken in this run
    start_button(start_slot, False, unavailable=bool(unavailable_reason or not model))
if record.status == "paused" and not reviewing:  # it paused while followed here: lay the page out for the review
    st.rerun()
if record.status in ENDED:
    st.divider()
    show_outcome(record)
    if st.button("Check the decision", icon=":material/fact_check:", type="primary"):
        open_run(record, "pages/decision.py")
if not jobs.running(run_id):
    show_timeline(record)
branch_form(record, key="run")
