"""The Benchmark page (Streamlit AppTest): the paper's tables and figures from stored results, and a benchmark
started from the page, followed while it runs in the background."""
from __future__ import annotations

import time

from core.benchmark import jobs
from core.benchmark.results import ResultStore
from tests.bench_scripts import write_transcripts
from tests.page_app import isolate, open_page
from tests.test_benchmark_reports import RESULTS


def test_results_show_the_tables_and_figures(monkeypatch, tmp_path):
    home = isolate(monkeypatch, tmp_path)
    store = ResultStore(home / "bench" / "gpt-4o")
    for r in RESULTS:
        store.put({**r, "finished": 0.0})
    store.close()
    at = open_page("pages/benchmark.py", question_ref=None)
    assert not at.exception
    layout = at.dataframe[0].value.set_index("technique")
    assert layout.loc["planrag", "locating RDB sqlite"] == 75.0 and layout.loc["planrag", "locating average paper"] == 64.3
    assert len(at.get("plotly_chart")) == 5 and len(at.dataframe) == 8
    at.toggle[0].set_value(True).run()
    assert len(at.dataframe[-1].value) == 4  # the wrong answers


def test_a_benchmark_started_from_the_page(monkeypatch, tmp_path, dqa, dqa_dir):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("DQA_DIR", str(dqa_dir))
    folder = tmp_path / "scripts"
    write_transcripts(dqa, folder, {"locating": [1, 2, 3]}, ["sqlite"], ["planrag"], lambda q: "right")
    at = open_page("pages/benchmark.py", question_ref=None)
    assert "No benchmark results yet" in at.info[0].value
    at.selectbox(key="bench_scenario").set_value("locating")
    at.text_input(key="bench_model").input(f"replay:{folder}")
    at.text_input(key="bench_questions").input("1-3")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = jobs.jobs()[-1]
    deadline = time.time() + 60
    while not job.done and time.time() < deadline:
        time.sleep(0.1)
    at.run()
    assert job.bench.progress.done == 3 and job.bench.progress.correct == 3
    assert any("ended" in s.value for s in at.success)
    assert at.dataframe[0].value.iloc[0]["locating RDB sqlite"] == 100.0
