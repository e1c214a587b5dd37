"""AutoPlan: a 2-iteration training on two real DQA questions (SQLite) with scripted replies
(tests/transcripts/autoplan) writing plans v1 and v2 with their reflections; the train/test split; the
``autoplan`` technique starting from the learned plan; the command line; the plan store."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

import pytest

from core.config import settings as core_settings
from core.agents.runtime import AgentRuntime
from core.model.run_settings import RunSettings
import core.cli.autoplan as command
from core.techniques.autoplan.prompts import parse_reflection
from core.store.plans import LearnedPlan, PlanStore, TrainingQuestionError, diff_steps
from core.techniques.autoplan.train import AutoPlanError, TrainSettings, train
from tests.test_agents_dqa import backend

TRANSCRIPTS = Path(__file__).parent / "transcripts"
TRAIN = f"replay:{TRANSCRIPTS / 'autoplan' / 'locating_sql_train.json'}"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, dqa_dir):
    """A home where `autoplan train` learned v1 and v2 of the Locating plan on questions 2 and 3 (one-call reflection
    and the rich reward, the transcript's form); its output."""
    from core.cli.main import main

    home, out = tmp_path_factory.mktemp("autoplan_home"), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(core_settings, "DATA_HOME", home)
        code = main(["autoplan", "train", "--scenario", "locating", "--db", backend("sql"), "--llm", TRAIN,
                     "--train", "2-3", "--batch", "2", "--iterations", "2", "--reflection", "one-call",
                     "--reward", "rich"])
    lines = out.getvalue().splitlines()
    assert code == 0, lines
    return home, lines


def test_training_saves_a_version_per_iteration(trained):
    home, lines = trained
    assert lines[:3] == ["iteration 1: question 2: wrong (decision saxony)",
                         "iteration 1: question 3: correct (decision rheinland)",
                         "iteration 1: accuracy 1/2; saved locating plan v1"]
    assert lines[-1].startswith("saved locating plan v1, v2")
    store = PlanStore(home / "plans")
    v1, v2 = store.all("locating")
    assert sorted(p.name for p in (home / "plans" / "locating").iterdir()) == ["v1.json", "v2.json"]
    assert (v1.version, v1.parent, v1.iteration, v2.version, v2.parent, v2.iteration) == (1, None, 1, 2, 1, 2)
    assert v1.train == v2.train == [2, 3] and v1.source == "dqa" and v1.training == v2.training
    assert v1.steps[0] == "Find the home node of the country and the trade nodes flowing into it" and len(v1.steps) == 4
    assert v2.steps[2].startswith("When inland and coastal nodes compete")
    assert [(r["question"], r["correct"], r["decision"]) for r in v1.reflections] == [
        (2, False, "saxony"), (3, True, "rheinland")]
    first = v1.reflections[0]
    assert first["summary"].startswith("1. The agent listed") and "inland merchant bonus" in first["flaws"]
    assert first["revision"].startswith("Step 2 should compare") and first["placement"]["rank"] == 2
    assert [h["accuracy"] for h in v2.history] == [0.5, 1.0] and v1.history == v2.history[:1]
    assert [h["plan_version"] for h in v2.history] == [None, 1] and v2.history[1]["llm_calls"] == 7
    assert v2.trained_with == {"technique": "planrag", "db": "sqlite", "llm": TRAIN, "batch_size": 2,
                               "iterations": 2, "seed": 0, "temperature": 1.0, "top_p": 0.9,
                               "reflection": "one-call", "reward": "rich", "prompts": "improved"}


def test_iteration_two_ran_with_the_first_plan(trained):
    home, _ = trained
    v1 = PlanStore(home / "plans").load("locating", 1)
    runtime = AgentRuntime(home)
    try:
        for run_id in PlanStore(home / "plans").load("locating").history[1]["runs"]:
            assert runtime.store.get(run_id).settings.initial_plan == v1.steps
            system = runtime.transcript(run_id)[0]["content"]
            assert "A plan for questions of this kind:\nStep 1: Find the home node of the country" in system
            assert "Start from this plan" in system
        first_runs = v1.history[0]["runs"]
        assert "A plan for questions" not in runtime.transcript(first_runs[0])[0]["content"]
    finally:
        runtime.close()


def test_autoplan_starts_from_the_learned_plan_never_on_training_questions(trained):
    home, _ = trained
    runtime = AgentRuntime(home)
    replay = f"replay:{TRANSCRIPTS / 'locating_sql_planrag.json'}"
    try:
        result = runtime.start(RunSettings("locating", 1, backend("sql"), "autoplan", replay))
        assert result.status == "finished" and result.outcome.correct is True
        stored = runtime.store.get(result.run_id).settings
        v2 = runtime.plans.load("locating", 2)
        assert stored.plan_version == 2 and stored.initial_plan == v2.steps
        assert "Step 3: When inland and coastal nodes compete" in runtime.transcript(result.run_id)[0]["content"]
        chosen = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", replay, plan_version=1))
        assert "Step 3: Get the country's development" in runtime.transcript(chosen.run_id)[0]["content"]
        with pytest.raises(TrainingQuestionError, match="dqa locating question 2 is a training question of learned "
                                                        r"plan v2 \(trained on questions 2-3\)"):
            runtime.start(RunSettings("locating", 2, "sqlite", "autoplan", replay))
        with pytest.raises(TrainingQuestionError, match="question 3 is a training question of learned plan v1"):
            runtime.start(RunSettings("locating", 3, "sqlite", "iterrag", replay, plan_version=1))
        assert runtime.plans.resolve(stored.validate()) == stored  # a stored run starts again from the same plan
        with pytest.raises(ValueError, match="give an initial plan or a learned plan, not both"):
            runtime.start(RunSettings("locating", 1, "sqlite", "autoplan", replay, initial_plan=["my own step"]))
        with pytest.raises(ValueError, match="no learned plan v9 for locating; there are v1-2"):
            runtime.start(RunSettings("locating", 1, "sqlite", "autoplan", replay, plan_version=9))
        with pytest.raises(ValueError, match="no learned plan for building yet: train one with"):
            runtime.start(RunSettings("building", 1, "sqlite", "autoplan", replay))
    finally:
        runtime.close()


def test_show_prints_the_plan_and_its_accuracy(trained, monkeypatch, capsys):
    home, _ = trained
    monkeypatch.setattr(core_settings, "DATA_HOME", home)
    assert command.cmd_show(command_args(scenario="locating", version=1, json=False)) == 0
    text = capsys.readouterr().out
    assert text.startswith("locating plan v1 (iteration 1 of training") and "revises the empty plan" in text
    assert "trained on dqa questions 2-3 with planrag on sqlite" in text and "  1: 1/2 with the empty plan" in text
    assert text.rstrip().endswith("versions: v1, v2")
    assert command.cmd_show(command_args(scenario="locating", version=None, json=True)) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 2 and shown["versions"] == [1, 2] and len(shown["reflections"]) == 2
    assert command.cmd_show(command_args(scenario="building", version=None, json=False)) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no learned plan for building yet")  # a plain error line, as every command


def command_args(**values):
    return argparse.Namespace(**values)


def test_an_update_without_a_plan_stops_the_training(tmp_path, dqa_dir):
    bad = f"replay:{TRANSCRIPTS / 'autoplan' / 'locating_sql_bad_update.json'}"
    settings = TrainSettings("locating", backend("sql"), bad, [2], batch_size=1, iterations=2, reflection="one-call")
    with pytest.raises(AutoPlanError, match=r"iteration 1 wrote no 'Plan: \[Step 1: ...\]'; its reply began: 'I "
                                            "would keep"):
        train(settings, tmp_path)
    assert PlanStore(tmp_path / "plans").versions("locating") == []


@pytest.mark.parametrize("change,message", [
    ({"train": []}, "at least one"), ({"train": [2, 2]}, "listed twice"),
    ({"batch_size": 3}, "batch size must be 1 to 2"), ({"iterations": 0}, "iterations must be 1 or more"),
    ({"technique": "reaper"}, "collects experience with"), ({"db": "oracle"}, "unknown database")])
def test_training_settings_are_checked(change, message):
    settings = TrainSettings("locating", "sqlite", "replay:x.json", [2, 3], batch_size=2)
    for key, value in change.items():
        setattr(settings, key, value)
    with pytest.raises(ValueError, match=message):
        settings.validate()


def test_the_command_line_checks_the_training_questions(tmp_path, dqa_dir, monkeypatch, capsys):
    from core.cli.main import main

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path)
    base = ["autoplan", "train", "--scenario", "locating", "--db", "sqlite", "--llm", TRAIN]
    assert main([*base, "--train", "1-x"]) == 1
    assert "--train: '1-x' is not a question number or a range like 1-10" in capsys.readouterr().err
    assert main([*base, "--train", "199-201"]) == 1
    assert "there is no dqa locating question 201 (there are questions 1-200)" in capsys.readouterr().err
    assert command.parse_numbers("5, 1-3,2", "--train") == [1, 2, 3, 5]


def test_store_versions_and_diffs(tmp_path):
    store = PlanStore(tmp_path)
    plan = LearnedPlan("building", ["a", "b"], "demo", [1], 1, None, "t", {}, [], "", [])
    assert [store.save(plan).version, store.save(plan).version] == [1, 2]
    assert store.versions("building") == [1, 2] and store.load("building").version == 2
    (tmp_path / "building" / "v3.json").write_text("{not json")
    with pytest.raises(ValueError, match="v3.json cannot be read"):
        store.load("building")
    with pytest.raises(ValueError, match="unknown scenario"):
        store.versions("../etc")
    assert diff_steps(["a", "b", "c"], ["a", "c", "d"]) == [("same", "a"), ("removed", "b"), ("same", "c"),
                                                            ("added", "d")]


def test_reflections_are_split_into_their_parts():
    parts = parse_reflection("**Summary:** did x\nthen y\n- Flaw: step 2\nRevision: fix step 2")
    assert parts == {"summary": "did x\nthen y", "flaws": "step 2", "revision": "fix step 2"}
    assert parse_reflection("no parts") == {"summary": "", "flaws": "", "revision": ""}
