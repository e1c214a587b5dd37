"""State that stays and links that can be shared (Streamlit AppTest): a page's choices kept for the session when
it is left and opened again, the question and run carried by the URL (bad links said so), Start usable again when
a run ends, and a learned plan version opened in Run."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from core.techniques.autoplan.train import TrainSettings, train
from core.llm.replays import replays
from tests.page_app import APP, button, isolate, open_page
from tests.test_autoplan_paper import TRAINING, replay
from tests.page_app import shown


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def linked(page: str, **params) -> AppTest:
    """A new session opening ``page`` from a link with these query parameters."""
    at = AppTest.from_file(str(APP), default_timeout=30)
    at.query_params.update(params)
    at.switch_page(page)
    return at.run()


def demo_run(scenario: str = "locating", technique: str = "planrag") -> str:
    runtime = jobs.open_runtime()
    spec = replays("demo", scenario, 1, "sql", technique)[0].spec
    run_id = runtime.start(RunSettings(scenario, 1, "sqlite", technique, spec, source="demo")).run_id
    runtime.close()
    return run_id


def test_choices_stay_when_a_page_is_left_and_opened_again(home):
    demo_run()
    at = open_page("pages/run.py")
    at.radio(key="run_hitl").set_value("approve-every-plan").run()
    at.selectbox(key="run_technique").set_value("iterrag").run()
    at.switch_page("pages/history.py").run()
    at.selectbox(key="history_Status").set_value("finished").run()
    at.switch_page("pages/benchmark.py").run()
    at.text_input(key="bench_questions").input("4-7")
    at.multiselect(key="bench_techniques").select("iterrag")
    at.get("form_submit_button")[0].click().run()  # a form's values count once it is submitted
    assert "Enter a model" in at.error[0].value  # (none is configured in the tests)
    at.switch_page("pages/scenarios.py").run()

    at.switch_page("pages/run.py").run()
    assert at.selectbox(key="run_technique").value == "iterrag"
    assert at.radio(key="run_hitl").value == "approve-every-plan"
    at.switch_page("pages/history.py").run()
    assert at.selectbox(key="history_Status").value == "finished"
    at.switch_page("pages/benchmark.py").run()
    assert at.text_input(key="bench_questions").value == "4-7"
    assert at.multiselect(key="bench_techniques").value == ["planrag", "iterrag"]


def test_the_url_carries_the_question_and_a_link_opens_it(home):
    at = open_page("pages/run.py", ("demo", "building", 2))
    assert at.query_params["q"] == "demo/building/2"  # the view's address names its question
    for page in ("pages/run.py", "pages/compare.py", "pages/decision.py"):
        at = linked(page, q="demo/building/1")
        assert not at.exception and not at.error
        assert any("demo/building/1" in shown(m.value) for m in [*at.caption, *at.markdown]), page
        assert at.session_state["question_ref"] == ("demo", "building", 1)


def test_a_page_opened_without_a_question_shows_the_default_one(home):
    at = open_page("pages/compare.py", question_ref=None)
    assert "No question chosen" in at.info[0].value
    assert any("demo/locating/1" in c.value for c in at.caption) and at.query_params["q"] == "demo/locating/1"


def test_a_link_opens_the_scenarios_page_on_its_question(home):
    at = linked("pages/scenarios.py", q="demo/building/2")
    assert not at.exception and not at.error
    assert at.segmented_control(key="scenarios_scenario").value == "building"
    assert at.segmented_control(key="scenarios_source").value == "demo"
    assert at.selectbox(key="scenarios_question").value.id == "demo/building/2"

    at = open_page("pages/scenarios.py")  # a session showing demo/locating/1, then a link to another question
    at.query_params["q"] = "scenario/depot/2"
    at.run()
    assert at.segmented_control(key="scenarios_scenario").value == "depot"
    assert at.selectbox(key="scenarios_question").value.id == "scenario/depot/2"
    assert at.session_state["question_ref"] == ("scenario", "depot", 2)

    at = linked("pages/scenarios.py", q="demo/building/99")  # said so, and the pickers stay usable
    assert "The link names question `demo/building/99`, which cannot be opened here" in at.error[0].value
    assert at.selectbox(key="scenarios_question").value.id == "demo/locating/1"
    assert at.query_params["q"] == "demo/locating/1"


@pytest.mark.parametrize("link", ["demo/building/99", "nowhere/locating/1", "garbage"])
def test_a_bad_question_link_says_so(home, link):
    at = linked("pages/run.py", q=link)
    assert not at.exception
    assert f"The link names question `{link}`, which cannot be opened here" in at.error[0].value


def test_run_links_open_the_run_and_a_bad_one_says_so(home):
    run_id = demo_run("building")
    at = linked("pages/run.py", run=run_id)
    assert at.session_state["question_ref"] == ("demo", "building", 1)  # a link naming the run alone: its question
    assert {m.label: m.value for m in at.metric}["Decision"] == "107"
    assert at.query_params["run"] == run_id

    other = demo_run("locating", "iterrag")
    at = linked("pages/history.py", run=run_id)
    assert at.selectbox(key="history_run").value == run_id and other != run_id
    at = linked("pages/decision.py", run=run_id)
    assert any(f"The agent's pick comes from run `{run_id}`" in c.value for c in at.caption)

    at = linked("pages/run.py", run="nosuchrun")
    assert not at.exception and "Run `nosuchrun` is not in this app's run store" in at.error[0].value
    assert "run" not in at.query_params
    at = linked("pages/history.py", run="nosuchrun")
    assert not at.exception and "Run `nosuchrun` is not in this app's run store" in at.error[0].value


def test_start_is_usable_again_when_the_run_ends(home):
    at = open_page("pages/run.py")
    at.selectbox(key="run_technique").set_value("iterrag").run()
    button(at, "Start").click().run()
    run_id = at.session_state["run_id"]
    assert jobs.open_store().get(run_id).status == "finished"
    assert not button(at, "Start").disabled  # without touching another widget


def test_history_columns_lead_with_correct_and_rank(home):
    demo_run()
    at = open_page("pages/history.py", question_ref=None)
    table = at.dataframe[0]  # after the link that opens the run (issue 40: History as a table of record)
    assert list(table.value.columns)[:6] == ["open", "branch", "question", "technique", "correct", "rank"]


def test_scenario_pickers_cannot_be_emptied_and_learned_plans_follow_the_question(home):
    at = open_page("pages/scenarios.py", ("scenario", "depot", 1))
    for key in ("scenarios_scenario", "scenarios_source"):  # a click on the chosen pill keeps it (no empty page)
        assert at.segmented_control(key=key).proto.required, key
    at.switch_page("pages/plans.py").run()
    picker = at.segmented_control(key="plans_scenario")
    assert picker.value == "depot" and picker.proto.required
    assert "No learned plan for depot yet" in at.info[0].value


def test_a_learned_plan_version_opens_in_run(home, tmp_path):
    train(TrainSettings("locating", "sqlite", replay(tmp_path, TRAINING), [1], batch_size=1, iterations=1,
                        source="demo"), home)
    at = open_page("pages/plans.py", question_ref=None)
    assert at.selectbox(key="plans_version-locating").value == 1
    button(at, "Use v1 in Run").click().run()
    assert at.title[0].value == "Run" and not at.exception
    assert at.selectbox(key="run_plan_version").value == 1 and at.selectbox(key="run_technique").value == "planrag"
    assert at.session_state["question_ref"] == ("demo", "locating", 2)  # question 1 trained it


def test_benchmark_messages_name_the_page_inputs():
    from pages.benchmark import page_words

    assert page_words("the results in x were made with other parameters (a); use another --out (or --name) for "
                      "these") == "the results in x were made with other parameters (a); choose another Results name " \
                                  "for these"
    assert page_words("--concurrency must be at least 1") == "Items at once must be at least 1"
