"""A process stopped mid-run (issue 43 section 2): the app server (``streamlit run app.py``; its runs in its local
run process, the default, or in its threads) stopped with SIGTERM or SIGINT, or a worker of the job queue stopped
with SIGTERM, takes no more work, ends each run it drives ``interrupted`` with the reason "the server stopped" (not
failed), and exits; killed with SIGKILL, the run is found interrupted at the next start (in the threads mode) or
at once (its run process sees the app gone, interrupts it and ends). Resumed, the run goes on from its last checkpoint: only the model call in
flight is asked again, and no event is lost or doubled. The model is a scripted stub server (tests/turn_stub.py)
holding its second reply, the call in flight when the signal comes."""
from __future__ import annotations

import os
import signal
import time

import pytest

from core.analysis.trace import Trace
from core.jobs import local, runs
from core.store.runs import RunStore
from tests.test_e2e_browser import app_server, wait_healthy
from tests.test_jobs_queue import ACT, FINAL, ME, opener, settings, status, team, wait_for, workers  # noqa: F401
from tests.turn_stub import TurnStub

# `streamlit run app.py`, where the server process starts one run before it serves: the run is driven where one
# started from the Run page is (the app's local run process, or a thread of the app server).
STARTING_STREAMLIT = """
import os, sys
from core.auth.roles import local_admin
from core.jobs import runs
from core.llm.client import LLMSettings
from core.model.run_settings import RunSettings
url = os.environ["TEST_MODEL_URL"]
job = runs.start(RunSettings("locating", 1, "sqlite", "iterrag", "m", base_url=url, source="demo"),
                 runs.Opener(llm=LLMSettings(model="m", base_url=url, api_key="sk-test-1234567890")), who=local_admin())
print("started run", job.run_id, flush=True)
from streamlit.web.cli import main
sys.argv[0] = "streamlit"
main()
"""
KINDS = ["thought", "action", "observation", "thought", "final"]  # the run's events, one pass through them


def in_flight_asked_again(stub: TurnStub) -> bool:
    """Whether the model was asked the second turn (the call in flight when the process stopped) exactly once more
    than the first (a client trying a stream, then plain, asks each turn twice)."""
    by_turn = {turn: n for (_, turn), n in stub.calls.items()}
    return by_turn[1] == by_turn[0] + 1


def finished_once(store: RunStore, run_id: str) -> None:
    """The resumed run finished with each step once (the interruption noted between them) and its counts, as
    every view reads them (core.analysis.trace.Trace), those of its stored outcome."""
    record = store.get(run_id)
    assert record.status == "finished", record.outcome
    kinds = [e.kind for e in record.events]
    assert [k for k in kinds if k != "error"] == KINDS, kinds
    [error] = [e for e in record.events if e.kind == "error"]
    assert (error.error_kind, error.message) == ("interrupted", "the server stopped")
    trace = Trace.of(record.events)
    assert trace.llm_calls == record.outcome.llm_calls == 2
    assert trace.prompt_tokens + trace.completion_tokens == record.outcome.tokens.total


@pytest.fixture
def app(tmp_path, monkeypatch, request):
    """Starts the app server with one run under way (its model holding the run's second call), in the jobs mode the
    test asks for (``request.param``; default: the embedded default, the local run process); its process, the run
    id and the model stub."""
    home = tmp_path / "home"
    monkeypatch.setenv("PLANRAG_HOME", str(home))
    if getattr(request, "param", "process") == "process":
        monkeypatch.delenv("PLANRAG_JOBS", raising=False)  # the default
    else:
        monkeypatch.setenv("PLANRAG_JOBS", request.param)
    monkeypatch.delenv("PLANRAG_DATABASE_URL", raising=False)
    monkeypatch.setattr(runs.config, "DATA_HOME", home)
    stub = TurnStub([ACT, FINAL], hold_at=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PLANRAG_HOME=str(home), TEST_MODEL_URL=stub.url)
    with app_server(STARTING_STREAMLIT, env, tmp_path / "server.log") as (url, process):
        wait_healthy(url, process)
        assert stub.held.wait(60), (tmp_path / "server.log").read_text()
        [record] = RunStore(home / "runs.sqlite").list()
        yield process, record.id, stub, home
    stub.close()
    local.stop_all()  # the test's own (its Resume)


@pytest.mark.parametrize("app", ["process", "threads"], indirect=True)
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_the_app_stopped_mid_run_leaves_it_interrupted_and_it_resumes_from_its_checkpoint(app, how):
    process, run_id, stub, home = app
    store = RunStore(home / "runs.sqlite")
    assert [e.kind for e in store.events(run_id)] == ["thought", "action", "observation"]
    sent = time.monotonic()
    process.send_signal(how)
    process.wait(30)  # a hang guard: the figure is printed below
    took = time.monotonic() - sent
    record = store.get(run_id)
    assert record.status == "interrupted", (record.status, record.outcome, record.events[-1])
    assert record.events[-1].message == "the server stopped" and record.outcome is None
    stub.release.set()
    job = runs.proceed(record, opener(stub.url), who=ME)  # Resume, after the restart
    assert job.join(60)
    finished_once(store, run_id)
    assert in_flight_asked_again(stub), stub.calls
    print(f"\n{signal.Signals(how).name}: the app exited {took:.2f} s after the signal (target: 10 s)")


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie no one reaps has)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("app", ["process", "threads"], indirect=True)
def test_the_app_killed_mid_run_leaves_it_interrupted_at_the_next_start(app, request):
    process, run_id, stub, home = app
    store = RunStore(home / "runs.sqlite")
    driver = store.db.rows("SELECT owner_pid FROM runs WHERE id = ?", (run_id,))[0][0]
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    threads = request.node.callspec.params["app"] == "threads"
    if threads:
        assert driver == process.pid and store.detect_orphans() == [run_id]  # what the next start's pages see
    else:  # its run process saw the app gone: it interrupted the run and ended
        assert driver != process.pid
        wait_for(lambda: gone(driver), timeout=30)
        record = store.get(run_id)
        assert record.status == "interrupted" and record.events[-1].message == "the server stopped"
    stub.release.set()
    job = runs.proceed(store.get(run_id), opener(stub.url), who=ME)
    assert job.join(60)
    if threads:  # no trace of the kill: the process could not say it
        record = store.get(run_id)
        assert record.status == "finished" and [e.kind for e in record.events] == KINDS
    else:
        finished_once(store, run_id)
    assert in_flight_asked_again(stub), stub.calls


def test_a_worker_stopped_mid_run_leaves_it_interrupted_and_it_resumes_on_another(team, workers):  # noqa: F811
    stub = TurnStub([ACT, FINAL], hold_at=1)
    first = workers("w1")
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert stub.held.wait(60)
    sent = time.monotonic()
    first.process.send_signal(signal.SIGTERM)
    first.process.wait(30)  # a hang guard: the figure is printed below
    took = time.monotonic() - sent
    store = runs.open_store()
    record = store.get(run.run_id)
    assert record.status == "interrupted", "".join(first.lines)
    assert record.events[-1].message == "the server stopped"
    stub.release.set()
    workers("w2")
    runs.proceed(record, opener(stub.url), who=ME)  # Resume: queued for a worker
    wait_for(lambda: status(run.run_id) == "finished", timeout=90)
    finished_once(store, run.run_id)
    assert in_flight_asked_again(stub), stub.calls
    stub.close()
    print(f"\nSIGTERM: the worker exited {took:.2f} s after the signal (target: 10 s)")
