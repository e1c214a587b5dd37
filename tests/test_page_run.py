"""The Run page (Streamlit AppTest) on demo Locating question 1 with its recorded replays: a run through a pause
and an edited approval, a paused run resumed after a restart, and the errors it shows."""
from __future__ import annotations

import json
import time

import pytest
import streamlit as st

from core.backends import availability
import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from core.llm.replays import replays
from core.config.settings import DatabaseSettings
from tests.page_app import button, isolate, keyed, open_page, shown

EXTRA_STEP = "Check that no other source of deccan is missed"
EDITED_STEP_2 = "Get the traders of doab and ganges, with their home nodes and trading power"


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def step_boxes(at) -> list:
    return [t for t in at.text_input if "-step-" in (t.key or "")]


def test_a_replayed_run_pauses_at_the_replan_and_follows_the_edited_plan(home):
    at = open_page("pages/run.py")
    assert at.selectbox(key="run_llm").value == replays("demo", "locating", 1, "sql", "planrag")[0].spec
    at.radio(key="run_hitl").set_value("approve-replans").run()
    button(at, "Start").click().run()

    run_id = at.session_state["run_id"]
    assert jobs.job(run_id).error is None, jobs.job(run_id).error  # a run that could not start says why
    assert jobs.open_store().get(run_id).status == "paused"
    assert "The agent wants to change its plan" in at.subheader[0].value
    proposed = [box.value for box in step_boxes(at)]
    assert len(proposed) == 3 and proposed[0].startswith('Get the development of "BAH"')
    checklist = next(m.value for m in at.markdown if "check_circle" in m.value)  # the plan in force, step 2 current
    assert ":blue-background[**2\\." in checklist and ":gray[1\\." in checklist
    assert [c.language for c in at.code][:2] == ["sql", "sql"]
    assert list(at.table[0].value.columns) == ["source", "flow"]

    # issue 28: a session with no name (e.g. opened from a shared link) gives one before its first review
    assert button(at, "Approve edited").disabled and button(at, "Approve as proposed").disabled
    at.text_input(key="review_name").input("Ana Costa").run()
    assert not button(at, "Approve edited").disabled and any("review as **Ana Costa**" in c.value for c in at.caption)
    step_boxes(at)[1].set_value(EDITED_STEP_2)
    button(at, "Add a step").click().run()
    step_boxes(at)[3].set_value(EXTRA_STEP).run()
    keyed(at.button, "-up-3")[0].click().run()  # the added step moves before the last one
    keyed(at.text_input, "-note")[0].set_value("count the other traders")
    button(at, "Approve edited").click().run()

    record = jobs.open_store().get(run_id)
    assert record.status == "finished" and not at.exception
    edited = next(e for e in record.events if e.kind == "plan" and e.origin == "analyst")
    assert edited.status == "edited" and edited.note == "count the other traders"
    assert [r["reviewer"] for r in jobs.open_store().reviews(run_id)] == ["Ana Costa"]
    assert edited.steps == [proposed[0], EDITED_STEP_2, EXTRA_STEP, proposed[2]]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Decision"] == "doab" and metrics["Correct"] == "correct" and metrics["Rank"] == "1 of 9"
    assert metrics["LLM calls"] == "6" and metrics["Tokens"].startswith("≈")
    assert len([e for e in [*at.markdown, *at.success] if "Final answer" in e.value]) == 1  # shown once

    button(at, "Check the decision").click().run()
    assert at.session_state["run_id"] == run_id and at.session_state["question_ref"] == ("demo", "locating", 1)


def test_a_paused_run_from_before_a_restart_is_listed_and_resumed(home):
    runtime = jobs.open_runtime()  # a run paused in another process: no job of this one drives it
    spec = replays("demo", "building", 1, "sql", "planrag")[0].spec
    paused = runtime.start(RunSettings("building", 1, "sqlite", "planrag", spec, hitl="approve-replans",
                                       source="demo"))
    runtime.close()
    assert paused.status == "paused"

    at = open_page("pages/run.py", question_ref=None)  # no question chosen yet in this session
    at.session_state["reviewer"] = "ana"
    # the guard asks for a question below the list
    assert "Inbox: 1 waiting for review" in at.expander[0].label and at.info
    button(at, "Open the run").click().run()
    assert at.session_state["run_id"] == paused.run_id
    assert at.session_state["question_ref"] == ("demo", "building", 1)
    button(at, "Reject with the note").click().run()  # with no note
    assert "Write a note for the agent" in at.error[0].value
    assert jobs.open_store().get(paused.run_id).status == "paused"
    button(at, "Approve as proposed").click().run()
    record = jobs.open_store().get(paused.run_id)
    assert record.status == "finished" and record.outcome.decision == 107
    assert {m.label: m.value for m in at.metric}["Correct"] == "correct"


def test_errors_are_shown_and_the_events_so_far_kept(home, monkeypatch, tmp_path):
    folder = tmp_path / "replays"
    folder.mkdir()
    (folder / "demo_locating_1_sql_singlerag.json").write_text("{not json")
    plan_and_act = json.loads(replays("demo", "locating", 1, "sql", "planrag")[0].path.read_text())[:1]
    (folder / "demo_locating_1_sql_planrag-norp.json").write_text(json.dumps(plan_and_act))
    monkeypatch.setenv("MYSQL_URL", "mysql://root@127.0.0.1:1")  # nothing listens there
    st.cache_data.clear()
    assert availability.status("mysql", DatabaseSettings(), wait_s=60)[0]  # checked (in the background) by now

    at = open_page("pages/run.py")
    at.radio(key="run_db").set_value("mysql").run()
    assert button(at, "Start").disabled and any("mysql is unavailable" in c.value for c in at.caption)
    at.radio(key="run_db").set_value("sqlite")
    at.selectbox(key="run_technique").set_value("iterrag").run()
    at.selectbox(key="run_llm").set_value(replays("demo", "locating", 1, "sql", "iterrag")[0].spec).run()
    assert not button(at, "Start").disabled

    monkeypatch.delenv("PLANRAG_REPLAYS", raising=False)
    at.selectbox(key="run_technique").set_value("singlerag").run()
    assert button(at, "Start").disabled and "No LLM configured" in at.warning[0].value

    monkeypatch.setenv("PLANRAG_REPLAYS", str(folder))
    at.run()
    button(at, "Start").click().run()
    assert "The run could not go on" in at.error[0].value and "is not JSON" in at.error[0].value

    at.selectbox(key="run_technique").set_value("planrag-norp").run()
    button(at, "Start").click().run()
    record = jobs.open_store().get(at.session_state["run_id"])
    assert record.status == "failed" and [e.kind for e in record.events][-2:] == ["observation", "error"]
    assert "ran out of replies" in " ".join(e.value for e in at.error)
    assert list(at.table[0].value.columns) == ["source", "flow"]  # the observation before the failure


def test_a_learned_plan_can_be_chosen_as_the_start(monkeypatch, tmp_path):
    """With a learned plan of the scenario, PlanRAG can start from it; the run's settings record the version."""
    from core.store.plans import LearnedPlan, PlanStore

    home = isolate(monkeypatch, tmp_path)
    at = open_page("pages/run.py")
    assert not keyed(at.selectbox, "run_plan_version")  # no learned plan yet: no choice shown
    steps = ["Find the nodes flowing into the home node", "Choose the node that steers most value home"]
    PlanStore(home / "plans").save(LearnedPlan("locating", steps, "demo", [2, 3], 1, None, "t", {}, [], "", []))
    at = open_page("pages/run.py")
    [choice] = keyed(at.selectbox, "run_plan_version")
    assert choice.options == ["none (the paper's prompt)", "v1 (AutoPlan)"]
    choice.set_value(1).run()
    button(at, "Start").click().run()
    record = jobs.open_store().get(at.session_state["run_id"])
    assert record.settings.plan_version == 1 and record.status == "finished" and not at.exception


def test_a_finished_run_shows_its_evidence_coverage_and_takes_an_override(home):
    at = open_page("pages/run.py")
    button(at, "Start").click().run()
    run_id = at.session_state["run_id"]
    record = jobs.open_store().get(run_id)
    assert record.status == "finished" and not at.exception
    coverage = next(w.value for w in list(at.success) + list(at.warning) if "values that decide this question" in w.value)
    assert coverage.startswith("The agent saw ") and " of 10 values" in coverage
    assert any("The answer decides doab" in c.value for c in at.caption)  # issue 40: in words
    form = f"run-{run_id}"
    at.text_input(key=f"ov-name-{form}").input("ana").run()  # asked once, for the session
    at.selectbox(key=f"ov-d-{form}").set_value("ganges")
    at.text_input(key=f"ov-note-{form}").input("the answer hedges")
    next(b for b in at.get("form_submit_button") if b.label == "Save override").click().run()
    from core.store.overrides import OverrideStore

    saved = OverrideStore(home).get(run_id)
    assert (saved.decision, saved.correct, saved.by) == ("ganges", False, "ana")
    metrics = {m.label: m.value for m in at.metric}
    # issue 40: "(overridden)" in the labels, the values whole ("kiev (ov…" was cut); the automatic reading named
    assert metrics["Decision (overridden)"] == "ganges" and metrics["Correct (overridden)"] == "wrong"
    assert any("Read automatically before the override: The answer decides doab" in shown(c.value) for c in at.caption)
    assert any("Grade overridden by ana" in c.value for c in at.caption)


def test_an_override_changes_every_figure_derived_from_the_grade(home):
    """Issue 28: after overriding a depot run from DC-BRO to DC-ASH, Rank still said 2 of 6, History showed no rank
    and kept the run under "wrong", and Decision check still marked DC-BRO; the form opened on "no decision" with
    Who empty although a reviewer was set."""
    from core.analysis import decision
    from core.scenarios.catalog import question as catalog_question

    runtime = jobs.open_runtime()
    spec = replays("scenario", "depot", 1, "sql", "iterrag")[0].spec
    run_id = runtime.start(RunSettings("depot", 1, "sqlite", "iterrag", spec, source="scenario")).run_id
    runtime.close()
    at = open_page("pages/run.py", question_ref=("scenario", "depot", 1))
    at.session_state["run_id"], at.session_state["reviewer"] = run_id, "ana"
    at.run()
    assert {m.label: m.value for m in at.metric}["Rank"] == "2 of 6"
    form = f"run-{run_id}"
    assert at.selectbox(key=f"ov-d-{form}").value == "DC-BRO" and not keyed(at.text_input, f"ov-name-{form}")
    at.selectbox(key=f"ov-d-{form}").set_value("DC-ASH")
    next(b for b in at.get("form_submit_button") if b.label == "Save override").click().run()
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Decision (overridden)"], metrics["Correct (overridden)"], metrics["Rank (overridden)"]) == (
        "DC-ASH", "correct", "1 of 6")

    history = open_page("pages/history.py", question_ref=None)
    [row] = history.dataframe[0].value.to_dict("records")
    assert (row["decision"], row["correct"], row["rank"]) == ("DC-ASH", True, "1 of 6")
    assert history.selectbox(key="history_Correct").options == ["any", "correct"]  # no longer under "wrong"
    history.selectbox(key="history_Correct").set_value(True).run()
    assert history.dataframe[0].value["run"].tolist() == [run_id]

    pick = decision.run_pick(run_id, catalog_question("scenario", "depot", 1))
    assert (pick.decision, pick.overridden_by) == ("DC-ASH", "ana")


def test_the_prompt_setting_and_the_reaper_planner_are_chosen_on_the_page(home):
    at = open_page("pages/run.py")
    at.selectbox(key="run_technique").set_value("iterrag").run()
    at.selectbox(key="run_llm").set_value(replays("demo", "locating", 1, "sql", "iterrag")[0].spec).run()
    assert at.radio(key="run_setting_prompts").value == "improved"
    at.radio(key="run_setting_prompts").set_value("paper").run()
    button(at, "Start").click().run()
    run_id = at.session_state["run_id"]
    deadline = time.time() + 60
    while jobs.running(run_id) and time.time() < deadline:  # the run goes on in the background
        time.sleep(0.05)
    assert jobs.job(run_id).error is None, jobs.job(run_id).error  # a run that could not start says why
    record = jobs.open_store().get(run_id, events=False)
    assert record.settings.prompts == "paper" and record.status == "finished"
    at.selectbox(key="run_technique").set_value("reaper").run()
    assert at.radio(key="run_setting_planner").value == "examples"
    assert "run_setting_prompts" not in [r.key for r in at.radio]
    assert at.radio(key="run_setting_reaper_prompts").value == "improved"  # REAPER has its own paper setting


def test_run_n_times_shows_the_spread_of_decisions_with_the_simulators_rank(home):
    at = open_page("pages/run.py")
    at.number_input(key="run_samples_n").set_value(3).run()
    button(at, "Run 3 times").click().run()
    assert not at.exception
    runs = at.session_state["run_samples"]["runs"]
    assert len(runs) == 3 and "run_id" not in at.session_state  # no single sample in the Run view
    deadline = time.time() + 60
    while not all(jobs.job(r).done for r in runs) and time.time() < deadline:
        time.sleep(0.2)
    at.run()
    records = [jobs.open_store().get(r) for r in runs]
    assert {r.settings.hitl for r in records} == {"auto"} and {r.settings.temperature for r in records} == {0.7}
    spread = next(d.value for d in at.dataframe if "share %" in d.value.columns)
    # the recorded replay repeats itself: one decision, all three samples, the simulator's best
    assert spread.to_dict("records") == [{"decision": "doab", "samples": 3, "share %": 100.0, "rank": "1 of 9",
                                          "correct": "right"}]
    assert any("3 samples of the question" in s.value for s in at.subheader)
    assert any("(n=3)" in c.value for c in at.caption)


def test_a_run_whose_runtime_is_still_opening_says_so_not_that_it_waits_for_the_model(home):
    """A process's first run loads the agent's libraries as it opens its runtime (a few seconds): its panel says
    so instead of "waiting for the model" (issue 43: the first run after a start looked hung)."""
    import threading

    from streamlit.testing.v1 import AppTest

    from core.auth.roles import local_admin

    def script(run_id: str):
        import core.jobs.runs as jobs
        from core.model.run_settings import RunSettings
        from ui.run_view import show_live

        show_live(run_id, RunSettings("locating", 1, "sqlite", "planrag", "m", source="demo"), jobs.job(run_id), "t")

    release = threading.Event()

    def opening_slowly():
        release.wait(60)
        raise RuntimeError("no runtime in this test")

    job = jobs.start(RunSettings("locating", 1, "sqlite", "planrag", "m", source="demo"), opening_slowly,
                     who=local_admin())
    try:
        assert job.opening
        at = AppTest.from_function(script, args=(job.run_id,), default_timeout=30).run()
        said = " ".join(c.value for c in at.caption)
        assert "waiting for the agent to open" in said and "waiting for the model" not in said, said
    finally:
        release.set()
        job.join(60)
    assert not job.opening and jobs.follower(job.run_id).opening is False
