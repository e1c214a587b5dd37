"""Runs in the local run process (issue 41: ``PLANRAG_JOBS=process``, the embedded default; core.jobs.local): the
app hands each run to a process of its own and follows it as a job of its own: events by cursor, the model's reply
as it streams, Stop at once, a review or resume claimed here and driven there, the run process killed (its run
interrupted, resumed in a new one), the app's end (its runs interrupted). Real run processes (``python -m core
local-runs``); the model is a scripted stub server (tests/turn_stub.py)."""
from __future__ import annotations

import io
import json
import os
import signal
import time

import pytest

from core.auth.roles import local_admin
from core.config import settings as config
from core.jobs import local, local_host, runs
from core.llm.client import LLMSettings
from core.model.run_settings import Review, RunSettings
from tests.page_app import isolate
from tests.streaming_stub import StreamingStub
from tests.turn_stub import TurnStub

ME = local_admin()
ACT = "Thought: look\nAction: Relational DB\nAction input: SELECT 1"
FINAL = "Thought: I now know the answer.\nFinal answer: You should allocate the merchant to krakow."
PLAN = "Plan: [Step 1: list the nodes, Step 2: choose]\nCurrent step: Step 1: list the nodes\n" + ACT
REPLAN = "Re-plan: N\n" + FINAL
KEY = "sk-session-only-1234567890"


@pytest.fixture
def home(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv(config.JOBS_ENV, "process")
    yield tmp_path
    local.stop_all()


def settings(url: str, technique: str = "iterrag", **kw) -> RunSettings:
    return RunSettings("locating", 1, "sqlite", technique, "m", base_url=url, source="demo", **kw)


def opener(url: str) -> runs.Opener:
    return runs.Opener(llm=LLMSettings(model="m", base_url=url, api_key=KEY, key_url=url))


def wait_for(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def status(run_id: str) -> str:
    return runs.open_store().get(run_id, events=False).status


def owner(run_id: str) -> int | None:
    return runs.open_store().db.rows("SELECT owner_pid FROM runs WHERE id = ?", (run_id,))[0][0]


def test_the_default_without_a_team_store_is_the_local_run_process(monkeypatch):
    monkeypatch.delenv(config.JOBS_ENV, raising=False)
    monkeypatch.delenv(config.DATABASE_URL_ENV, raising=False)
    assert config.jobs_mode() == "process" and local.enabled()
    monkeypatch.setenv(config.JOBS_ENV, "fork")
    with pytest.raises(ValueError, match="choose queue, process, threads"):
        config.jobs_mode()


def test_a_run_goes_on_in_the_run_process_and_is_followed_here_by_cursor(home):
    stub = TurnStub([ACT, FINAL], hold_at=1)
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert isinstance(run, local.LocalRun) and runs.job(run.run_id) is run
    assert stub.held.wait(60) and runs.running(run.run_id)
    assert owner(run.run_id) == local.process_for().pid != os.getpid()  # driven there, not here
    stub.release.set()
    seen = []
    while not (run.done and len(seen) == len(run.events())):
        seen += run.wait(len(seen), timeout=1)
    record = runs.open_store().get(run.run_id)
    assert run.error is None and record.status == "finished" and record.outcome.final_answer.endswith("krakow.")
    assert seen == record.events and not run.opening and not runs.running(run.run_id)
    assert KEY not in json.dumps(record.to_dict())
    stub.close()


def test_the_models_reply_is_relayed_as_it_streams(home):
    pieces = ["Thought: look\n", "Action: Relational DB\n", "Action input: SELECT 1"]
    stub = StreamingStub([pieces, [FINAL]])  # the last piece of a reply waits for ``release``
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    wait_for(lambda: run.partial == "".join(pieces[:2]))  # the reply so far, while the model writes it
    assert run.streams is True and run.calling["call"] == 1 and not run.opening and status(run.run_id) == "running"
    stub.release.set()
    assert run.join(60) and run.error is None and status(run.run_id) == "finished"
    stub.close()


def test_stop_reaches_the_run_process_at_once(home):
    stub, run = held()
    assert runs.stop(run.run_id, who=local_admin("ann")) == "running"
    assert run.join(10) and status(run.run_id) == "stopped"
    assert runs.open_store().get(run.run_id).events[-1].kind == "error"
    stub.close()


def test_a_review_is_claimed_here_and_the_run_goes_on_there(home):
    stub = TurnStub([PLAN, REPLAN])
    run = runs.start(settings(stub.url, "planrag", hitl="approve-every-plan"), opener(stub.url), who=ME)
    assert run.join(60) and run.error is None and status(run.run_id) == "paused"
    record = runs.open_store().get(run.run_id, events=False)
    resumed = runs.resume(record, Review.approve(), opener(stub.url), pause_id=record.pause["id"],
                          who=local_admin("ann"))
    assert isinstance(resumed, local.LocalRun)
    assert resumed.join(60) and resumed.error is None and status(run.run_id) == "finished"
    assert [(r["action"], r["reviewer"]) for r in runs.open_store().reviews(run.run_id)] == [("approve", "ann")]
    stub.close()


def test_a_branch_is_checked_here_and_driven_there(home):
    stub = TurnStub([ACT, FINAL])
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert run.join(60) and status(run.run_id) == "finished"
    with pytest.raises(ValueError, match="no step 9"):
        runs.branch(runs.open_store().get(run.run_id), 9, opener(stub.url), who=ME, note="x")
    branch = runs.branch(runs.open_store().get(run.run_id), 2, opener(stub.url), who=ME, note="check the totals")
    assert isinstance(branch, local.LocalRun) and branch.join(60) and branch.error is None
    record = runs.open_store().get(branch.run_id)
    assert record.status == "finished" and record.parent_id == run.run_id and record.branch_step == 2
    stub.close()


def held() -> tuple[TurnStub, local.LocalRun]:
    """A run in the run process, waiting for its model's second reply (the stub holds it until ``release``)."""
    stub = TurnStub([ACT, FINAL], hold_at=1)
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert stub.held.wait(60)
    return stub, run


def test_a_run_process_killed_mid_run_leaves_the_run_interrupted_and_the_next_one_resumes_it(home):
    stub, run = held()
    first = local.process_for()
    os.kill(first.pid, signal.SIGKILL)
    assert run.join(30) and str(run.error) == ("the local run process ended (exit code -9): the run reads as "
                                               "interrupted, to be resumed from its last checkpoint (the app's log "
                                               "says why it ended)")
    assert status(run.run_id) == "interrupted"
    stub.release.set()
    resumed = runs.proceed(runs.open_store().get(run.run_id, events=False), opener(stub.url), who=ME)
    assert resumed.join(60) and resumed.error is None and local.process_for().pid != first.pid
    assert [e.kind for e in runs.open_store().events(run.run_id)] == ["thought", "action", "observation",
                                                                      "thought", "final"]
    stub.close()


def test_a_run_process_that_cannot_start_fails_the_run_saying_so(home, monkeypatch):
    monkeypatch.setattr(local, "COMMAND", ("-c", "import sys; sys.exit(3)"))
    run = runs.start(settings("http://127.0.0.1:9/v1"), opener("http://127.0.0.1:9/v1"), who=ME)
    assert run.join(30) and str(run.error) == ("the local run process ended (exit code 3) before the run was stored: "
                                               "start it again (the app's log says why it ended)")
    assert run.status() == "failed" and not runs.running(run.run_id)


def test_the_apps_end_interrupts_its_runs_there_to_be_resumed(home):
    stub, run = held()
    process = local.process_for()
    process.stop()  # its input closes, as when the app's process ends
    assert run.join(30) and status(run.run_id) == "interrupted"
    assert runs.open_store().get(run.run_id).events[-1].message == "the server stopped"
    stub.close()


def test_a_message_that_does_not_fit_is_refused_and_the_rest_go_on(home):
    """The run process's input: a line that is no message, an unknown op, a run without its settings; each said on
    standard error (a run, also to the app), the next line read."""
    replies = io.StringIO()
    lines = ["not json\n", json.dumps({"op": "rm -rf", "run_id": "x"}) + "\n",
             json.dumps({"op": "start", "run_id": "r1", "opener": {}}) + "\n",
             json.dumps({"op": "stop", "run_id": "nothing-runs"}) + "\n"]
    assert local_host.serve(io.StringIO("".join(lines)), replies) == 0
    said = [json.loads(line) for line in replies.getvalue().splitlines()]
    assert said == [{"run_id": "r1", "kind": "ended", "error": "the local run process refused the run: 'settings'"}]
