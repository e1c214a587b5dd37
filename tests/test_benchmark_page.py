"""The Benchmark page (Streamlit AppTest): the paper's tables and figures from stored results, and a benchmark
started from the page, followed while it runs in the background."""
from __future__ import annotations

import base64
import json

import numpy as np

from core.auth.roles import local_admin
import core.jobs.benchmarks as jobs
from core.benchmark.smoke import smoke_config
from core.benchmark.results import ResultStore
from tests.bench_scripts import write_transcripts
from tests.page_app import ended, isolate, on_tab, open_page
from tests.test_benchmark_reports import RESULTS


def accuracy_table(at):
    return next(d.value for d in at.dataframe if "ci95_low" in d.value.columns and "optimal rate" in d.value.columns)


def items_table(at):
    return next(d.value for d in at.dataframe if d.key == "bench_items")


def numbers(array) -> np.ndarray:
    """A figure's array as plotly writes it: a list, or numpy's bytes in base64 (``{"dtype": "f8", "bdata": ...}``)."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.array(array, dtype=float)


def test_results_show_the_tables_and_figures(monkeypatch, tmp_path):
    home = isolate(monkeypatch, tmp_path)
    store = ResultStore(home / "bench" / "gpt-4o")
    for r in RESULTS:
        store.put({**r, "finished": 0.0})
    store.close()
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    assert not at.exception
    layout = at.dataframe[0].value.set_index("technique")  # techniques by their names
    assert layout.loc["PlanRAG", "locating RDB sqlite"] == 75.0 and layout.loc["PlanRAG", "locating average paper"] == 64.3
    assert len(at.get("plotly_chart")) == 5 and len(at.dataframe) == 12  # with the two tables of the settings
    acc = accuracy_table(at).set_index(["db", "technique"])
    row = acc.loc[("sqlite", "PlanRAG")]
    assert (row["n"], row["correct"], row["errors"], row["ci95_low"], row["ci95_high"]) == (4, 3, 0, 30.1, 95.4)
    # every bar has its interval, and its n above the interval's top, in the bar's place of its group (issue 40:
    # written in the bar, the interval's line crossed it)
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = [t for t in figure["data"] if t["type"] == "bar"]
    labels = [t for t in figure["data"] if t["type"] == "scatter" and t["mode"] == "text"]
    assert bars and len(labels) == len(bars) and figure["layout"]["scattermode"] == "group"
    for bar, label in zip(bars, labels):
        assert "text" not in bar
        assert (label["offsetgroup"], label["xaxis"], label["yaxis"]) == (bar["offsetgroup"], bar["xaxis"], bar["yaxis"])
        assert all(str(x).startswith("n=") for x in label["text"])
        tops = numbers(bar["y"]) + numbers(bar["error_y"]["array"])
        assert (numbers(label["y"]) > tops).all()
    assert any("not significant" in i.value for i in at.info)  # IterRAG vs PlanRAG on 4 questions
    setting = next(d.value for d in at.dataframe if "paper_setting" in d.value.columns)
    planrag = setting[(setting["technique"] == "PlanRAG") & (setting["db"] == "sqlite")].iloc[0]
    assert planrag["setting"] == "prompts improved" and planrag["paper"] == 64.5
    at.toggle[0].set_value(True).run()
    assert len(items_table(at)) == 4  # the wrong answers
    on_tab(at, "Compare sets")  # its table: PlanRAG against IterRAG by default
    assert not at.exception and len(at.dataframe) == 1 and not at.get("plotly_chart")


def test_the_run_tab_does_not_build_the_results(monkeypatch, tmp_path):
    """Only the open tab is drawn: a visit on the Run tab builds none of the results' tables and figures (most of
    the page's time), the Results tab does; the tab chosen stays when the page is left and opened again."""
    home = isolate(monkeypatch, tmp_path)
    store = ResultStore(home / "bench" / "gpt-4o")
    for r in RESULTS:
        store.put({**r, "finished": 0.0})
    store.close()
    at = open_page("pages/benchmark.py", question_ref=None)
    assert not at.exception and [b.label for b in at.get("form_submit_button")] == ["Start"]
    assert not at.dataframe and not at.get("plotly_chart") and "bench_results" not in at.session_state
    on_tab(at, "Results")
    assert not at.exception and accuracy_table(at) is not None and at.get("plotly_chart")
    assert not at.get("form_submit_button")  # the Run tab's form is not drawn meanwhile
    at.switch_page("pages/history.py").run()
    at.switch_page("pages/benchmark.py").run()
    assert at.session_state["bench_tab"] == "Results" and accuracy_table(at) is not None


def test_a_benchmark_started_from_the_page(monkeypatch, tmp_path, dqa, dqa_dir):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("DQA_DIR", str(dqa_dir))
    folder = tmp_path / "scripts"
    write_transcripts(dqa, folder, {"locating": [1, 2, 3]}, ["sqlite"], ["planrag"], lambda q: "right")
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    assert "No benchmark results yet" in at.info[0].value
    on_tab(at, "Run")
    at.selectbox(key="bench_scenario").set_value("locating")
    at.text_input(key="bench_model").input(f"replay:{folder}")
    at.text_input(key="bench_questions").input("1-3")
    at.selectbox(key="bench_prompts").set_value("paper")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = ended(jobs.jobs()[-1])
    at.run()
    assert job.bench.progress.done == 3 and job.bench.progress.correct == 3
    assert job.bench.config.prompts == "paper" and {r["prompts"] for r in job.bench.results()} == {"paper"}
    assert any("ended" in s.value for s in at.success)
    on_tab(at, "Results")  # the benchmark just started is the one shown
    assert at.selectbox(key="bench_results").value == str(job.bench.directory)
    assert at.dataframe[0].value.iloc[0]["locating RDB sqlite"] == 100.0


def test_smoke_benchmark_without_a_model(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    at = open_page("pages/benchmark.py", question_ref=None)
    at.button(key="bench_smoke").click().run()
    assert not at.exception and not at.error
    job = jobs.jobs()[-1]
    job.join(120)
    at.run()
    assert job.bench.progress.done == 4 and job.bench.progress.correct == 4
    first = at.tabs[0].children[0]  # issue 40: the progress comes first in the Run tab, not below the whole form
    assert any("ended" in s.value for s in first.success)
    acc = accuracy_table(on_tab(at, "Results"))
    assert set(acc["source"]) == {"demo"} and (acc["paper"] == "–").all() and (acc["n"] == 1).all()


def test_an_analyst_overrides_a_grade_from_the_benchmark_view(monkeypatch, tmp_path):
    from core.analysis.grading import make_override
    from core.store.overrides import OverrideStore

    home = isolate(monkeypatch, tmp_path)
    store = ResultStore(home / "bench" / "gpt-4o")
    for r in RESULTS:
        store.put({**r, "finished": 0.0})
    store.close()
    OverrideStore(home).put("sqliteiterrag3", make_override("krakow", "krakow", by="ana"))
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    acc = accuracy_table(at).set_index(["db", "technique"])
    assert acc.loc[("sqlite", "IterRAG"), "correct"] == 3 and acc.loc[("sqlite", "IterRAG"), "overridden"] == 1
    assert any("1 grades were overridden" in c.value for c in at.caption)


def test_results_of_a_smoke_benchmark_over_plugin_scenarios(monkeypatch, tmp_path):
    """Issue 28: the setting table met pd.NA (no paper figure for a plugin scenario) and the page crashed for every
    session, every results tab left empty."""
    isolate(monkeypatch, tmp_path)
    job = jobs.start(smoke_config(source="scenario", db="sqlite"), who=local_admin())
    job.join(300)
    assert job.done and not job.error
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    assert not at.exception
    setting = next(d.value for d in at.dataframe if "paper_setting" in d.value.columns)
    assert set(setting["set"]) == {"scenario"} and (setting["paper"] == "–").all()
    items = items_table(at)  # the Questions tab, drawn
    assert len(items) == job.bench.progress.done > 0


def test_results_and_compare_sets_read_the_team_store_from_any_app(monkeypatch, tmp_path, team_database):
    """A benchmark run by one app (or a worker) is in the team store: another app, with a home of its own and no
    local results file, lists it on Results and Compare sets, as one just begun (its parameters stored, no result
    yet); a results file left in its own home from before the team store is not listed."""
    from tests.conftest import empty_team_store

    empty_team_store(team_database)
    monkeypatch.setenv("PLANRAG_DATABASE_URL", team_database)
    store = ResultStore(tmp_path / "other-app" / "bench" / "gpt-4o")
    for r in RESULTS:
        store.put({**r, "finished": 0.0})
    store.close()
    begun = ResultStore(tmp_path / "other-app" / "bench" / "llama")
    begun.check_params({"temperature": 0.0})
    begun.close()
    home = isolate(monkeypatch, tmp_path / "this-app")
    monkeypatch.delenv("PLANRAG_DATABASE_URL")
    local = ResultStore(home / "bench" / "local-only")
    local.put({**RESULTS[0], "finished": 0.0})
    local.close()
    monkeypatch.setenv("PLANRAG_DATABASE_URL", team_database)
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    assert not at.exception
    assert not any("No benchmark results yet" in i.value for i in at.info)
    assert next(s for s in at.selectbox if s.label == "Results").options == ["gpt-4o", "llama"]
    assert accuracy_table(at).set_index(["db", "technique"]).loc[("sqlite", "PlanRAG"), "n"] == 4
    on_tab(at, "Compare sets")
    assert not at.exception and not any("No benchmark results yet" in i.value for i in at.info)
    assert [s.options for s in at.selectbox if s.label.endswith(": result set")] == [["gpt-4o", "llama"]] * 2


def _progress_texts(at) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


def test_a_benchmark_another_process_runs_is_followed_live_from_this_app(monkeypatch, tmp_path, team_database):
    """Two apps on one team store: a ``core bench`` process (as another app's benchmark) runs into it, in its own
    threads; this app, with a home of its own, shows it running with its progress from the store while it runs, and
    its results once it ends."""
    import os
    import subprocess
    import sys

    from tests.conftest import empty_team_store
    from tests.page_app import APP
    from tests.test_jobs_queue import ACT, FINAL
    from tests.turn_stub import TurnStub

    empty_team_store(team_database)
    monkeypatch.setenv("PLANRAG_JOBS", "threads")  # each app runs its benchmarks in its own threads
    isolate(monkeypatch, tmp_path / "this-app")
    monkeypatch.setenv("PLANRAG_DATABASE_URL", team_database)
    stub = TurnStub([ACT, FINAL], hold_at=1)  # every item waits at its second model call until released
    other = subprocess.Popen(
        [sys.executable, "-m", "core", "bench", "--source", "demo", "--technique", "iterrag", "--llm", "m",
         "--base-url", stub.url, "--name", "elsewhere", "--no-cache", "--concurrency", "1"], cwd=APP.parent,
        env={**os.environ, "PLANRAG_HOME": str(tmp_path / "other-app")}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        if not stub.held.wait(120):
            other.kill()
            raise AssertionError(other.stdout.read())
        at = open_page("pages/benchmark.py", question_ref=None)
        assert not at.exception
        assert any(m.value.startswith("**elsewhere**: running in another app, command or worker")
                   for m in at.markdown), [m.value for m in at.markdown]
        assert "0/6 items stored (0 not run) · accuracy -" in _progress_texts(at)
        running = "A benchmark is running (the Run tab follows it)"  # the results tabs say so, and follow its end
        assert any(c.value.startswith(running) for c in on_tab(at, "Results").caption)
        on_tab(at, "Run")
        stub.release.set()
        assert other.wait(120) == 0, other.stdout.read()
        at.run()
        assert not at.exception and not any("running in another app" in m.value for m in at.markdown)
        on_tab(at, "Results")
        assert not any(c.value.startswith(running) for c in at.caption)
        assert not any("No benchmark results yet" in i.value for i in at.info)
        assert at.selectbox(key="bench_results").options == ["elsewhere"]
    finally:
        if other.poll() is None:
            other.kill()
        stub.close()


def test_benchmark_items_waiting_for_the_teams_workers_are_shown_from_any_app(monkeypatch, tmp_path, team_database):
    """With the job queue, a benchmark another app queued is shown with its items waiting for a worker."""
    from core.benchmark.config import BenchConfig
    from core.benchmark.runner import Bench
    from core.jobs import bench_items, queue
    from tests.conftest import empty_team_store

    empty_team_store(team_database)
    isolate(monkeypatch, tmp_path / "this-app")
    monkeypatch.setenv("PLANRAG_DATABASE_URL", team_database)
    monkeypatch.setenv("PLANRAG_JOBS", "queue")
    try:
        from core.auth.gate import asked_by

        other = Bench(BenchConfig(["iterrag"], "m", source="demo", name="queued", cache=False,
                                  base_url="http://127.0.0.1:1", asked=asked_by(local_admin("ann"), "benchmark_start"),
                                  home=str(tmp_path / "other-app"), started_by="ann"))
        other.store.mark_running(len(other.work.items), "ann")
        queue.enqueue_items(bench_items.config_dict(other), [i.key for i in other.pending], "queued")
        at = open_page("pages/benchmark.py", question_ref=None)
        assert not at.exception
        assert any(m.value.startswith("**queued**: running in another app, command or worker (started by "
                                      "ann on ") for m in at.markdown), [m.value for m in at.markdown]
        assert "0/6 items stored (0 not run) · accuracy - · 0 in flight, 6 waiting in the queue" in _progress_texts(at)
    finally:
        queue.close()
