"""Limits and budgets on the pages (Streamlit AppTest, issue 19): set on Settings and used by the Run page's runs,
with the live counter of LLM calls, tokens and cost; a benchmark budget set on the Benchmark page stopping the
benchmark and saying which cap it hit."""
from __future__ import annotations


import core.jobs.runs as jobs
from core.model.run_settings import Limits
import core.jobs.benchmarks as bench_jobs
from tests.bench_scripts import write_transcripts
from tests.page_app import button, ended, isolate, open_file, open_page


def test_settings_keep_the_limits_in_the_session():
    at = open_file("pages/settings.py")
    at.number_input(key="limits_calls").set_value(12)
    at.number_input(key="limits_cost").set_value(0.5)
    at.number_input(key="limits_repeats").set_value(2)
    at.number_input(key="limits_context").set_value(8192)
    at.button(key="limits_use").click().run()
    limits = at.session_state["limits"]
    assert (limits.max_llm_calls, limits.max_cost_usd, limits.max_repeats, limits.context_tokens) == (12, 0.5, 2, 8192)
    at.number_input(key="limits_context").set_value(100)
    at.button(key="limits_use").click().run()
    assert "must be a whole number from 256 to" in at.error[0].value
    assert at.session_state["limits"].context_tokens == 8192  # the bad value is not used


def test_a_run_uses_the_session_limits_and_shows_its_counter(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    at = open_page("pages/run.py")
    at.session_state["limits"] = Limits(max_llm_calls=2)
    at.selectbox(key="run_technique").set_value("iterrag").run()
    button(at, "Start").click().run()
    record = jobs.open_store().get(at.session_state["run_id"])
    assert record.settings.limits.max_llm_calls == 2 and record.outcome.limit == "llm_calls"
    assert record.outcome.llm_calls == 2 and not at.exception
    counter = next(c.value for c in at.caption if "toll" in c.value)
    tokens = record.outcome.tokens.total
    assert f"2 LLM calls · ≈{tokens:,} tokens · no cost (recorded replies, or cached)" in counter  # a replay costs nothing


def test_a_benchmark_budget_set_on_the_page_stops_it(monkeypatch, tmp_path, dqa, dqa_dir):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("DQA_DIR", str(dqa_dir))
    folder = tmp_path / "scripts"
    write_transcripts(dqa, folder, {"locating": [1, 2, 3]}, ["sqlite"], ["iterrag"], lambda q: "right")
    at = open_page("pages/benchmark.py", question_ref=None)
    at.selectbox(key="bench_scenario").set_value("locating")
    at.multiselect(key="bench_techniques").set_value(["iterrag"])
    at.text_input(key="bench_model").input(f"replay:{folder}")
    at.text_input(key="bench_questions").input("1-3")
    at.number_input(key="bench_concurrency").set_value(1)
    at.checkbox(key="bench_cache").uncheck()
    at.number_input(key="bench_budget_tokens").set_value(1)
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = ended(bench_jobs.jobs()[-1])
    at.run()
    assert job.bench.progress.stopped.startswith("benchmark token budget reached")
    assert any("benchmark token budget reached" in s.value for s in at.success)
    progress = at.get("progress")[0].proto.text  # the live counter: tokens and cost spent
    assert f"{job.bench.progress.tokens:,} tokens, $0.0000" in progress
    at.number_input(key="bench_budget_tokens").set_value(0)  # no token cap; a call cap instead
    at.number_input(key="bench_budget_calls").set_value(2)
    at.text_input(key="bench_name").input("calls")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = ended(bench_jobs.jobs()[-1], timeout=120)
    assert job.bench.config.budget_calls == 2 and job.bench.open_budget(job.bench.budget_id).calls == 2
    assert job.bench.progress.stopped.startswith("benchmark call budget reached: 2 LLM calls made of the 2 allowed")


def test_a_stuck_run_says_so_on_the_run_page(monkeypatch, tmp_path):
    from core.agents.runtime import AgentRuntime
    from core.model.run_settings import RunSettings
    from tests.conftest import ROOT

    home = isolate(monkeypatch, tmp_path)
    runtime = AgentRuntime(home)
    loop = ROOT / "tests" / "transcripts" / "guards" / "locating_sql_iterrag_loop.json"
    result = runtime.start(RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{loop}", source="demo"))
    runtime.close()
    assert result.status == "stuck"
    at = open_page("pages/run.py")
    at.session_state["run_id"] = result.run_id
    at.run()
    assert not at.exception
    assert any(e.value.startswith("The run was stuck: the agent repeated itself 3 times") for e in at.error)
    assert sum("you already took this action" in w.value for w in at.warning) == 2
    # asked for its final answer, it gave none: graded by the one rule of a run with no answer (issue 29)
    assert [m.value for m in at.metric if m.label == "Correct"] == ["not answered"]
    assert result.outcome.correct is None and runtime.store.list(correct=False) == []


def test_the_benchmark_results_count_stuck_runs_apart(monkeypatch, tmp_path):
    from core.benchmark.results import ResultStore
    from tests.test_benchmark_reports import RESULTS

    home = isolate(monkeypatch, tmp_path)
    store = ResultStore(home / "bench" / "gpt-4o")
    for i, r in enumerate(RESULTS):
        store.put({**r, "finished": 0.0, **({"status": "stuck", "correct": False} if i == 0 else {})})
    store.close()
    at = open_page("pages/benchmark.py", question_ref=None, bench_tab="Results")
    assert not at.exception
    assert any(c.value.startswith("1 run was stuck") for c in at.caption)
