"""Views that disagree with themselves (Streamlit AppTest), issue 40: Run N times is the primary action when Samples
asks for more than one; "Use v1 in Run" keeps the analyst's question, or says why it cannot."""
from __future__ import annotations

import pytest

from core.autoplan.train import TrainSettings, train
from tests.page_app import button, isolate, open_page, shown
from tests.test_autoplan_paper import TRAINING, replay


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
