"""Benchmark: run DQA, or part of it, with techniques and a model in the background (the page stays responsive and
follows the progress), and browse the results as the paper's tables and figures, with CSV and JSON export."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)

import html
import json
from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from core.analysis.format import GAP, duration, number, percent, spent
from core.auth.gate import Refused
from core import scenarios
from core.model.bounds import NUMBERS
from core.model.technique import DEFAULT, TECHNIQUES, parse_voted
from core.backends.registry import BACKENDS
from core.benchmark import fidelity, reports
import core.jobs.benchmarks as jobs
from core.jobs import queue
from core.benchmark.failures import CATEGORIES, PRECEDENCE, UNCLASSIFIED
from core.benchmark.items import BenchError
from core.llm.prices import load_prices, prices_path
from core.benchmark.smoke import smoke_config
from core.benchmark.results import read_all, stored_benchmarks
from core.benchmark.config import BenchConfig, bench_home
from core.scenarios.catalog import SOURCES
from core.scenarios.dqa.source import DQA_SET, DQAError
from core.llm.client import LLMError
from core.analysis.summary import technique_label
from ui import access
from ui.common import dqa_root, in_words, kept, session_limits, session_llm
from ui.grading_view import override_form, override_note
from ui.limit_inputs import budget_inputs, limit_inputs
from ui.run_view import load, open_run
from ui.run_options import PLANNER_LABELS, PROMPT_LABELS
from ui.set_compare import show_set_comparison
from core.analysis.spreadsheet import csv_text
from ui.live import live
from ui.untrusted import md, md_code

POLL_S = 1.0
ACCURACY_COLUMNS = ["source", "scenario", "db", "technique", "model", "n", "correct", "errors", "accuracy", "ci95_low",
                    "ci95_high", "answered accuracy", "optimal rate", "optimal ci95_low", "optimal ci95_high",
                    "undecided", "overridden", "all tied", "mean regret", "paper", "paper rule accuracy"]
#: Command-line words in core's messages, as this page names the same thing.
PAGE_WORDS = [(r"use another --out \(or --name\)", "choose another Results name"),
              (r"use --source ", "choose Questions: "), (r"--questions", "Questions"), (r"--rpm", "Requests per minute"),
              (r"--concurrency", "Items at once"), (r"\(--base-url\)", "(Settings: server URL)"),
              (r"--epochs", "Epochs"), (r"--vote", "Vote over N samples"), (r"--top-p", "Top-p")]


def page_words(message: str) -> str:
    """A message from core, with the command line's options named as this page's inputs."""
    return in_words(message, PAGE_WORDS)




def _gap(value) -> bool:
    """None, NaN, NaT or pd.NA (whose truth value is ambiguous, so ``v == v`` cannot tell it)."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _cell(value):
    if isinstance(value, float) and not isinstance(value, bool):
        return number(value)
    return value


def table(df: pd.DataFrame, **options):
    """A results table: headings without underscores; numbers to 4 significant digits; a column mixing kinds of
    value (decisions: Locating's node names, Building's ids) or with gaps as text, one type per column (Arrow needs
    one), a gap as "–" (not None)."""
    df = df.copy()
    for column in df.columns:
        values = df[column]
        if not values.isna().any() and values.dtype != object:
            continue
        kinds = {type(v) for v in values if not _gap(v)}
        if values.dtype == object and len(kinds) <= 1:
            df[column] = values.astype(object).where(values.notna(), GAP)
        elif values.isna().any() or len(kinds) > 1:  # a number column with gaps, or mixed: text, gaps as "–"
            df[column] = [GAP if _gap(v) else str(_cell(v)) for v in values]
    headers = {c: st.column_config.Column(header(c)) for c in df.columns if isinstance(c, str) and "_" in c}
    headers.update(options.pop("column_config", None) or {})
    return st.dataframe(df.style.format(_cell), hide_index=True, column_config=headers, **options)


def header(column: str) -> str:
    """A column's heading as a person reads it: ``ci95_low`` as ``95% CI low``, ``only_a`` as ``only a``."""
    return column.replace("ci95", "95% CI").replace("_", " ")


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """Techniques by their names (PlanRAG, not planrag), scenarios by their titles."""
    df = df.copy()
    if "technique" in df.columns:
        df["technique"] = df["technique"].map(technique_label)
    if "scenario" in df.columns:
        df["scenario"] = df["scenario"].map(scenario_title)
    return df


def scenario_title(name: str) -> str:
    try:
        return scenarios.get(name).title
    except KeyError:
        return name


def chart(figure) -> None:
    """A figure with its facets titled by their value (``Locating``, not ``scenario=Locating``), as text (a
    plugin's title is no HTML for plotly)."""
    figure.for_each_annotation(lambda a: a.update(text=html.escape(a.text.split("=", 1)[-1])))  # plotly's HTML
    st.plotly_chart(figure)


def n_above_intervals(figure):
    """Bars with an interval (in %): each bar's text (its n) written just above the interval's top; in the bar, the
    interval's line crossed it."""
    for bar in [t for t in figure.data if t.type == "bar" and t.text is not None and t.error_y.array is not None]:
        figure.add_scatter(x=bar.x, y=[y + plus + 2 for y, plus in zip(bar.y, bar.error_y.array)], text=bar.text,
                           mode="text", textposition="top center", textfont_size=11, cliponaxis=False,
                           xaxis=bar.xaxis, yaxis=bar.yaxis, offsetgroup=bar.offsetgroup,
                           legendgroup=bar.legendgroup, showlegend=False, hoverinfo="skip")
        bar.text = None
    return figure.update_layout(scattermode="group")


def smoke_start() -> None:
    """A benchmark without a model: question 1 of the demo scenarios or of the plugin scenarios, played from the
    shipped scripted transcripts."""
    st.caption("No model? The smoke benchmark plays question 1 of each demo scenario, or of each plugin scenario "
               "with a transcript, from the scripted transcripts shipped in assets/replays (PlanRAG and IterRAG, "
               "SQLite): the whole pipeline in seconds, results under **smoke** (or **smoke-scenario**).")
    left, right = st.columns([2, 3], vertical_alignment="bottom")
    source = left.segmented_control("Smoke questions", ["demo", "scenario"], default="demo", required=True,
                                    format_func={"demo": "Demo scenarios", "scenario": "Plugin scenarios"}.get,
                                    key="bench_smoke_source")
    if right.button("Run the smoke benchmark", icon=":material/science:", key="bench_smoke",
                    **access.disabled("benchmark_start")):
        try:
            job = jobs.start(smoke_config(source=source, db="sqlite" if source == "scenario" else None),
                             who=access.current())
        except Refused as e:
            access.show_refusal(e)
        except (BenchError, LLMError, ValueError, DQAError) as e:
            st.error(md(page_words(str(e))))
        else:
            st.session_state["bench_dir"] = str(job.bench.directory)


def sampling_inputs(temperature: float) -> tuple:
    """Repeats and sampling: epochs, a vote over N samples, temperature, top-p (0: not sent) and seed (blank: not
    sent)."""
    a, b, c, d, e = st.columns(5)
    epochs = a.number_input("Epochs", *NUMBERS["epochs"], 1, key=kept("bench_epochs"),
                            help="Run every item this many times, each a run of its own; a rerun with more runs only "
                                 "the missing epochs. Accuracy then has a clustered interval (a question's samples "
                                 "are one cluster) and the agreement between samples.")
    vote = b.number_input("Vote over N samples", *NUMBERS["vote"], 0, key=kept("bench_vote"),
                          help="0: no vote. N: also each technique's decision by majority of N samples (undecided "
                               "samples do not vote; a tie goes to the decision voted first), as a technique of its "
                               "own, costing N times the calls; runs N epochs if fewer are asked.")
    temperature = c.number_input("Temperature", *NUMBERS["temperature"], float(temperature), 0.1, key=kept("bench_temperature"))
    top_p = d.number_input("Top-p", *NUMBERS["top_p"], 0.0, 0.05, key=kept("bench_top_p"), help="0: not sent (the server's)")
    seed = e.text_input("Seed", "", key=kept("bench_seed"), placeholder="not sent",
                        help="Sent to servers that take one; epoch e sends seed + e - 1")
    return epochs, vote, temperature, top_p, seed


def parse_seed(text: str) -> int | None:
    """The seed typed (None when blank); ValueError naming the field when it is not a whole number."""
    if not text.strip():
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"Seed must be a whole number, not {text.strip()!r}") from None


def start_form() -> None:
    scenarios.use_folder(st.session_state.get("scenarios_dir"))  # the session's (Settings), also when run alone
    llm = session_llm()
    with st.form("bench_start"):
        source = st.segmented_control("Questions", list(SOURCES), default="dqa", format_func=SOURCES.get,
                                      required=True, key=kept("bench_source"))
        left, middle, right = st.columns(3)
        names = scenarios.names()
        scenario = left.selectbox("Scenario", [*names, "all"], index=len(names), key=kept("bench_scenario"),
                                  format_func=lambda n: "All" if n == "all" else scenarios.get(n).title,
                                  help="All: every scenario with questions in the chosen set (a plugin scenario's "
                                       "questions are its own: choose “The scenario's own questions”)")
        db = middle.selectbox("Database", [*BACKENDS, "all"], help="all: every backend available here",
                              key=kept("bench_db"))
        techniques = right.multiselect("Techniques", list(TECHNIQUES), default=[DEFAULT],
                                       format_func=technique_label, key=kept("bench_techniques"))
        left, right = st.columns([2, 1])
        model = left.text_input("Model", value=llm.model or "",
                                help="A model name (OpenAI, or the server set on Settings), replay:FILE (one "
                                     "transcript for every item) or replay:DIR (one per item)", key=kept("bench_model"))
        questions = right.text_input("Questions", "1-10", help="Numbers and ranges, e.g. 1-10,15, or all",
                                     key=kept("bench_questions"))
        question_set = st.text_input("Question set", str(dqa_root() or ""), key=kept("bench_set"),
                                     **access.disabled("server_paths"),
                                     help="A DQA folder, or a set made by `python -m sims generate` (default: the "
                                          "DQA directory of Settings)")
        a, b, c, d = st.columns(4)
        on_workers = {"disabled": True, "help": "The team's workers run the items: each worker's own concurrency "
                      "(python -m core worker --concurrency N) sets how many at once; no rate is applied across "
                      "workers"} if queue.enabled() else {}
        concurrency = a.number_input("Items at once", *NUMBERS["concurrency"], 2, key=kept("bench_concurrency"),
                                     **on_workers)
        rpm = b.number_input("Requests per minute", 0, int(NUMBERS["rpm"][1]), 0, key=kept("bench_rpm"),
                             **(on_workers or {"help": "0: no limit"}))
        name = c.text_input("Results name", placeholder="the model's name", key=kept("bench_name"))
        cache = d.checkbox("Use the LLM reply cache", True, help="An identical rerun then costs nothing",
                           key=kept("bench_cache"))
        e, f = st.columns(2)
        prompt_setting = e.selectbox("Prompts", list(PROMPT_LABELS), format_func=PROMPT_LABELS.get,
                                     key=kept("bench_prompts"),
                                     help="Every technique's prompts: the project's, or nothing the papers did not "
                                          "send (docs/paper-deviations.md)")
        planner = f.selectbox("REAPER planner", list(PLANNER_LABELS), format_func=PLANNER_LABELS.get,
                              key=kept("bench_reaper_planner"), help="REAPER's runs only")
        epochs, vote, temperature, top_p, seed = sampling_inputs(llm.temperature)
        with st.expander("Limits of each run and the benchmark's budget"):
            limits = limit_inputs(session_limits(), key="bench_limits")
            budget_tokens, budget_cost, budget_calls = budget_inputs(key="bench")
        started = st.form_submit_button("Start", icon=":material/play_arrow:", type="primary",
                                        **access.disabled("benchmark_start"))
    if not started:
        return
    if not techniques:
        st.error("Choose at least one technique.")
        return
    if not model.strip():
        st.error("Enter a model: a model name (with its server on Settings), or replay:FILE or replay:DIR.")
        return
    try:
        config = BenchConfig(techniques, model.strip(), scenario=scenario, db=db, questions=questions,
                             concurrency=int(concurrency), rpm=rpm or None, name=name.strip() or None, cache=cache,
                             base_url=llm.base_url, temperature=temperature,
                             dqa_root=question_set.strip() or dqa_root(),
                             llm_settings=llm, limits=limits.validate(), budget_tokens=budget_tokens,
                             budget_cost=budget_cost, budget_calls=budget_calls, source=source,
                             prompts=prompt_setting, reaper_planner=planner,
                             epochs=int(epochs), vote=int(vote), top_p=top_p or None, seed=parse_seed(seed))
        # A question set or replay named by path is a file or folder of the server: the gate asks for an admin.
        job = jobs.start(config, who=access.current(), usual_root=dqa_root())
    except Refused as e:
        access.show_refusal(e)
    except (BenchError, LLMError, ValueError, DQAError) as e:
        st.error(md(page_words(str(e))))
    else:
        st.session_state["bench_dir"] = str(job.bench.directory)


def stop_benchmark(job: jobs.BenchJob) -> None:
    try:
        jobs.stop(job, who=access.current())
    except Refused as e:
        access.show_refusal(e)


def show_job(job: jobs.BenchJob) -> None:
    bench, progress = job.bench, job.bench.progress
    epochs = f" ({bench.epochs} epochs of each question)" if bench.epochs > 1 else ""
    st.markdown(f"**{md(bench.directory.name)}**: {len(bench.work.items)} items{epochs} of set "
                f"**{md(bench.set_name)}**, model {md_code(bench.model)}")
    for note in bench.notes:
        st.caption(md(note))
    if progress is None:
        st.progress(0.0, text="starting")
        return
    finished = progress.finished + len(progress.errors)
    accuracy = "-" if progress.accuracy is None else (f"{percent(progress.accuracy)} of n={progress.n} so far"
                                                      + (f" ({len(progress.errors)} not run, counted wrong)"
                                                         if progress.errors else ""))
    text = (f"{finished}/{progress.total} ({progress.skipped} done before) · accuracy {accuracy} · "
            f"{spent(progress)} · ETA {duration(progress.eta_s)}")
    st.progress(finished / progress.total, text=text)
    for note in progress.notes:  # what the run changed on its own, e.g. fewer LLM calls at once after timeouts
        st.warning(md(note), icon=":material/speed:")
    if job.error:
        st.error(f"stopped: {md(job.error)}")
    elif job.done:
        st.success(f"ended{': ' + md(progress.stopped) if progress.stopped else ''}; the results are on the Results tab")
    else:
        if progress.running:
            st.caption("running: " + ", ".join(md(r) for r in sorted(progress.running)))
        st.button("Stop", key=f"stop_{bench.directory}", on_click=stop_benchmark, args=(job,),
                  icon=":material/stop:", **access.disabled("benchmark_stop"),
                  help="Start no more items; those running finish and are stored")
    if progress.errors:
        with st.expander(f"{len(progress.errors)} items could not run (a rerun tries them again)"):
            st.text("\n".join(progress.errors))


def show_jobs() -> None:
    """The benchmarks running, or the last one."""
    for job in [j for j in jobs.jobs() if not j.done] or jobs.jobs()[-1:]:
        show_job(job)


def show_elsewhere(running: list[dict]) -> None:
    """The benchmarks another app, command or the queue's workers run into the team store now, as far as the store
    has them (this app's own are above)."""
    for b in running:
        finished = b["stored"] + b["not_run"]
        total = b["total"] or finished + b["waiting"] + b["in_flight"]
        who = " ".join(x for x in (f"started by {md(b['by'])}" if b["by"] else "",
                                   f"on {md(b['host'])}" if b["host"] else "") if x)
        st.markdown(f"**{md(b['name'])}**: running in another app, command or worker" + (f" ({who})" if who else ""))
        accuracy = f"{percent(100 * b['correct'] / finished)} of n={finished} so far" if finished else "-"
        queued = (f" · {b['in_flight']} in flight, {b['waiting']} waiting in the queue"
                  if b["in_flight"] or b["waiting"] else "")
        st.progress(min(1.0, finished / total) if total else 0.0,
                    text=f"{finished}/{total} items stored ({b['not_run']} not run) · accuracy {accuracy}{queued}")


def show_team_runs() -> None:
    running = jobs.elsewhere()
    if running:
        st.subheader("Running elsewhere")
        show_elsewhere(running)


def bars_with_paper(acc: pd.DataFrame) -> None:
    """Label accuracy and optimal-decision rate per technique and database, each bar with its 95% interval and
    n, beside the paper's figures (their interval from the paper's n)."""
    chart(n_above_intervals(px.bar(readable(reports.bar_data(acc)), x="technique", y="value", color="series",
                                   barmode="group", facet_col="scenario", facet_row="metric", error_y="plus",
                                   error_y_minus="minus", text="n", hover_data=["low", "high"],
                                   labels={"value": "%", "technique": "", "series": "database"}, range_y=[0, 112])))


def show_fidelity(results: list[dict]) -> None:
    """The setting of each result beside the paper's figure and setting; REAPER's plan call beside IterRAG."""
    st.caption("Each result's setting (prompts improved or paper; REAPER's planner) and accuracy (n, 95% Wilson "
               "interval) next to the paper figure it is compared with, that figure's n and setting (DQA's questions "
               "only). Every deviation and its switch: docs/paper-deviations.md.")
    table(readable(fidelity.paper_comparison(results)))
    cost = fidelity.planner_cost(results)
    if not cost.empty:
        st.subheader("REAPER's plan call beside IterRAG")
        st.caption("Per question: LLM calls, the first call's latency (REAPER's plan call), a call's mean latency and "
                   "the LLM time (cached replies count with their original latency).")
        table(readable(cost))


#: The results' tabs: a page of about 6,000 px, one part at a time.
RESULT_TABS = ["Accuracy", "Setting", "Paired", "Retrievals", "Missed data", "Re-plans", "Failures", "Regret",
               "Cost and time", "Questions"]


def show_results(results: list[dict]) -> None:
    try:
        prices = load_prices()
    except ValueError as e:
        st.warning(f"{md(e)}; costs are left out", icon=":material/warning:")
        prices = {}
    tables = reports.tables(results, prices)
    sets = ", ".join(sorted({r.get("set") or DQA_SET for r in results}))
    note, export = st.columns([4, 1], vertical_alignment="center")
    note.caption(f"Question set: **{sets}**" + ("" if sets == DQA_SET else " (not DQA's questions: the paper's "
                                                                          "figures are not shown beside them)"))
    export.download_button("Export all tables (JSON)", icon=":material/download:", file_name="benchmark-report.json",
                           mime="application/json",
                           data=json.dumps({k: json.loads(v.to_json(orient="records")) for k, v in tables.items()}))
    tabs = dict(zip(RESULT_TABS, st.tabs(RESULT_TABS)))
    with tabs["Accuracy"]:
        show_accuracy(tables)
    with tabs["Setting"]:
        show_fidelity(results)
    with tabs["Paired"]:
        show_paired(tables["paired"])
    with tabs["Retrievals"]:
        show_retrievals(tables["retrieval_split"])
    with tabs["Missed data"]:
        st.caption("Measured: pairs whose run did not see every value that decides the question by the simulator "
                   "(missed, rate over the measured pairs; mean coverage; the values missed most). Beside it, "
                   "labelled heuristic, the old keyword check: a critical column (Locating ingoing, total_power; "
                   "Building current_output, pop_demand) never named in the queries and results (Table 6). Method: "
                   "docs/evidence.md.")
        table(readable(tables["missed"]))
    with tabs["Re-plans"]:
        show_replans(tables["replans"])
    with tabs["Failures"]:
        show_failures(tables["failures"])
    with tabs["Regret"]:
        st.caption("Regret of the wrong answers: how much worse than the best decision they are.")
        table(readable(tables["regret"]))
        wrong = tables["items"].dropna(subset=["relative_regret"])
        wrong = wrong[wrong["correct"] == False]  # noqa: E712
        if not wrong.empty:
            chart(px.histogram(readable(wrong), x="relative_regret", color="technique", facet_col="scenario",
                               labels={"relative_regret": "relative regret % of the best decision"}))
    with tabs["Cost and time"]:
        st.caption(f"Per question. Prices per million tokens from {prices_path()} (edit it to change them).")
        table(readable(tables["costs"]))
    with tabs["Questions"]:
        show_items(tables["items"])


def show_accuracy(tables: dict) -> None:
    st.caption("Accuracy % per scenario and database (the paper calls a SQL database RDB, a graph database GDB) "
               "with its 95% interval (Wilson's method for a share) and n, "
               "their average, and the paper's GPT-4 figures (columns marked paper; the paper ran 200 Locating and "
               "101 Building questions; Tables 4-5). Optimal: the share of decisions with regret 0 by the simulator "
               "(a pick tied with the best counts, and an answer naming exactly the candidates tied for best). "
               "**Paper rule accuracy**: correct when the label appears anywhere in the answer, as the paper's "
               "authors counted (even \"... is not 2399\" for label 2399): compare it, not accuracy, with the paper's "
               "figures.")
    table(readable(tables["paper_layout"]))
    acc = tables["accuracy"]
    table(readable(acc[ACCURACY_COLUMNS]))
    if any(c in acc.columns for c in reports.EPOCH_COLUMNS):
        show_repeats(acc)
    notes = []
    if acc["errors"].sum():
        notes.append(f"{int(acc['errors'].sum())} items could not run: they count in n as not correct (column "
                     "errors; answered accuracy leaves them out).")
    if acc["undecided"].sum():
        notes.append(f"{int(acc['undecided'].sum())} answers commit to no single candidate and count as not correct "
                     "(listed below).")
    if acc["overridden"].sum():
        notes.append(f"{int(acc['overridden'].sum())} grades were overridden by an analyst.")
    if acc["all tied"].sum():
        notes.append(f"{int(acc['all tied'].sum())} items are questions where every candidate ties in the simulator.")
    stuck = acc.get("stuck")
    if stuck is not None and stuck.sum():
        n = int(stuck.sum())
        notes.append(f"{n} {'run was' if n == 1 else 'runs were'} stuck: the loop guard ended them after repeated "
                     "actions; each was then asked once for its final answer, graded like any other (the "
                     "Questions tab shows their status).")
    unconsulted = acc.get("unconsulted")
    if unconsulted is not None and unconsulted.sum():
        n = int(unconsulted.sum())
        notes.append(f"{n} {'answer was' if n == 1 else 'answers were'} given without consulting the database (no "
                     "query ran before the final answer).")
    for note in notes:
        st.caption(note)
    bars_with_paper(acc)
    show_votes(acc, tables["costs"])
    undecided = tables["undecided"]
    if not undecided.empty:
        st.subheader("Answers that decide nothing")
        st.caption("Graded ambiguous (several candidates, none committed to) or none (no candidate, or the "
                   "answer says it cannot decide); they count as not correct. Override a grade from the Questions "
                   "tab.")
        table(readable(undecided))


def show_repeats(acc: pd.DataFrame) -> None:
    """The figures of repeated samples (epochs): accuracy with its clustered interval and n, agreement, and the
    questions right in every, some or no epoch."""
    st.subheader("Repeated samples (epochs)")
    st.caption("n counts every sample (questions × epochs). The 95% interval treats the samples of a question as one "
               "cluster: Wilson's interval at the effective n (samples over the design effect). Agreement: the share "
               "of pairs of a question's samples that made the same decision. All / some / none right: the share of "
               "questions right in every, some, no epoch (docs/verdicts.md).")
    shown = acc.assign(accuracy=[f"{percent(r['accuracy'])} [{number(r['ci95_low'], decimals=1)}–"
                                 f"{number(r['ci95_high'], decimals=1)}]"
                                 for r in acc.to_dict("records")])
    table(readable(shown[["scenario", "db", "technique", "accuracy", "n", *reports.EPOCH_COLUMNS]]),
          column_config={"accuracy": st.column_config.TextColumn("accuracy [clustered 95% CI]")})


def show_votes(acc: pd.DataFrame, costs: pd.DataFrame) -> None:
    """The voted techniques: accuracy (n, interval) beside what the vote cost, and the cost per correct decision."""
    voted = acc[[parse_voted(t) is not None for t in acc["technique"]]]
    if voted.empty:
        return
    st.subheader("Votes over samples (self-consistency)")
    st.caption("Each voted decision is the majority of the graded decisions of N samples (epochs 1..N); undecided "
               "samples do not vote and a tie goes to the decision voted first. It costs the N samples' calls: the "
               "cost is theirs summed. The Questions tab opens a vote's samples side by side in Compare.")
    cost = costs.set_index(["scenario", "db", "technique", "model"]) if not costs.empty else None
    rows = []
    for r in voted.to_dict("records"):
        key = (r["scenario"], r["db"], r["technique"], r["model"])
        c = cost.loc[key] if cost is not None and key in cost.index else {}
        rows.append({"scenario": r["scenario"], "db": r["db"], "technique": r["technique"],
                     "accuracy": reports.accuracy_text(r), "LLM calls per question": c.get("llm calls"),
                     "cost USD": c.get("cost USD"), "cost per correct USD": c.get("cost per correct USD")})
    table(readable(pd.DataFrame(rows)))


def show_paired(pairs: pd.DataFrame) -> None:
    if pairs.empty:
        st.caption("Run two or more techniques on the same questions to compare them pairwise.")
        return
    st.caption("Each pair of techniques on the questions both ran (same database and model): both right, only "
               "A, only B, neither; the exact McNemar test on the discordant questions; A − B in points with "
               "its 95% interval. With repeated samples (epochs), the per-question rates of right samples are "
               "compared instead: the questions where A's or B's rate is higher, the exact sign-flip permutation "
               "test, and the mean difference with its t interval (docs/verdicts.md).")
    for row in pairs.to_dict("records"):
        text = f"**{md(scenario_title(row['scenario']))} · {md(row['db'])}**: {md(reports.paired_text(row))}"
        (st.success if row["significant"] else st.info)(text, icon=":material/compare_arrows:")
    shown = readable(pairs)
    for column in ("a", "b"):
        if column in shown.columns:
            shown[column] = shown[column].map(technique_label)
    table(shown)


def show_retrievals(split: pd.DataFrame) -> None:
    st.caption("SR: questions answered with one database query, MR: more; by each run's own queries (basis own) "
               "and, as the paper splits them, by IterRAG's queries on the same question and database (basis "
               "IterRAG, when the results have IterRAG; Figure 5).")
    shown = readable(split).dropna(subset=["accuracy"]).assign(n=lambda d: "n=" + d["pairs"].astype(str),
                                                                plus=lambda d: d["ci95_high"] - d["accuracy"],
                                                                minus=lambda d: d["accuracy"] - d["ci95_low"])
    chart(n_above_intervals(px.bar(shown, x="split", y="accuracy", color="technique", barmode="group",
                                   facet_col="scenario", facet_row="basis", error_y="plus", error_y_minus="minus",
                                   text="n", hover_data=["pairs", "ci95_low", "ci95_high", "paper"],
                                   labels={"accuracy": "accuracy %"}, range_y=[0, 112])))
    table(readable(split))


def show_replans(replans: pd.DataFrame) -> None:
    st.caption("Pairs and accuracy by the number of re-plans, for the techniques that re-plan (Table 7).")
    if not replans.empty:
        figure = px.bar(readable(replans), x="replans", y="pairs", color="technique", barmode="group",
                        facet_col="scenario", text="pairs",
                        hover_data=["accuracy", "ci95_low", "ci95_high", "paper pairs", "paper accuracy"])
        chart(figure.update_xaxes(type="category"))
    table(readable(replans))


def show_failures(failures: pd.DataFrame) -> None:
    failures = readable(failures)
    categories = list(PRECEDENCE) + [UNCLASSIFIED]
    long = failures.melt(id_vars=["scenario", "technique"], value_vars=[f"{c} rate" for c in categories],
                         var_name="category", value_name="rate")
    long["category"] = long["category"].str.removesuffix(" rate")
    pairs = failures.set_index(["scenario", "technique"])["pairs"]
    long["n"] = [f"n={pairs[(s, t)]}" for s, t in zip(long["scenario"], long["technique"])]
    st.caption("Failure categories (Figure 6). Per technique, n = the pairs that ran: " + ", ".join(
        f"{md(t)} {md(s)} n={n}" for (s, t), n in pairs.items()) + ". MIS is measured from the evidence coverage "
        "(docs/evidence.md); CAN is a heuristic; DEEP is not detectable from a trace (unclassified).")
    chart(px.bar(long, x="technique", y="rate", color="category", facet_col="scenario", hover_data=["n"],
                 labels={"rate": "failure rate % (of all pairs)", "technique": ""}))
    st.caption(" · ".join(f"**{c}**: {text}" for c, text in CATEGORIES.items()))
    table(failures)


def show_items(items: pd.DataFrame) -> None:
    if st.toggle("Wrong answers only", key=kept("bench_wrong_only")):
        items = items[items["correct"] == False]  # noqa: E712
    st.download_button("Export these rows (CSV)", icon=":material/download:", file_name="benchmark-items.csv",
                       mime="text/csv", data=csv_text(items))
    shown = items.copy()
    for column in set(reports.VOTE_COLUMNS) & set(shown.columns):  # a vote's lists and counts, as text
        shown[column] = [", ".join(f"{k} {n}" for k, n in v.items()) if isinstance(v, dict)
                         else ", ".join(map(str, v)) if isinstance(v, list) else v for v in shown[column]]
    picked = table(readable(shown), on_select="rerun", selection_mode="single-row", key="bench_items")
    rows = picked.selection.rows
    if rows and isinstance(items.iloc[rows[0]].get("samples"), list):  # a vote: its samples, in Compare
        row = items.iloc[rows[0]]
        st.caption(f"{md(reports.technique_name(row['technique']))}: {md(row['grade_reason'])}.")
        if st.button(f"Compare its {len(row['samples'])} samples", icon=":material/compare:"):
            st.switch_page("pages/compare.py", query_params={
                "runs": ",".join(r for r in row["samples"] if r),
                "q": f"{row['source']}/{row['scenario']}/{row['question']}"})
    elif rows:
        row = items.iloc[rows[0]]
        record = load(row["run_id"])[0] if isinstance(row.get("run_id"), str) else None
        if record is None:
            st.caption("That item has no run in this app's run store (it could not run, or ran with another home).")
        else:
            left, right = st.columns(2)
            if left.button("Open its trace in the Run view", icon=":material/play_circle:"):
                open_run(record, "pages/run.py")
            with right:
                override_form(record.id, record.settings, key=f"bench-{record.id}",
                              decision=record.outcome.decision if record.outcome else None)
            note = override_note(record.id)
            if note:
                st.caption(note)


def running_here() -> bool:
    """Whether one of this app's benchmarks runs now."""
    return any(not j.done for j in jobs.jobs())


def running_elsewhere() -> bool:
    """Whether another app, command or the queue's workers run a benchmark into the team store now."""
    return bool(jobs.elsewhere())


def going() -> bool:
    """Whether a benchmark runs now: this app's, or another's into the team store."""
    return running_here() or running_elsewhere()


def stored_so_far() -> None:
    """While a benchmark runs, on the tabs of stored results: a note that they are the results stored so far, and
    the page drawn again when it ends (as the Run tab's progress does)."""
    if going():
        live(lambda: st.caption("A benchmark is running (the Run tab follows it): these are the results stored so "
                                "far; they are drawn again when it ends."), going=going, every=POLL_S)


def show_stored_results() -> None:
    """The Results tab: one stored benchmark's tables and figures; the one just started here, else the one chosen
    (the first at first)."""
    directories = stored_benchmarks(bench_home())
    if not directories:
        st.info("No benchmark results yet: start one on the Run tab.", icon=":material/leaderboard:")
        return
    chosen = st.session_state.get("bench_dir")
    names = [str(d) for d in directories]
    if chosen in names and st.session_state.get("_bench_shown") != chosen:  # a benchmark started here: its results
        st.session_state["_bench_shown"] = st.session_state[kept("bench_results")] = chosen
    directory = st.selectbox("Results", names, index=names.index(chosen) if chosen in names else 0,
                             format_func=lambda d: Path(d).name, key=kept("bench_results"))
    results = read_all(directory)
    models = sorted({r["model"] for r in results})
    if len(models) > 1:
        keep = st.multiselect("Models", models, default=models, key=kept(f"bench_models-{Path(directory).name}"))
        results = [r for r in results if r["model"] in keep]
    if results:
        show_results(results)
    else:
        st.info("No results here yet.")


#: The page's tabs. Only the open one is drawn (a rerun on each switch): the Results tab's tables and figures took
#: most of a visit's time while the Run tab was shown. The tab chosen stays for the session (``kept``).
PAGE_TABS = ["Run", "Results", "Compare sets"]

st.title("Benchmark")
run_tab, results_tab, compare_tab = st.tabs(PAGE_TABS, key=kept("bench_tab"), on_change="rerun")
if run_tab.open:
    with run_tab:
        progress = st.container()  # above the form: a benchmark started below shows here at once (issue 40)
        start_form()
        smoke_start()
        with progress:
            live(show_jobs, going=running_here, every=POLL_S)
            live(show_team_runs, going=running_elsewhere, every=POLL_S)
if results_tab.open:
    with results_tab:
        stored_so_far()
        show_stored_results()
if compare_tab.open:
    with compare_tab:
        stored_so_far()
        stored = stored_benchmarks(bench_home())
        if stored:
            show_set_comparison(stored)
        else:
            st.info("No benchmark results yet: start one on the Run tab.", icon=":material/leaderboard:")
