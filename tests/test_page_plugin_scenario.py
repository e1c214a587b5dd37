"""The pages on a plugin scenario (the shipped depot scenario, AppTest): Scenarios lists it with its network and
tables, Run plays its scripted transcript, the Decision check ranks its sites with its own simulator and draws
the what-if on its network, History and Compare show its runs; a scenario without a simulator says it cannot
check decisions."""
from __future__ import annotations

import pytest

from core.scenarios import catalog
import core.jobs.runs as jobs
from core import scenarios
from core.scenarios import ranking
from tests.page_app import button, isolate, on_tab, open_file, open_page
from tests import page_app

REF = ("scenario", "depot", 1)


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def metrics(at) -> dict:
    return {page_app.shown(m.label): m.value for m in at.metric}


def test_scenarios_page_shows_the_depot_network_and_tables():
    at = open_file("pages/scenarios.py")
    at.segmented_control(key="scenarios_scenario").set_value("depot").run()
    assert not at.exception
    assert at.session_state["question_ref"] == REF
    assert at.segmented_control(key="scenarios_source").value == "scenario"
    assert metrics(at)["Candidate decisions"] == "6" and metrics(at)["Labelled best decision"] == "DC-ASH"
    assert at.get("plotly_chart") and any("Click a node" in c.value for c in at.caption)
    at.session_state["network-scenario/depot/1"] = {
        "selection": {"points": [{"customdata": "Ashford"}], "point_indices": [0], "box": [], "lasso": []}}
    at.run()
    captions = [c.value for c in at.caption]
    assert "**Ashford**" in [m.value for m in at.markdown] and "site: 1 row" in captions
    at.session_state["scenarios_database_tab"] = "Tables"
    at.run()
    choice = at.segmented_control(key="scenarios_table_depot")
    tables = list(choice.options)
    assert "town (16)" in tables and "road (32)" in tables
    at.segmented_control(key="scenarios_scenario").set_value("locating").run()  # back to a DQA scenario
    assert at.session_state["question_ref"][1] == "locating" and not at.exception


def test_decision_check_uses_the_scenarios_simulator():
    q = catalog.question(*REF)
    r = ranking(q, catalog.database(q))
    at = open_file("pages/decision.py", question_ref=REF)
    assert not at.exception
    assert not at.segmented_control  # one simulation mode: no mode switch
    assert metrics(at)["Best decision"] == "DC-ASH" and metrics(at)["Benchmark label"] == "DC-ASH"
    best = next(m for m in at.metric if m.label == "Best decision")
    assert best.proto.delta == f"+{r.gain('DC-ASH'):,.0f} over no decision"  # +28,807, never +2.881e+04
    at.selectbox[0].set_value("DC-BRO").run()
    shown = metrics(at)
    assert shown["Pick"] == "DC-BRO" and shown["Regret"] == f"{r.regret('DC-BRO'):.4g}"
    assert shown["weekly cost in winter, with DC-BRO (Brookmere)"] == f"{r.score_of('DC-BRO'):,.0f}"  # 28,503
    assert len(at.get("plotly_chart")) == 2  # the ranking bars and the what-if on the road network
    biggest = at.dataframe[-1].value
    assert list(biggest.columns)[:2] == ["town", "cost before"]


def test_run_compare_and_history_on_depot(home):
    at = open_page("pages/run.py", REF)
    assert "scenario_depot_1_sql_planrag.json" in at.selectbox(key="run_llm").value
    button(at, "Start").click().run()
    record = jobs.open_store().get(at.session_state["run_id"])
    assert record.status == "finished" and record.outcome.decision == "DC-ASH"
    assert metrics(at)["Decision"] == "DC-ASH" and metrics(at)["Correct"] == "correct"
    history = open_page("pages/history.py", REF)
    assert not history.exception and any("DC-ASH" in str(df.value.to_dict()) for df in history.dataframe)
    compare = open_page("pages/compare.py", REF)
    assert not compare.exception


def test_scenario_without_simulator_says_it_cannot_check(tmp_path, monkeypatch):
    folder = tmp_path / "scenarios" / "hunch"
    (folder / "data").mkdir(parents=True)
    (folder / "scenario.toml").write_text('name = "hunch"\n[data]\ncsv = "data"\n[questions]\ntemplate = "Which?"\n'
                                          '[[questions.ask]]\n[candidates]\nquery = "SELECT product FROM product"\n')
    (folder / "data" / "product.csv").write_text("product,price\ntea,3.5\ncoffee,4.0\n")
    monkeypatch.setenv("PLANRAG_SCENARIOS", str(tmp_path / "scenarios"))
    scenarios.reload()
    try:
        at = open_file("pages/decision.py", question_ref=("scenario", "hunch", 1))
        assert "cannot be checked" in at.info[0].value and not at.exception
        at = open_file("pages/scenarios.py", question_ref=("scenario", "hunch", 1))
        assert "cannot be checked" in at.warning[0].value and not at.exception
        assert "no network view" in at.info[0].value
    finally:
        scenarios.reload()


def test_benchmark_over_depot_questions_from_the_page(home):
    import core.jobs.benchmarks as bench_jobs
    from core.llm.replays import REPLAY_DIR

    at = open_page("pages/benchmark.py", None)
    at.segmented_control(key="bench_source").set_value("scenario")
    at.selectbox(key="bench_scenario").set_value("depot")
    at.text_input(key="bench_model").input(f"replay:{REPLAY_DIR}")
    at.text_input(key="bench_questions").input("1-2")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = bench_jobs.jobs()[-1]
    job.join(120)
    at.run()
    assert job.bench.progress.done == 2 and job.bench.progress.correct == 2
    acc = next(d.value for d in on_tab(at, "Results").dataframe if "optimal rate" in d.value.columns)
    assert (set(acc["scenario"]) == {"Distribution centre"} and set(acc["source"]) == {"scenario"}  # by its title
            and (acc["paper"] == "–").all())


def test_smoke_benchmark_over_the_plugin_scenarios_from_the_page(home):
    import core.jobs.benchmarks as bench_jobs

    at = open_page("pages/benchmark.py", None)
    at.segmented_control(key="bench_smoke_source").set_value("scenario")
    at.button(key="bench_smoke").click().run()
    assert not at.exception and not at.error
    job = bench_jobs.jobs()[-1]
    job.join(120)
    at.run()
    assert job.bench.directory.name == "smoke-scenario" and job.bench.progress.done == 2
    acc = next(d.value for d in on_tab(at, "Results").dataframe if "optimal rate" in d.value.columns)
    assert set(acc["scenario"]) == {"Distribution centre"} and set(acc["technique"]) == {"PlanRAG", "IterRAG"}
