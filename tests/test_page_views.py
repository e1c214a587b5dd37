"""Views that disagree with themselves (Streamlit AppTest), issue 40: Run N times is the primary action when Samples
asks for more than one; "Use v1 in Run" keeps the analyst's question, or says why it cannot; Hide answers is one
switch on every page; Compare's Step by step says when there is nothing to line up."""
from __future__ import annotations

import pytest

import core.jobs.runs as jobs
from core.techniques.autoplan.train import TrainSettings, train
from core.model.run_settings import RunSettings
from tests.page_app import button, isolate, open_page, shown
from tests.test_autoplan_paper import TRAINING, replay
from tests.test_page_state import demo_run
from core.model.outcome import RunOutcome


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def test_with_samples_at_5_run_5_times_is_the_primary_button(home):
    """Issue 40: with Samples = 5, the primary Start still ran one sample beside "Run 5 times"."""
    at = open_page("pages/run.py")
    assert button(at, "Start").proto.type == "primary"
    at.number_input(key="run_samples_n").set_value(5).run()
    start, many = button(at, "Start"), button(at, "Run 5 times")
    assert (start.proto.type, many.proto.type) == ("secondary", "primary")
    assert "Run 5 times (below) runs all 5 samples" in start.help


@pytest.mark.parametrize("mine, opened, said", [
    (("demo", "locating", 3), ("demo", "locating", 3), None),
    (("demo", "locating", 1), ("demo", "locating", 2), "your question demo/locating/1 is one v1 was trained on"),
])
def test_use_a_learned_plan_in_run_keeps_the_question_or_says_why_not(home, tmp_path, mine, opened, said):
    """Issue 40: "Use v2 in Run" switched the question from q2 to q1 without a word."""
    train(TrainSettings("locating", "sqlite", replay(tmp_path, TRAINING), [1], batch_size=1, iterations=1,
                        source="demo"), home)
    at = open_page("pages/plans.py", question_ref=mine)
    where = "/".join(map(str, opened))
    assert any(shown(c.value).startswith(f"On question {where}") for c in at.caption)
    button(at, "Use v1 in Run").click().run()
    assert at.title[0].value == "Run" and at.session_state["question_ref"] == opened
    notes = [i.value for i in at.info if "Learned plan v1 opens on" in i.value]
    assert (notes == []) if said is None else (said in shown(notes[0]))


def test_hide_answers_is_one_switch_for_the_session_on_every_page(home):
    """Issue 40: "Hide answers" hid labels only on Scenarios; Run, Decision check, Compare and History still showed
    correct, rank and label."""
    run_id = demo_run()
    at = open_page("pages/history.py")
    at.sidebar.toggle(key="hide_answers_switch").set_value(True).run()  # the Scenarios page's test: its own file
    at.session_state["run_id"] = run_id
    at.switch_page("pages/run.py").run()
    assert at.sidebar.toggle(key="hide_answers_switch").value
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Correct"], metrics["Rank"]) == ("hidden", "hidden")
    at.switch_page("pages/history.py").run()
    order = list(at.dataframe[0].proto.column_order)
    assert "correct" not in order and "rank" not in order and "decision" in order
    at.switch_page("pages/compare.py").run()
    at.multiselect(key="compare-demo/locating/1").set_value([run_id]).run()
    order = list(at.dataframe[0].proto.column_order)
    assert "correct" not in order and "rank" not in order and "decision" in order
    at.switch_page("pages/decision.py").run()
    assert any("Answers are hidden" in i.value for i in at.info) and not at.metric
    at.sidebar.toggle(key="hide_answers_switch").set_value(False).run()  # off again, from any page
    assert at.metric and not at.session_state["hide_answers"]


def test_step_by_step_says_when_there_is_nothing_to_line_up(home):
    """Issue 40: "Step by step" said "The runs do the same at every row" over an empty table."""
    store = jobs.open_store()
    settings = RunSettings("locating", 1, "sqlite", "planrag", "replay:x", source="demo")
    for run_id in ("empty-a", "empty-b"):
        store.create(run_id, settings)
        store.update(run_id, "failed", outcome=RunOutcome.from_dict({"error": "no model"}))
    at = open_page("pages/compare.py")
    at.multiselect(key="compare-demo/locating/1").set_value(["empty-a", "empty-b"]).run()
    assert any("No steps recorded in these runs yet" in c.value for c in at.caption)
    assert not any("do the same at every row" in c.value for c in at.caption)
    assert not [d for d in at.dataframe if "step" in d.value.columns]  # no empty table of steps


def test_the_new_run_form_says_it_is_not_the_opened_run(home):
    """Issue 40: the form above an opened run showed its defaults right above a run reviewed otherwise."""
    at = open_page("pages/run.py")
    assert any(m.value == "**A new run** of this question" for m in at.markdown)
    at.session_state["run_id"] = demo_run()
    at.run()
    assert any("not those of the run opened below" in m.value for m in at.markdown)


def test_the_benchmark_start_is_the_primary_button(home):
    at = open_page("pages/benchmark.py")
    [start] = [b for b in at.get("form_submit_button") if b.label == "Start"]
    assert start.proto.type == "primary"


def test_check_the_decision_opens_the_decision_check_at_its_top(home):
    """Issue 40: "Check the decision" landed mid-page (the Run page's scroll position kept) at the ranking chart
    instead of Best / Pick / Regret. The browser test (tests/test_e2e_peers.py) sees where it lands."""
    at = open_page("pages/run.py")
    at.session_state["run_id"] = demo_run()
    at.run()
    button(at, "Check the decision").click().run()
    assert at.title[0].value == "Decision check"
    scripts = [e for e in at.sidebar.get("html") if "scrollTop = 0" in e.proto.body]
    assert len(scripts) == 1 and {m.label for m in at.metric} >= {"Best decision", "Pick", "Regret"}
    at.run()  # a rerun of the page (a widget) keeps its scroll position
    assert not [e for e in at.sidebar.get("html") if "scrollTop = 0" in e.proto.body]
