"""What the run pages build on: replays found by name (core.llm.replays), a trace folded event by event
(core.analysis.trace), and runs driven in background threads (core.jobs.runs)."""
from __future__ import annotations

import time

import pytest

from core.auth.roles import local_admin
import core.jobs.runs as jobs
from core.model.run_settings import Review, RunSettings
from core.llm.replays import model_label, replays
from core.store.runs import RunRecord
from core.analysis.trace import Trace, step_index
from core.model.events import ActionEvent, FinalEvent, PlanEvent, ReplanEvent, ThoughtEvent
from tests.page_app import isolate

PLAN = ["Find the sources of deccan", "Get their values", "Choose the node"]


def test_replays_are_found_by_question_language_and_technique(monkeypatch, tmp_path):
    shipped = replays("demo", "locating", 1)
    assert {(r.language, r.technique) for r in shipped} == {(lang, t) for lang in ("sql", "cypher")
                                                            for t in ("planrag", "iterrag")}
    assert replays("demo", "locating", 2) == [] and replays("demo", "building", 1, "cypher", "iterrag")
    (tmp_path / "dqa_building_7_sql_planrag-norp.json").write_text("[]")
    (tmp_path / "notes.json").write_text("[]")
    monkeypatch.setenv("PLANRAG_REPLAYS", str(tmp_path))
    [mine] = replays("dqa", "building", 7)
    assert (mine.language, mine.technique, mine.spec) == ("sql", "planrag-norp", f"replay:{mine.path}")
    assert model_label(mine.spec) == "replay: dqa_building_7_sql_planrag-norp.json"
    assert model_label("gpt-4o") == "gpt-4o"


@pytest.mark.parametrize("said, index", [("Step 2: Get their values.", 1), ("step 3", 2), ("Get their values", 1),
                                         ("Step 9: something else", None), ("Look around", None),
                                         ("Step 1: Get their values", 1),  # the text wins (issue 28: an edited plan)
                                         ("Step 2: Get the development of BAH", None)])
def test_the_current_step_is_found_by_number_or_text(said, index):
    assert step_index(PLAN, said) == index


def test_a_trace_follows_the_plan_in_force():
    trace = Trace.of([PlanEvent(origin="agent", status="adopted", steps=PLAN),
                      ThoughtEvent(text="", current_step="Step 1: Find the sources of deccan"),
                      ThoughtEvent(text="", current_step="Step 2: Get their values"),
                      ActionEvent(tool="", query="", language="sql"), ActionEvent(tool="", query="", language="self")])
    assert [s for _, s in trace.step_states()] == ["done", "current", "todo"] and trace.queries == 1
    trace.add(ReplanEvent(replan=True, status="proposed", old_plan=PLAN, new_plan=["Other"]))
    assert trace.plan == PLAN and trace.replans == 1  # a proposal is not in force until approved
    trace.add(PlanEvent(origin="analyst", status="edited", steps=["Mine"]))
    assert trace.step_states() == [("Mine", "todo")]
    trace.add(FinalEvent(answer=""))
    assert trace.step_states() == [("Mine", "todo")]  # the run ended without working on it


def test_a_finished_run_ticks_only_the_steps_that_ran():
    plan, final = PlanEvent(origin="agent", status="adopted", steps=PLAN), FinalEvent(answer="")
    query = ActionEvent(tool="", query="", language="sql")
    named = Trace.of([plan, ThoughtEvent(text="", current_step="Step 1: Find the sources"), query,
                      ThoughtEvent(text="", current_step="Step 2: Get their values"), query, final])
    assert [s for _, s in named.step_states()] == ["done", "done", "done"]  # the answer is the last step (issue 28)
    # named, but no query ran: no step done (issue 29)
    unqueried = Trace.of([plan, ThoughtEvent(text="", current_step="Step 1: Find the sources"), final])
    assert [s for _, s in unqueried.step_states()] == ["todo", "todo", "todo"]
    skipped = Trace.of([plan, ThoughtEvent(text="", current_step="Step 2: Get their values"), query, final])
    # never named: not ticked, but not left to do either (issue 40: a model words its current step its own way)
    assert [s for _, s in skipped.step_states()] == ["unreported", "done", "done"]
    unnamed = Trace.of([plan, ActionEvent(tool="", query="", language="sql"), final])  # e.g. REAPER's steps
    assert [s for _, s in unnamed.step_states()] == ["done", "unreported", "done"]
    none_ran = Trace.of([plan, final])
    assert [s for _, s in none_ran.step_states()] == ["todo", "todo", "todo"]


def test_plan_steps_lose_the_models_markdown_bold():
    from core.agents.parsing import parse_plan, parse_reply

    assert parse_plan("**Step 1:** Find the **candidate** nodes\n**Step 2:** Compare") == [
        "Find the candidate nodes", "Compare"]
    reply = parse_reply("**Plan:**\n1. **Step 1:** Find nodes\n2. **Step 2:** choose\n**Current step:** Step 1")
    assert reply.plan == ["Find nodes", "choose"]
    assert parse_plan("Step 1: price * qty, Step 2: pick") == ["price * qty", "pick"]


def test_a_job_reports_what_stopped_it_and_a_run_is_driven_once(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    settings = RunSettings("locating", 1, "sqlite", "iterrag", f"replay:{tmp_path / 'missing.json'}", source="demo")
    failed = jobs.start(settings, jobs.open_runtime, who=local_admin())
    assert failed.wait(0, timeout=10) == [] and failed.done and "not found" in str(failed.error)

    spec = replays("demo", "locating", 1, "sql", "iterrag")[0].spec
    settings = RunSettings("locating", 1, "sqlite", "iterrag", spec, source="demo")

    def slow_runtime():
        time.sleep(0.3)
        return jobs.open_runtime()

    job = jobs.start(settings, slow_runtime, who=local_admin())
    with pytest.raises(jobs.RunBusy):  # a second review while the run goes on
        jobs.resume(RunRecord(job.run_id, 0, 0, "paused", settings), Review.approve(), jobs.open_runtime, who=local_admin())
    seen = []
    while not (job.done and len(seen) == len(job.events())):
        seen += job.wait(len(seen), timeout=1)
    assert job.error is None and seen == jobs.open_store().get(job.run_id).events and seen[-1].kind == "final"
    assert jobs.job(job.run_id) is job and not jobs.running(job.run_id)


def test_a_run_of_another_process_is_followed_as_a_job_of_the_same_interface(monkeypatch, tmp_path):
    """A RunFollower (a run a worker or a command line drives) is a Job of kind ``run``: a page follows it as it
    follows a RunJob, with no branch on the kind."""
    from core.jobs.job import Job

    isolate(monkeypatch, tmp_path)
    spec = replays("demo", "locating", 1, "sql", "iterrag")[0].spec
    job = jobs.start(RunSettings("locating", 1, "sqlite", "iterrag", spec, source="demo"), jobs.open_runtime,
                     who=local_admin())
    assert job.join(60)
    follower = jobs.follower(job.run_id)
    assert isinstance(follower, Job) and follower.kind == job.kind and follower.run_id == job.run_id
    assert follower.join(0) and follower.done and follower.status() == job.status() == "finished"
    assert follower.wait(0, timeout=0) == job.events() == jobs.open_store().get(job.run_id).events
    assert follower.wait(2, timeout=0) == job.events(2)
    assert job.note("running") == "" and "worker" in follower.note("queued")
    follower.interrupt("the server stopped")  # another process's run: left to it
    assert follower.status() == "finished" and jobs.job(job.run_id) is job  # never registered as this process's


@pytest.mark.parametrize("held", ["runtime", "workspace"])
def test_stop_right_after_start_stops_the_run_before_it_is_stored(monkeypatch, tmp_path, held):
    """Issue 28: Stop within half a second of Start (the runtime, or the run's database, still opening; the run
    not in the store yet) raised KeyError and the run went on to its end. Now it stops as soon as it is driven."""
    import threading

    from core.agents.runtime import AgentRuntime
    from core.agents.workspace import open_catalog_workspace

    isolate(monkeypatch, tmp_path)
    spec = replays("demo", "locating", 1, "sql", "iterrag")[0].spec
    settings = RunSettings("locating", 1, "sqlite", "iterrag", spec, source="demo")
    opening, go_on = threading.Event(), threading.Event()

    def hold():
        opening.set()
        assert go_on.wait(30)

    def workspace(s):
        if held == "workspace":
            hold()
        return open_catalog_workspace(s)

    def make_runtime():
        if held == "runtime":
            hold()
        return AgentRuntime(tmp_path, workspace=workspace)

    job = jobs.start(settings, make_runtime, who=local_admin())
    assert opening.wait(30)
    with pytest.raises(KeyError):
        jobs.open_store().get(job.run_id)  # not stored yet
    assert jobs.stop(job.run_id, who=local_admin()) == "running"  # asked, no KeyError
    go_on.set()
    while not job.done:
        job.wait(len(job.events()), timeout=1)
    record = jobs.open_store().get(job.run_id)
    assert job.error is None and record.status == "stopped"
    assert record.events[-1].error_kind == "stopped" and not any(e.kind == "final" for e in record.events)
