"""Compare: techniques side by side on the current question, with one database and one model (runs in automatic
mode): their plans, queries, counts, tokens, time, decisions and ranks; Stop ends a run. Past runs of the question
can join, and a run can be lined up step by step with its branches, where they diverge marked. "Scripted demo"
opens, in one click, the shipped demo where re-planning matters (docs/scenarios.md)."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)


import pandas as pd
import streamlit as st

import core.jobs.runs as jobs
from core import scenarios
from core.scenarios import catalog
from core.model.run_settings import RunSettings
from core.model.technique import FEATURED, TECHNIQUES
from core.store.runs import ENDED, RunRecord
from core.model.question import Question
from core.analysis.summary import compare_row, gaps_as_text, technique_label
from core.analysis.trace import ANSWER, BEFORE_PLAN, align_by
from ui import access
from ui.common import current_question, dqa_root, kept, select_question, session_limits, shown_columns, url_param
from ui.run_options import REPLAYS, choose_database, choose_models, question_replays, start_run
from ui.live import live
from ui.shell import runs_ahead
from ui.run_view import (RunPanel, decision_spread, load, run_label, show_live, show_outcome, show_state,
                         tracker)
from ui.untrusted import md, md_code

COLUMNS = ["technique", "status", "decision", "correct", "rank", "plan steps", "re-plans", "queries", "LLM calls",
           "tokens", "time (s)", "database", "model", "run"]
PER_ROW = 4
BRANCHED = "\u21b3"  # marks where a branch diverges (↳: in every common font; ⑂ showed as a box)
SCRIPTED = ("scenario", "depot", 2)  # the scripted demo where re-planning matters (docs/scenarios.md)
SCRIPTED_DB = "sqlite"


def runs_of(question: Question, started: list[str]) -> dict[str, str]:
    """The runs that can be compared, with their labels: those started here, then the stored runs of the question."""
    past = [r for r in jobs.open_store().list(scenario=question.scenario, question=question.number, limit=None)
            if r.settings.source == question.source]
    labels = {run_id: run_label(run_id, job.settings, job.started)
              for run_id in started if (job := jobs.job(run_id))}
    return {**labels, **{r.id: run_label(r.id, r.settings, r.created) for r in past}}


def scripted() -> None:
    """The scripted demo: its question made current, and every technique with a scripted replay of it (IterRAG,
    PlanRAG, PlanRAG without re-planning) started side by side on it, the page's choices set to match."""
    question = catalog.question(*SCRIPTED, root=dqa_root())
    select_question(question)
    found = {}
    for replay in question_replays(question, SCRIPTED_DB):
        found.setdefault(replay.technique, replay.spec)
    techniques = [t for t in TECHNIQUES if t in found]
    st.session_state.update({"compare_techniques": techniques, "compare_db": SCRIPTED_DB, "compare_llm": REPLAYS})
    started = [start_run(RunSettings(question.scenario, question.number, SCRIPTED_DB, technique, found[technique],
                                     hitl="auto", source=question.source, limits=session_limits()))
               for technique in techniques]
    st.session_state[f"compare-{question.id}"] = [r for r in started if r]


def columns(run_ids: list[str], key: str = "compare") -> None:
    """The runs in columns: each followed while it goes on (with Stop), its outcome once it ended."""
    for start in range(0, len(run_ids), PER_ROW):
        for column, run_id in zip(st.columns(min(PER_ROW, len(run_ids))), run_ids[start:start + PER_ROW]):
            with column:
                record, job = load(run_id)
                settings = job.settings if job else record.settings
                run = tracker(record, job)
                if run is not None and not run.done:
                    show_live(run_id, settings, run, key, compact=True)
                    continue
                RunPanel(run_id, settings, compact=True).add(record.events if record else [])
                show_state(record, job, key=key)
                if record and record.status in ENDED:
                    show_outcome(record, compact=True)


def summary(run_ids: list[str]) -> None:
    """The runs' summary table, drawn with their columns: a row and its run's panel always agree."""
    records = [record for run_id in run_ids if (record := load(run_id)[0]) is not None]
    st.dataframe(pd.DataFrame(gaps_as_text([compare_row(r) for r in records])), column_order=shown_columns(COLUMNS),
                 hide_index=True)


def side_by_side(run_ids: list[str]) -> list[RunRecord]:
    """The summary table and the runs in columns, followed live while they run (ui.live); their stored records
    after."""
    runs = [run for run_id in run_ids if (run := tracker(*load(run_id))) is not None]

    def draw() -> None:
        summary(run_ids)
        columns(run_ids)

    live(draw, going=lambda: any(not run.done for run in runs))
    return [record for run_id in run_ids if (record := load(run_id)[0]) is not None]


def decisions(records: list[RunRecord]) -> None:
    """How the compared runs that ended decided: each decision with the runs that picked it and the simulator's
    rank. For a benchmark's vote (opened from its Questions tab) these are the vote's samples."""
    ended = [r for r in records if r.status in ENDED]
    if len(ended) < 2:
        return
    st.subheader("Decisions of these runs")
    same = len({(r.settings.technique, r.settings.db) for r in ended}) == 1
    model = " with the same model" if len({r.settings.llm for r in ended}) == 1 else ""
    st.caption(f"{len(ended)} ended runs (n={len(ended)})"
               + (f", all {technique_label(ended[0].settings.technique)} on {ended[0].settings.db}{model}: "
                  "samples of one technique. A vote takes the decision picked most (undecided runs do not vote; a "
                  "tie goes to the one picked first)." if same else "."))
    decision_spread(ended)


def step_by_step(records: list[RunRecord]) -> None:
    """The compared runs' steps in one table, lined up by LLM call or by plan step, the first row where each run
    differs from the first marked."""
    if len(records) < 2:
        return
    names = {r.id: f"{technique_label(r.settings.technique)} · {r.id}" for r in records}
    st.subheader("Step by step")
    by = st.segmented_control("Line up by", ["call", "plan"], default="call", required=True,
                              key=kept("compare_line_up"),
                              format_func={"call": "LLM call", "plan": "Plan step"}.get,
                              help="LLM call: a row per call to the model and what it did. Plan step: a row per step "
                                   "of the plan, as each agent named its Current step (techniques without a plan "
                                   "have all their calls in the first row).") or "call"
    rows, summaries, diverges = align_by({r.id: r.events for r in records}, by)
    if not rows:
        st.caption("No steps recorded in these runs yet: nothing to line up.")
        return
    label = str if by == "call" else lambda row: {BEFORE_PLAN: "before the plan's steps",
                                                  ANSWER: "final answer"}.get(row, f"plan step {row}")
    table = [{"step": label(row), **{names[run_id]: ("\u2260 " if diverges[run_id] == row else "")
                                     + summaries[run_id].get(row, "") for run_id in names}} for row in rows]
    first = min((r for r in diverges.values() if r is not None), default=None)
    where = (f"at step {first}" if by == "call" else "before the plan's steps" if first == BEFORE_PLAN
             else f"at the {label(first)}" if first is not None else "")
    st.caption(f"\u2260 marks where a run first differs from {md(names[records[0].id])}: the first difference is {where}."
               if first is not None
               else "The runs do the same at every row.")
    st.dataframe(pd.DataFrame(table), hide_index=True, height=min(560, 38 + 35 * len(table)),
                 column_config={"step": st.column_config.TextColumn(width="small")}
                 | {name: st.column_config.TextColumn(width="large") for name in names.values()})


def with_branches(records: list[RunRecord]) -> None:
    """A run and its branches lined up by step, the step where each branch diverges marked."""
    store = jobs.open_store()
    family = {r.id: store.branches(r.id) for r in records}
    parents = [r for r in records if family[r.id]]
    if not parents:
        return
    st.subheader("A run and its branches")
    parent = st.selectbox("Run", parents, format_func=lambda r: run_label(r.id, r.settings, r.created),
                          key="compare_branches_of")
    runs = {parent.id: store.get(parent.id).events}
    runs.update({b.id: store.get(b.id).events for b in family[parent.id]})
    steps, summaries, diverges = align_by(runs)
    rows = []
    for step in steps:
        row = {"step": step}
        for run_id in runs:
            mark = f"{BRANCHED} " if diverges[run_id] == step and run_id != parent.id else ""
            row[f"{'run' if run_id == parent.id else 'branch'} {run_id}"] = mark + summaries[run_id].get(step, "")
        rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    points = ", ".join(f"`{b.id}` at step {b.branch_step}" for b in family[parent.id])
    st.caption(f"{BRANCHED} marks where a branch diverges from its run: {points}. Before that step a branch repeats "
               "its run's steps.")


st.title("Compare")
runs_ahead()  # what a run loads is loaded from now on, between this page's runs
question, database = current_question()
about, demo = st.columns([5, 2], vertical_alignment="center")
about.caption(f"Question {md_code(question.id)} · {md(scenarios.target(question))}")
demo.button("Scripted demo: where re-planning matters", icon=":material/science:", on_click=scripted,
            width="stretch", disabled=not access.allowed("start"),
            help="Distribution centre question 2 (summer), scripted replays, no model needed: IterRAG looks only "
                 "around the central site and picks DC-ASH (wrong); PlanRAG's re-plan follows the coastal summer "
                 "demand its queries show and picks DC-BRO (rank 1); PlanRAG without re-planning keeps its first "
                 "plan to DC-ASH.")
compared = f"compare-{question.id}"  # the runs compared on this question (widget key)

with st.container(border=True):
    # Across the page: in a column the pills ran out of room (three hidden at 1440 px).
    techniques = st.pills("Techniques", list(TECHNIQUES), selection_mode="multi", default=list(FEATURED),
                          format_func=technique_label, key=kept("compare_techniques"))
    middle, right = st.columns(2)
    with middle:
        db, unavailable_reason = choose_database(key="compare_db")
    with right:
        models = choose_models(question, techniques, db, key="compare_llm")
        if st.button("Run side by side", type="primary", icon=":material/play_arrow:", width="stretch",
                     disabled=bool(unavailable_reason or not models) or not access.allowed("start")):
            started = [start_run(RunSettings(question.scenario, question.number, db, technique, model, hitl="auto",
                                             source=question.source, limits=session_limits()))
                       for technique, model in models.items()]
            st.session_state[compared] = [r for r in started if r] + st.session_state.get(compared, [])

linked = [run_id for run_id in (url_param("runs", 2000) or "").split(",") if run_id]
if linked and linked != st.session_state.get("compare_linked"):  # a link names the runs it compares
    st.session_state["compare_linked"] = st.session_state[compared] = linked
labels = runs_of(question, st.session_state.get(kept(compared), []))
st.session_state[compared] = [run_id for run_id in st.session_state.get(compared, []) if run_id in labels]
if linked and not set(linked) <= set(labels):
    st.warning(f"The link names runs that are not runs of {md_code(question.id)} in this app's run store: "
               f"{', '.join(md_code(r) for r in linked if r not in labels)}.", icon=":material/link_off:")
chosen = st.multiselect("Runs compared", list(labels), key=compared, format_func=labels.get,
                        help="The runs started here, and any earlier run of this question.")
st.session_state["compare_linked"] = chosen  # the page's address names the runs compared, to share or bookmark
if chosen:
    st.query_params["runs"] = ",".join(chosen)
else:
    st.query_params.pop("runs", None)
if not chosen:
    st.info("Choose techniques and press **Run side by side**, or pick earlier runs of this question.")
    st.stop()

records = side_by_side(chosen)
decisions(records)
step_by_step(records)
with_branches(records)

