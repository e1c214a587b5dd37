"""Benchmark: run DQA, or part of it, with techniques and a model in the background (the page stays responsive and
follows the progress), and browse the results as the paper's tables and figures, with CSV and JSON export."""
import json
from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from core.agents.techniques import TECHNIQUES
from core.backends.registry import BACKENDS
from core.benchmark import jobs, reports
from core.benchmark.command import duration
from core.benchmark.failures import CATEGORIES, PRECEDENCE, UNCLASSIFIED
from core.benchmark.items import BenchError
from core.benchmark.prices import load_prices, prices_path
from core.benchmark.results import read_results
from core.benchmark.runner import BenchConfig, bench_home
from core.dqa import DQAError
from core.llm import LLMError
from core.scenario import SCENARIOS
from core.summary import technique_label
from pages.common import dqa_root, session_llm
from pages.run_view import load, open_run

POLL_S = 1.0


def start_form() -> None:
    llm = session_llm()
    with st.form("bench_start"):
        left, middle, right = st.columns(3)
        scenario = left.selectbox("Scenario", [*SCENARIOS, "all"], index=len(SCENARIOS), format_func=str.title, key="bench_scenario")
        db = middle.selectbox("Database", [*BACKENDS, "all"], help="all: every backend available here",
                              key="bench_db")
        techniques = right.multiselect("Techniques", list(TECHNIQUES), default=["planrag"],
                                       format_func=technique_label, key="bench_techniques")
        left, right = st.columns([2, 1])
        model = left.text_input("Model", value=llm.model or "",
                                help="A model name (OpenAI, or the server set on Settings), replay:FILE (one "
                                     "transcript for every item) or replay:DIR (one per item)", key="bench_model")
        questions = right.text_input("Questions", "1-10", help="Numbers and ranges, e.g. 1-10,15, or all",
                                     key="bench_questions")
        a, b, c, d = st.columns(4)
        concurrency = a.number_input("Items at once", 1, 32, 2, key="bench_concurrency")
        rpm = b.number_input("Requests per minute", 0, 100_000, 0, help="0: no limit", key="bench_rpm")
        name = c.text_input("Results name", placeholder="the model's name", key="bench_name")
        cache = d.checkbox("Use the LLM reply cache", True, help="An identical rerun then costs nothing",
                           key="bench_cache")
        started = st.form_submit_button("Start", icon=":material/play_arrow:")
    if not started:
        return
    if not techniques:
        st.error("Choose at least one technique.")
        return
    config = BenchConfig(techniques, model.strip(), scenario=scenario, db=db, questions=questions,
                         concurrency=int(concurrency), rpm=rpm or None, name=name.strip() or None, cache=cache,
                         base_url=llm.base_url, temperature=llm.temperature, dqa_root=dqa_root(), llm_settings=llm)
    try:
        job = jobs.start(config)
    except (BenchError, LLMError, ValueError, DQAError) as e:
        st.error(str(e))
    else:
        st.session_state["bench_dir"] = str(job.bench.directory)


def show_job(job: jobs.BenchJob) -> None:
    bench, progress = job.bench, job.bench.progress
    st.markdown(f"**{bench.directory.name}**: {len(bench.work.items)} items, model `{bench.model}`")
    for note in bench.notes:
        st.caption(note)
    if progress is None:
        st.progress(0.0, text="starting")
        return
    finished = progress.finished + len(progress.errors)
    accuracy = "-" if progress.accuracy is None else f"{progress.accuracy:.1f}%"
    text = (f"{finished}/{progress.total} ({progress.skipped} done before) · accuracy {accuracy} · "
            f"ETA {duration(progress.eta_s)}")
    st.progress(finished / progress.total, text=text)
    if job.error:
        st.error(f"stopped: {job.error}")
    elif job.done:
        st.success(f"ended{': ' + progress.stopped if progress.stopped else ''}; the results are on the Results tab")
    else:
        if progress.running:
            st.caption("running: " + ", ".join(sorted(progress.running)))
        st.button("Stop", key=f"stop_{bench.directory}", on_click=job.stop, icon=":material/stop:",
                  help="Start no more items; those running finish and are stored")
    if progress.errors:
        with st.expander(f"{len(progress.errors)} items could not run (a rerun tries them again)"):
            st.text("\n".join(progress.errors))


@st.fragment(run_every=POLL_S)
def follow() -> None:
    running = [j for j in jobs.jobs() if not j.done]
    for job in running or jobs.jobs()[-1:]:
        show_job(job)


def bars_with_paper(acc: pd.DataFrame) -> None:
    """Accuracy per technique and database beside the paper's figures."""
    ours = acc.assign(series=acc["db"])[["scenario", "technique", "series", "accuracy"]]
    paper = (acc.dropna(subset=["paper"]).drop_duplicates(["scenario", "technique", "kind"])
             .assign(series=lambda d: "paper " + d["kind"], accuracy=lambda d: d["paper"]))
    data = pd.concat([ours, paper[["scenario", "technique", "series", "accuracy"]]])
    st.plotly_chart(px.bar(data, x="technique", y="accuracy", color="series", barmode="group", facet_col="scenario",
                           labels={"accuracy": "accuracy %"}, range_y=[0, 100]))


def show_results(results: list[dict]) -> None:
    try:
        prices = load_prices()
    except ValueError as e:
        st.warning(f"{e}; costs are left out", icon=":material/warning:")
        prices = {}
    tables = reports.tables(results, prices)
    st.download_button("Export all tables (JSON)", icon=":material/download:", file_name="benchmark-report.json",
                       mime="application/json",
                       data=json.dumps({k: json.loads(v.to_json(orient="records")) for k, v in tables.items()}))

    st.subheader("Accuracy (Tables 4-5)")
    st.caption("Accuracy % per scenario and database (SQL = RDB, graph = GDB), their average, and the paper's GPT-4 "
               "figures (columns marked paper).")
    st.dataframe(tables["paper_layout"], hide_index=True)
    bars_with_paper(tables["accuracy"])

    st.subheader("Single and multiple retrievals (Figure 5)")
    st.caption("SR: questions answered with one database query, MR: more; by each run's own queries (basis own) "
               "and, as the paper splits them, by IterRAG's queries on the same question and database (basis "
               "IterRAG, when the results have IterRAG).")
    split = tables["retrieval_split"]
    st.plotly_chart(px.bar(split, x="split", y="accuracy", color="technique", barmode="group", facet_col="scenario",
                           facet_row="basis", hover_data=["pairs", "paper"], labels={"accuracy": "accuracy %"}))
    st.dataframe(split, hide_index=True)

    st.subheader("Missed data analysis (Table 6)")
    st.caption("Pairs whose run never queried a critical value: Locating ingoing, total_power; Building "
               "current_output, pop_demand (found in the queries and their results).")
    st.dataframe(tables["missed"], hide_index=True)

    st.subheader("Re-plans (Table 7)")
    replans = tables["replans"]
    if not replans.empty:
        figure = px.bar(replans, x="replans", y="pairs", color="technique", barmode="group", facet_col="scenario",
                        hover_data=["accuracy", "paper pairs", "paper accuracy"])
        st.plotly_chart(figure.update_xaxes(type="category"))
    st.dataframe(replans, hide_index=True)

    st.subheader("Failure categories (Figure 6)")
    failures = tables["failures"]
    categories = list(PRECEDENCE) + [UNCLASSIFIED]
    long = failures.melt(id_vars=["scenario", "technique"], value_vars=[f"{c} rate" for c in categories],
                         var_name="category", value_name="rate")
    long["category"] = long["category"].str.removesuffix(" rate")
    st.plotly_chart(px.bar(long, x="technique", y="rate", color="category", facet_col="scenario",
                           labels={"rate": "failure rate % (of all pairs)"}))
    st.caption(" · ".join(f"**{c}**: {text}" for c, text in CATEGORIES.items()))
    st.dataframe(failures, hide_index=True)

    st.subheader("Regret of wrong answers")
    st.dataframe(tables["regret"], hide_index=True)
    wrong = tables["items"].dropna(subset=["relative_regret"])
    wrong = wrong[wrong["correct"] == False]  # noqa: E712
    if not wrong.empty:
        st.plotly_chart(px.histogram(wrong, x="relative_regret", color="technique", facet_col="scenario",
                                     labels={"relative_regret": "relative regret % of the best decision"}))

    st.subheader("Cost and time per question")
    st.caption(f"Prices per million tokens from {prices_path()} (edit it to change them).")
    st.dataframe(tables["costs"], hide_index=True)

    st.subheader("Questions")
    items = tables["items"]
    if st.toggle("Wrong answers only"):
        items = items[items["correct"] == False]  # noqa: E712
    st.download_button("Export these rows (CSV)", icon=":material/download:", file_name="benchmark-items.csv",
                       mime="text/csv", data=items.to_csv(index=False))
    picked = st.dataframe(items, hide_index=True, on_select="rerun", selection_mode="single-row", key="bench_items")
    rows = picked.selection.rows
    if rows and st.button("Open its trace in the Run view", icon=":material/play_circle:"):
        record = load(items.iloc[rows[0]]["run_id"])[0]
        if record is None:
            st.warning("That run is not in this app's run store (it ran with another home).")
        else:
            open_run(record, "pages/run.py")


st.title("Benchmark")
run_tab, results_tab = st.tabs(["Run", "Results"])
with run_tab:
    start_form()
    follow()
with results_tab:
    directories = sorted(p.parent for p in bench_home().glob("*/results.sqlite"))
    if not directories:
        st.info("No benchmark results yet: start one on the Run tab, or with `python -m core bench`.",
                icon=":material/leaderboard:")
    else:
        chosen = st.session_state.get("bench_dir")
        names = [str(d) for d in directories]
        directory = st.selectbox("Results", names, index=names.index(chosen) if chosen in names else 0,
                                 format_func=lambda d: Path(d).name)
        results = read_results(directory)
        models = sorted({r["model"] for r in results})
        if len(models) > 1:
            keep = st.multiselect("Models", models, default=models)
            results = [r for r in results if r["model"] in keep]
        if results:
            show_results(results)
        else:
            st.info("No results here yet.")
