"""ReAct without a plan (core/techniques/react_noplan), the technique added as one folder and nothing else: its
scripted transcript through the runtime, its settings, the command line (``core run``, ``core bench``) and every
page that lists techniques (Run, Compare, Benchmark), all from scripted transcripts."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import core.jobs.benchmarks as bench_jobs
import core.jobs.runs as run_jobs
from core.benchmark.results import read_results
from core.model.run_settings import Review, RunSettings
from core.model.technique import TECHNIQUES
from tests.page_app import button, ended, isolate, open_page
from tests.test_agents_runtime import FakeBackend, make_runtime, replay, settings

ROOT = Path(__file__).resolve().parent.parent
REACT = "react-noplan"
#: ReAct's replies to demo Building question 1: the shipped IterRAG transcript's, the same Thought, Action,
#: Observation form.
SHIPPED = ROOT / "assets" / "replays" / "demo_building_1_sql_iterrag.json"


@pytest.fixture
def transcripts(tmp_path, monkeypatch) -> Path:
    """A replay folder (PLANRAG_REPLAYS) with ReAct's and IterRAG's transcripts of demo Building question 1 on
    SQL."""
    folder = tmp_path / "replays"
    folder.mkdir()
    shutil.copy(SHIPPED, folder / f"demo_building_1_sql_{REACT}.json")
    shutil.copy(SHIPPED, folder / SHIPPED.name)  # IterRAG's own, to run beside it
    return folder


def test_react_runs_thought_action_observation_with_no_plan(tmp_path):
    backend = FakeBackend()
    runtime = make_runtime(tmp_path / "home", backend)
    replies = ["Thought: I need each node's value.\nAction: Relational DB\n"
               "Action input: SELECT trade_node, local_value FROM trade_node",
               "Thought: I now know the answer.\nFinal answer: krakow"]
    result = runtime.start(settings(replay(tmp_path, replies), REACT, hitl="approve-every-plan"))
    record = runtime.store.get(result.run_id)
    assert result.status == "finished" and record.outcome.final_answer == "krakow"
    assert [e.kind for e in record.events] == ["thought", "action", "observation", "thought", "final"]
    assert record.settings.technique == REACT and record.settings.hitl == "approve-every-plan"
    assert backend.queries == ["SELECT trade_node, local_value FROM trade_node"]
    system = runtime.transcript(result.run_id)[0]["content"]
    assert system.startswith("Solve a decision question with interleaving Thought, Action, Observation steps.")
    assert "Plan" not in system and "Relational DB" in system  # no planning step; the run's database tool
    runtime.close()


def test_react_is_told_the_format_when_it_strays(tmp_path):
    runtime = make_runtime(tmp_path / "home")
    result = runtime.start(settings(replay(tmp_path, [
        "I would look at the nodes.",
        "Thought: I need the nodes.\nAction: Relational DB\nAction input: SELECT trade_node FROM trade_node",
        "Thought: I now know the answer.\nFinal answer: krakow"]), REACT))
    events = runtime.store.get(result.run_id).events
    correction = next(e for e in events if e.kind == "observation")
    assert correction.error_kind == "format" and "Thought, Action and Action input" in correction.text
    assert result.status == "finished"
    runtime.close()


@pytest.mark.parametrize("changes, message", [
    ({"prompts": "paper"}, "ReAct has no paper prompt setting"),
    ({"initial_plan": ["look"]}, "ReAct starts from no plan"),
    ({"reaper_planner": "zero-shot"}, "ReAct has no REAPER planner")])
def test_settings_react_does_not_have_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        RunSettings("locating", 1, "sqlite", REACT, "x", **changes).validate()


def test_react_is_registered_from_its_folder():
    tech = TECHNIQUES[REACT]
    assert (tech.label, tech.folder, tech.plans, tech.prompt_settings) == ("ReAct", "react_noplan", False,
                                                                          ("improved",))


def test_core_run_and_core_bench_run_react(tmp_path, monkeypatch, capsys, transcripts):
    import core.cli.main as cli
    from core.config import settings as core_settings

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("DQA_DIR", str(tmp_path / "no-dqa"))
    spec = f"replay:{transcripts / f'demo_building_1_sql_{REACT}.json'}"
    code = cli.main(["run", "--source", "demo", "--scenario", "building", "--question", "1", "--db", "sqlite",
                     "--technique", REACT, "--llm", spec, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and (report["decision"], report["correct"]) == (107, True)

    code = cli.main(["bench", "--source", "demo", "--scenario", "building", "--questions", "1", "--db", "sqlite",
                     "--technique", REACT, "--technique", "iterrag", "--llm", f"replay:{transcripts}",
                     "--out", str(tmp_path / "bench"), "--no-cache"])
    out = capsys.readouterr().out
    assert code == 0, out
    results = {r["technique"]: r for r in read_results(tmp_path / "bench")}
    assert set(results) == {REACT, "iterrag"} and bool(results[REACT]["correct"]) and "ReAct" in out


def test_the_run_page_runs_react(monkeypatch, tmp_path, transcripts):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("PLANRAG_REPLAYS", str(transcripts))
    at = open_page("pages/run.py", ("demo", "building", 1))
    assert "ReAct" in at.selectbox(key="run_technique").options
    at.selectbox(key="run_technique").set_value(REACT).run()
    assert at.selectbox(key="run_llm").value.endswith(f"demo_building_1_sql_{REACT}.json")
    button(at, "Start").click().run()
    record = run_jobs.open_store().get(at.session_state["run_id"])
    assert record.status == "finished" and record.settings.technique == REACT and not at.exception
    assert any(m.value.startswith("#### ReAct") for m in at.markdown)


def test_the_compare_page_runs_react_beside_iterrag(monkeypatch, tmp_path, transcripts):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("PLANRAG_REPLAYS", str(transcripts))
    at = open_page("pages/compare.py", ("demo", "building", 1))
    assert "ReAct" in at.button_group(key="compare_techniques").options
    at.button_group(key="compare_techniques").set_value(["iterrag", REACT]).run()
    button(at, "Run side by side").click().run()
    assert not at.exception
    table = at.dataframe[0].value.set_index("technique")
    assert list(table.index) == ["IterRAG", "ReAct"] and set(table["status"]) == {"finished"}
    assert table.loc["ReAct", "plan steps"] == 0 and table.loc["ReAct", "correct"]


def test_the_benchmark_page_runs_react(monkeypatch, tmp_path, transcripts):
    isolate(monkeypatch, tmp_path)
    at = open_page("pages/benchmark.py", question_ref=None)
    assert "ReAct" in at.multiselect(key="bench_techniques").options
    at.segmented_control(key="bench_source").set_value("demo")
    at.selectbox(key="bench_scenario").set_value("building")
    at.multiselect(key="bench_techniques").set_value([REACT])
    at.text_input(key="bench_model").input(f"replay:{transcripts}")
    at.text_input(key="bench_questions").input("1")
    at.get("form_submit_button")[0].click().run()
    assert not at.exception and not at.error
    job = ended(bench_jobs.jobs()[-1])
    assert job.bench.progress.done == 1 and job.bench.progress.correct == 1
    assert {r["technique"] for r in job.bench.results()} == {REACT}


def test_a_react_run_resumes_from_its_checkpoint_in_a_new_runtime(tmp_path):
    home = tmp_path / "home"
    runtime = make_runtime(home)
    spec = replay(tmp_path, ["Thought: I need each node's value.\nAction: Relational DB\n"
                             "Action input: SELECT trade_node FROM trade_node",
                             "Thought: I now know the answer.\nFinal answer: krakow"])
    result = runtime.start(settings(spec, REACT, review_queries=True))
    assert result.status == "paused" and result.pause.kind == "query"
    runtime.close()
    again = make_runtime(home)  # another process after a restart: the run's technique resolved again from its record
    done = again.resume(result.run_id, Review.approve())
    assert done.status == "finished"
    again.close()
