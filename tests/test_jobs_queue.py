"""Runs as jobs on the team's job queue (issue 25 sections 2 and 3): the app only enqueues and follows, workers
(``python -m core worker`` processes, each with its own home) drive the runs, and the faults a team meets: a worker
killed mid-run, a worker without the data, with other code or a broken model, a worker gone without a trace, many
workers racing for jobs. Real PostgreSQL (the session's test database) and real worker processes; the model is a
scripted stub server (tests/turn_stub.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.auth.roles import local_admin
from core.jobs import queue, runs
from core.llm.client import LLMSettings
from core.model.run_settings import Review, RunSettings
from core.store.runs import PauseTaken
from tests.conftest import empty_team_store
from tests.pg_cluster import upgraded
from tests.turn_stub import TurnStub

ME = local_admin()  # who acts in these tests

ROOT = Path(__file__).resolve().parent.parent
ACT = "Thought: look\nAction: Relational DB\nAction input: SELECT 1"
FINAL = "Thought: I now know the answer.\nFinal answer: You should allocate the merchant to krakow."
PLAN = "Plan: [Step 1: list the nodes, Step 2: choose]\nCurrent step: Step 1: list the nodes\n" + ACT
REPLAN = "Re-plan: N\n" + FINAL


@pytest.fixture
def team(team_database, monkeypatch, tmp_path):
    """The team deployment: the session's PostgreSQL database (emptied), runs queued for workers."""
    empty_team_store(team_database)
    monkeypatch.setenv("PLANRAG_DATABASE_URL", team_database)
    monkeypatch.setenv("PLANRAG_JOBS", "queue")
    monkeypatch.setenv("PLANRAG_HOME", str(tmp_path / "app"))
    monkeypatch.setattr(runs.config, "DATA_HOME", tmp_path / "app")
    yield team_database
    queue.close()


@pytest.fixture(scope="module")
def own_cluster():
    """A PostgreSQL cluster of this module's own (tests/pg_cluster.py), at this code's schema, for the tests that
    stop and start the server: the machine's shared cluster is never touched. Made once per module."""
    with upgraded() as cluster:
        yield cluster


@pytest.fixture
def own_team(own_cluster, monkeypatch, tmp_path):
    """The team deployment on the module's own cluster (emptied): the server may be stopped and started."""
    url = own_cluster.url()
    empty_team_store(url)
    monkeypatch.setenv("PLANRAG_DATABASE_URL", url)
    monkeypatch.setenv("PLANRAG_JOBS", "queue")
    monkeypatch.setenv("PLANRAG_HOME", str(tmp_path / "app"))
    monkeypatch.setattr(runs.config, "DATA_HOME", tmp_path / "app")
    yield own_cluster
    queue.close()


class Worker:
    """A ``python -m core worker`` process with its own home folder."""

    def __init__(self, tmp_path: Path, name: str, concurrency: int = 1, queues: str | None = None, **env):
        self.home = tmp_path / name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "core", "worker", "--concurrency", str(concurrency), "--name", name,
             *(["--queues", queues] if queues else [])],
            cwd=ROOT, env={**os.environ, "PLANRAG_HOME": str(self.home), **env}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.ready.wait(180), "".join(self.lines)  # a hang guard: on a loaded machine a start takes a minute

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)
            if " ready: " in line:
                self.ready.set()

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def workers(tmp_path):
    started: list[Worker] = []

    def start(name: str = "w1", **kw) -> Worker:
        started.append(Worker(tmp_path, name, **kw))
        return started[-1]

    start.started = started
    yield start
    for worker in started:
        worker.stop()


def at_once(workers, names: tuple[str, ...], **kw) -> list[Worker]:
    """Workers of ``names`` started at once (each waits for its own ready line)."""
    started: dict[str, Worker] = {}
    threads = [threading.Thread(target=lambda n=n: started.setdefault(n, workers(n, **kw))) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [started[n] for n in names]


def settings(url: str, technique: str = "iterrag", **kw) -> RunSettings:
    return RunSettings("locating", 1, "sqlite", technique, "m", base_url=url, source="demo", **kw)


def opener(url: str) -> runs.Opener:
    return runs.Opener(llm=LLMSettings(model="m", base_url=url, api_key="sk-app-only-1234567890"))


def wait_for(check, timeout: float = 60.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {timeout} s")


def status(run_id: str) -> str:
    return runs.open_store().get(run_id, events=False).status


def test_a_run_is_queued_then_driven_by_a_worker_and_followed_by_cursor(team, workers):
    stub = TurnStub([ACT, FINAL])
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert run.status() == "queued" and not run.done
    note = run.note(run.status())
    assert "No worker is running" in note and "python -m core worker" in note
    workers("w1")
    seen = []
    while not run.done:
        seen += run.events(len(seen))
        time.sleep(0.1)
    seen += run.events(len(seen))
    record = runs.open_store().get(run.run_id)
    assert record.status == "finished" and record.outcome.final_answer.endswith("krakow.")
    assert [e.kind for e in seen] == [e.kind for e in record.events] == ["thought", "action", "observation",
                                                                       "thought", "final"]
    assert "sk-app-only" not in str(record.to_dict())  # the key never left the app (the worker had none)
    assert queue.counts() == {queue.RUNS: {"succeeded": 1}}  # one job, done (kept as the queue's history)
    stub.close()


def test_a_paused_run_holds_no_worker_and_a_review_goes_on_on_a_worker(team, workers):
    stub = TurnStub([PLAN, REPLAN])
    workers("w1")
    run = runs.start(settings(stub.url, "planrag", hitl="approve-every-plan"), opener(stub.url), who=ME)
    wait_for(lambda: status(run.run_id) == "paused")
    # the job ends just after it stored the pause: from then on no job holds a worker while the run waits
    wait_for(lambda: queue.counts().get(queue.RUNS, {}).get("doing", 0) == 0, timeout=10)
    time.sleep(1)
    assert queue.counts()[queue.RUNS] == {"succeeded": 1} and status(run.run_id) == "paused"
    record = runs.open_store().get(run.run_id, events=False)
    results = []

    def review(who: str):
        try:
            runs.resume(record, Review.approve(), opener(stub.url), pause_id="p1", who=local_admin(who))
            results.append("applied")
        except PauseTaken as e:
            results.append(f"refused: {e}")

    both = [threading.Thread(target=review, args=(who,)) for who in ("ann", "bob")]
    for t in both:
        t.start()
    for t in both:
        t.join()
    assert sorted(r.split(":")[0] for r in results) == ["applied", "refused"]
    wait_for(lambda: status(run.run_id) == "finished")
    assert [r["action"] for r in runs.open_store().reviews(run.run_id)] == ["approve"]
    stub.close()


def test_stop_closes_a_queued_run_and_no_worker_drives_it_after(team, workers):
    stub = TurnStub([ACT, FINAL])
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert runs.stop(run.run_id, who=local_admin("ann")) == "stopped"
    worker = workers("w1")
    wait_for(lambda: queue.counts().get(queue.RUNS, {}).get("todo", 0) == 0)
    time.sleep(0.5)
    assert status(run.run_id) == "stopped" and not stub.calls
    assert worker.process.poll() is None


def test_a_worker_killed_mid_run_is_replaced_and_the_run_goes_on_from_its_checkpoint(team, workers):
    """SIGKILL while the worker waits for the model's second reply: another worker takes the job up once the first
    one's lease runs out (LEASE_S) and goes on from the last checkpoint; only the call in flight is asked again,
    no event is lost or doubled."""
    stub = TurnStub([ACT, FINAL], hold_at=1)
    first = workers("w1")
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert stub.held.wait(60)
    before = [e.kind for e in runs.open_store().events(run.run_id)]
    assert before == ["thought", "action", "observation"]
    first.kill()
    killed = time.monotonic()
    stub.release.set()
    workers("w2")
    wait_for(lambda: status(run.run_id) == "finished", timeout=90)
    taken_up = time.monotonic() - killed
    kinds = [e.kind for e in runs.open_store().events(run.run_id)]
    assert kinds == ["thought", "action", "observation", "thought", "final"]
    repeated = stub.repeated()
    assert list(repeated.values()) == [2] and next(iter(repeated))[1] == 1  # the call in flight, once more
    assert taken_up < queue.LEASE_S + 4 * queue.SWEEP_S + 30  # bounded by the lease (a loose bound, not a speed)
    print(f"\nrun taken up and finished {taken_up:.1f} s after its worker was killed (lease {queue.LEASE_S} s)")
    stub.close()


@pytest.mark.parametrize("fault", ["no data", "other code", "broken model"])
def test_a_worker_that_cannot_run_a_job_fails_it_with_the_reason_in_the_run(team, workers, tmp_path, fault,
                                                                            monkeypatch):
    stub = TurnStub([ACT, FINAL])
    env = {}
    s = settings(stub.url)
    if fault == "no data":
        env = {"DQA_DIR": str(tmp_path / "nowhere")}
        s = RunSettings("locating", 1, "sqlite", "iterrag", "m", base_url=stub.url, source="dqa")
    elif fault == "other code":
        monkeypatch.setattr(queue, "code_version", lambda: "0ther0code000")
    else:
        s = RunSettings("locating", 1, "sqlite", "iterrag", "m", base_url="http://127.0.0.1:9/v1", source="demo",
                        endpoint="no-such-endpoint")
    run = runs.start(s, opener(stub.url), who=ME)
    workers("w1", **env)
    wait_for(lambda: status(run.run_id) == "failed")
    record = runs.open_store().get(run.run_id)
    message = record.outcome.error
    assert message.startswith("worker ") and "could not drive the run" in message
    expected = {"no data": "nowhere", "other code": "0ther0code000", "broken model": "no-such-endpoint"}[fault]
    assert expected in message and record.events[-1].kind == "error"
    second = runs.start(settings(stub.url), opener(stub.url), who=ME)  # the worker goes on with the next job
    if fault != "other code":
        wait_for(lambda: status(second.run_id) == "finished")
    stub.close()


def test_a_job_of_a_worker_gone_without_a_trace_is_swept_and_resumed(team, workers, tmp_path):
    """The only worker vanishes mid-run (SIGKILL, no other worker up): ``core worker --sweep`` after the lease puts
    its job back in the queue, the run shows as interrupted (resumable from the page and the command line), and a
    new worker finishes it."""
    stub = TurnStub([ACT, FINAL], hold_at=1)
    first = workers("w1")
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert stub.held.wait(60)
    first.kill()
    stub.release.set()
    assert status(run.run_id) == "interrupted"  # its owner process is gone: the page offers Resume and Close
    time.sleep(queue.LEASE_S + 1)
    swept = subprocess.run([sys.executable, "-m", "core", "worker", "--sweep"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert swept.returncode == 0 and "put back in the queue: 1 job(s)" in swept.stdout, swept.stdout + swept.stderr
    assert queue.counts()[queue.RUNS].get("todo") == 1
    workers("w2")
    wait_for(lambda: status(run.run_id) == "finished", timeout=60)
    stub.close()


def test_many_workers_never_drive_one_run_twice(team, workers):
    """Four workers of two jobs at once race for 24 runs: each run is driven once, its events in order, each model
    turn asked once."""
    stub = TurnStub([ACT, FINAL], latency=0.05)
    started = [runs.start(settings(stub.url), opener(stub.url), who=ME) for _ in range(24)]
    for n in range(4):
        workers(f"w{n}", concurrency=2)
    wait_for(lambda: all(status(r.run_id) == "finished" for r in started), timeout=180, every=0.5)
    for r in started:
        assert [e.kind for e in runs.open_store().events(r.run_id)] == ["thought", "action", "observation",
                                                                      "thought", "final"]
    assert sum(stub.calls.values()) == 2 * len(started)  # every turn of every run asked exactly once
    stub.close()


def bench(url: str, name: str = "team-bench", **kw):
    from core.benchmark.runner import Bench, BenchConfig

    from core.auth.gate import asked_by

    return Bench(BenchConfig(["iterrag"], "m", base_url=url, name=name, cache=False,
                             llm_settings=LLMSettings.unattended(model="m", base_url=url),
                             asked=asked_by(ME, "benchmark_start"), **{"source": "demo", **kw}))


def test_two_commands_on_one_benchmark_share_its_items_on_the_workers(team, workers):
    from core.benchmark.results import read_results
    from core.jobs import bench_items

    stub = TurnStub([ACT, FINAL], latency=0.3)
    for n in range(2):  # a job names no server: each worker has its own
        workers(f"w{n}", concurrency=2, OPENAI_BASE_URL=stub.url)
    first, second = bench(stub.url), bench(stub.url)
    done = {}
    both = [threading.Thread(target=lambda b=b, k=k: done.setdefault(k, bench_items.drive(b)))
            for k, b in (("first", first), ("second", second))]
    for t in both:
        t.start()
    for t in both:
        t.join(120)
    results = read_results(first.directory)
    assert len(results) == len(first.work.items) == 6
    assert len({r["run_id"] for r in results}) == 6 and not first.not_run()
    assert sum(stub.calls.values()) == 2 * 6  # every item ran once, not once per command
    assert done["first"].done + done["second"].done == 12  # each command saw all six finish
    stub.close()


#: How long the tests' outage lasts: past the store pools' wait for a connection (database.WAIT_S: the store calls
#: in flight fail for it) and past the lease (every worker's heartbeat is old when the store is back). The issue's
#: 5 minutes are the long test's (LONG_OUTAGE_S): nothing in the mechanism counts the time away.
OUTAGE_S = 15
LONG_OUTAGE_S = 300


def test_an_outage_of_the_store_mid_benchmark_is_ridden_out_by_workers_and_command(own_team, workers):
    """The server (the test's own cluster) is away OUTAGE_S seconds while items are in flight on two workers: both
    workers live on, saying once that the store is away and once that it is back (no worker drops the other as
    gone), the following command waits and goes on; finished items stay, those in flight are run again, and no
    item keeps the outage as its result or its not-run record."""
    from core.benchmark.results import read_not_run, read_results
    from core.jobs import bench_items
    from core.store import database

    stub = TurnStub([ACT, FINAL], latency=1.0)
    pool = at_once(workers, ("w1", "w2"), concurrency=2, OPENAI_BASE_URL=stub.url)
    b = bench(stub.url, name="outage")
    notes: list[str] = []
    following = threading.Thread(target=lambda: bench_items.drive(b, on_note=notes.append))
    following.start()
    wait_for(lambda: len(read_results(b.directory)) >= 1, timeout=60, every=0.2)
    before = {r["run_id"] for r in read_results(b.directory)}
    assert len(before) < 6
    own_team.stop()
    time.sleep(OUTAGE_S)
    own_team.start()
    following.join(300)
    assert not following.is_alive()
    results = read_results(b.directory)
    assert before <= {r["run_id"] for r in results} and len(results) == 6, b.not_run()
    assert {r["status"] for r in results} == {"finished"} and not read_not_run(b.directory)
    for worker in pool:
        out = "".join(worker.lines)
        assert worker.process.poll() is None, out
        assert out.count("the team store cannot be reached") == 1 and out.count("the team store is back") == 1, out
        assert "ForeignKeyViolation" not in out and "Traceback" not in out, out
    assert sum("the team store cannot be reached" in n for n in notes) == 1, notes
    database.close_pools(own_team.url())
    stub.close()


def test_an_outage_of_the_store_mid_benchmark_is_ridden_out_by_a_process_running_it_in_its_threads(own_team,
                                                                                                  monkeypatch):
    """``PLANRAG_JOBS=threads`` (an app or ``core bench`` running the items itself): the server (the test's own
    cluster) is away OUTAGE_S seconds with items in flight; the benchmark says once that the store is away and once
    that it is back, holds its lock again, runs again the items the outage interrupted and ends with every item
    finished, none keeping the outage as its result or its not-run record."""
    from core.benchmark.lock import BenchBusy, DirectoryLock
    from core.benchmark.results import read_not_run, read_results
    from core.jobs import bench_items

    monkeypatch.setenv("PLANRAG_JOBS", "threads")
    stub = TurnStub([ACT, FINAL], latency=1.0)
    b = bench(stub.url, name="threads-outage", concurrency=2)
    notes: list[str] = []
    ended = []
    running = threading.Thread(target=lambda: ended.append(bench_items.drive(b, on_note=notes.append)))
    running.start()
    wait_for(lambda: len(read_results(b.directory)) >= 1, timeout=60, every=0.2)
    own_team.stop()
    time.sleep(OUTAGE_S)
    own_team.start()
    wait_for(lambda: any("the team store is back" in n for n in notes) or not running.is_alive(), timeout=300)
    if running.is_alive():  # the lock is held again: no other process runs into the benchmark meanwhile
        with pytest.raises(BenchBusy):
            DirectoryLock(b.directory).acquire()
    running.join(300)
    assert ended, notes
    results = read_results(b.directory)
    assert len(results) == 6 and {r["status"] for r in results} == {"finished"}, notes
    assert not read_not_run(b.directory) and not ended[0].errors
    assert sum("the team store cannot be reached" in n for n in notes) == 1, notes
    assert sum("the team store is back" in n for n in notes) == 1, notes
    stub.close()


def test_an_outage_of_the_store_mid_run_is_ridden_out_by_an_app_driving_it_in_its_threads(own_team, monkeypatch):
    """``PLANRAG_JOBS=threads``: the server (the test's own cluster) goes away while the app's run waits for the
    model, the reply comes during the outage; once the store is back the run goes on from its last checkpoint (the
    step the outage cut asked again) and finishes, its events neither lost nor doubled."""
    monkeypatch.setenv("PLANRAG_JOBS", "threads")
    stub = TurnStub([ACT, FINAL], hold_at=1)
    run = runs.start(settings(stub.url), opener(stub.url), who=ME)
    assert isinstance(run, runs.RunJob)
    assert stub.held.wait(60)
    own_team.stop()
    stub.release.set()  # the reply comes while the store is away
    time.sleep(OUTAGE_S)
    own_team.start()
    assert run.join(300) and run.error is None, run.error
    record = runs.open_store().get(run.run_id)
    assert record.status == "finished", record.outcome
    kinds = [e.kind for e in record.events]
    assert kinds.count("final") == 1 and kinds.count("observation") == 1, kinds
    assert list(stub.repeated().values()) == [2]  # the step the outage cut, asked again once
    stub.close()


@pytest.mark.long
@pytest.mark.waits
def test_a_five_minute_outage_is_ridden_out_by_workers_an_app_a_page_and_core_bench(own_team, workers, monkeypatch,
                                                                                     tmp_path):
    """The issue's 5 minutes (LONG_OUTAGE_S), past every wait of the pools (database.WAIT_S, RECONNECT_S, psycopg_pool's
    300 s of reconnection): the server (the test's own cluster) is away while two workers run a ``core bench``
    command's items and an app drives a run in its own threads (its model's reply coming meanwhile); a page opened
    meanwhile says so in its one line. Each waits and says so once; once the store is back the workers and the command go on (no item keeps the outage
    as its result or its not-run record), the run finishes from its last checkpoint and the page is drawn again."""
    from streamlit.testing.v1 import AppTest

    from core.benchmark.results import read_not_run, read_results
    from core.benchmark.runner import bench_home
    from tests.page_app import isolate
    from tests.test_page_store_outage import _APP_ON_HISTORY

    items, held = TurnStub([ACT, FINAL], latency=1.0), TurnStub([ACT, FINAL], hold_at=1)
    began, marks = time.monotonic(), {}
    home = tmp_path / "cli"
    command = subprocess.Popen([sys.executable, "-m", "core", "bench", "--source", "demo", "--technique", "iterrag",
                                "--llm", "m", "--base-url", items.url, "--name", "long-outage", "--no-cache"], cwd=ROOT,
                               env={**os.environ, "PLANRAG_HOME": str(home), "PLANRAG_JOBS": "queue"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said: list[str] = []
        reading = threading.Thread(target=lambda: said.extend(command.stdout), daemon=True)
        reading.start()
        pool = at_once(workers, ("w1", "w2"), concurrency=2, OPENAI_BASE_URL=items.url)  # the command starts meanwhile
        isolate(monkeypatch, tmp_path / "page")
        monkeypatch.setenv("PLANRAG_JOBS", "threads")  # the app (this process) drives its run itself
        run = runs.start(settings(held.url), opener(held.url), who=ME)
        results = bench_home(home) / "long-outage"
        wait_for(lambda: sum(items.calls.values()) >= 2, timeout=120, every=0.2)  # items in flight on the workers
        assert held.held.wait(60)
        marks["ready"] = time.monotonic() - began
        own_team.stop()
        away = time.monotonic()
        held.release.set()  # the run's reply comes while the store is away
        page = AppTest.from_string(_APP_ON_HISTORY, default_timeout=120).run()  # a page opened meanwhile
        assert not page.exception and [e.value.split(" (")[0] for e in page.error] == ["The team store cannot be reached"]
        time.sleep(max(0.0, LONG_OUTAGE_S - (time.monotonic() - away)))
        own_team.start()
        marks["back"] = time.monotonic() - began
        assert command.wait(180) == 0, "".join(said)
        marks["command ended"] = time.monotonic() - began
        reading.join(10)
        out = "".join(said)
        stored = read_results(results)
        assert len(stored) == 6 and {r["status"] for r in stored} == {"finished"} and not read_not_run(results), out
        assert out.count("the team store cannot be reached") == 1, out
        for worker in pool:
            lines = "".join(worker.lines)
            assert worker.process.poll() is None, lines
            assert lines.count("the team store cannot be reached") == 1 and lines.count("the team store is back") == 1, lines
            assert "ForeignKeyViolation" not in lines and "Traceback" not in lines, lines
        assert run.join(120) and run.error is None, run.error
        marks["run ended"] = time.monotonic() - began
        record = runs.open_store().get(run.run_id)
        assert record.status == "finished", record.outcome
        assert [e.kind for e in record.events].count("final") == 1
        page.run()
        assert not page.exception and not page.error
        marks["page drawn"] = time.monotonic() - began
        print("\n" + ", ".join(f"{k} at {v:.0f} s" for k, v in marks.items()))
    finally:
        if command.poll() is None:  # a failure above: the command is not left running
            command.kill()
    items.close()
    held.close()


def test_stop_resume_branch_and_query_approval_work_on_whichever_worker_holds_the_run(team, workers):
    stub = TurnStub([ACT, FINAL], hold_at=1)
    workers("w1")
    workers("w2")
    run = runs.start(settings(stub.url, review_queries=True), opener(stub.url), who=ME)
    wait_for(lambda: status(run.run_id) == "paused")  # the query waits for approval, held by no worker
    record = runs.open_store().get(run.run_id, events=False)
    assert record.pause["kind"] == "query"
    runs.resume(record, Review.approve(), opener(stub.url), pause_id=record.pause["id"],
                who=local_admin("ann"))
    assert stub.held.wait(60)  # on a worker again, waiting for the model's second reply
    assert runs.stop(run.run_id, who=local_admin("bob")) in ("running", "stopped")
    wait_for(lambda: status(run.run_id) == "stopped")
    stub.release.set()
    runs.proceed(runs.open_store().get(run.run_id, events=False), opener(stub.url), who=ME)
    wait_for(lambda: status(run.run_id) == "finished")
    kinds = [e.kind for e in runs.open_store().events(run.run_id)]
    assert kinds.count("final") == 1 and kinds.count("observation") == 1
    branched = runs.branch(runs.open_store().get(run.run_id), 2, opener(stub.url), note="check the totals",
                           who=local_admin("ann"))
    wait_for(lambda: status(branched.run_id) == "finished")
    child = runs.open_store().get(branched.run_id)
    assert child.parent_id == run.run_id and any(e.kind == "branch" for e in child.events)
    assert status(run.run_id) == "finished"  # the parent as it was
    stub.close()


def test_a_stopped_benchmark_cancels_its_waiting_items_and_a_rerun_runs_only_those(team, workers, tmp_path):
    """Stop while the items wait for a worker: they are taken out of the queue; the command line then runs the
    benchmark again on a worker, queueing only what has no result."""
    from core.benchmark.results import read_results
    from core.jobs import bench_items

    stub = TurnStub([ACT, FINAL])
    b = bench(stub.url, name="stopped")
    stop = threading.Event()
    notes = []
    following = threading.Thread(target=lambda: notes.append(bench_items.drive(b, stop=stop)))
    following.start()
    wait_for(lambda: queue.counts().get(queue.BENCH, {}).get("todo") == 6)
    stop.set()
    following.join(60)
    assert notes[0].stopped == "stopped" and notes[0].done == 0
    assert queue.counts()[queue.BENCH] == {"cancelled": 6}
    workers("w1", concurrency=2, OPENAI_BASE_URL=stub.url)
    env = {**os.environ, "PLANRAG_HOME": str(tmp_path / "cli")}
    cli = subprocess.run([sys.executable, "-m", "core", "bench", "--source", "demo", "--technique", "iterrag",
                          "--llm", "m", "--base-url", stub.url, "--name", "stopped", "--no-cache"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=180)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "6 to run, queued for the team's workers" in cli.stdout
    assert len(read_results(b.directory)) == 6 and sum(stub.calls.values()) == 12
    stub.close()


#: An app that records a run and queues its job, killed (SIGKILL) on the way: before the job's INSERT, or after it and
#: before the transaction's commit.
_DYING_APP = """
import os, signal, sys
from core.auth.roles import local_admin
from core.jobs import queue, runs
from core.model.run_settings import RunSettings
real = queue.defer_run

def dying(job, connection):
    if sys.argv[1] == "after the job":
        real(job, connection)
    os.kill(os.getpid(), signal.SIGKILL)

queue.defer_run = dying
runs.start(RunSettings("locating", 1, "sqlite", "iterrag", "m", source="demo"), runs.Opener(), who=local_admin())
"""


@pytest.mark.parametrize("killed", ["before the job", "after the job"])
def test_an_app_killed_between_recording_a_run_and_queueing_its_job_leaves_neither(team, killed):
    """The run and its job are stored in one transaction: an app killed between the two (or before the commit)
    leaves no run ``queued`` for ever and no job; the next start stores both."""
    import psycopg

    dead = subprocess.run([sys.executable, "-c", _DYING_APP, killed], cwd=ROOT, env={**os.environ},
                          capture_output=True, text=True, timeout=120)
    assert dead.returncode == -signal.SIGKILL, dead.stdout + dead.stderr
    with psycopg.connect(team, autocommit=True) as con:
        # the server rolls back the dead connection's transaction as soon as it sees it closed
        wait_for(lambda: not con.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                         "AND state LIKE 'idle in transaction%'").fetchone()[0], timeout=30)
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()[0] == 0
    run = runs.start(settings("http://127.0.0.1:1"), opener("http://127.0.0.1:1"), who=ME)
    assert status(run.run_id) == "queued" and queue.counts() == {queue.RUNS: {"todo": 1}}


def test_a_run_recorded_without_its_job_is_queued_by_the_sweep(team, workers):
    """The app died between recording a run ``queued`` and queueing its job: a worker's sweep queues it (with the
    model it was asked with) and drives it; a branch recorded so cannot be (its changes went with the job never
    queued): it fails, saying to branch again; so does a run no one is recorded as having asked for (the worker asks
    the gate again with who asked, issue 36)."""
    import psycopg

    from core.store.runs import new_run_id

    stub = TurnStub([ACT, FINAL])
    orphan, branch = new_run_id(), new_run_id()
    from core.auth.gate import asked_by

    unasked = new_run_id()
    store = runs.open_store()
    store.create(orphan, settings(stub.url).validate(), queued=True)
    store.record_start(orphan, ME.name, asked_by(ME, "start"))  # as runs.start records it, before the job
    store.create(branch, settings(stub.url).validate(), parent_id=orphan, branch_step=1, queued=True)
    store.create(unasked, settings(stub.url).validate(), queued=True)  # no one asked for it
    with psycopg.connect(team, autocommit=True) as con:  # recorded a lease ago (a run just recorded is left alone)
        con.execute("UPDATE runs SET updated = updated - %s", (queue.LEASE_S + 1,))
    worker = workers("w1")
    wait_for(lambda: status(orphan) == "finished" and status(branch) == status(unasked) == "failed", timeout=90)
    assert "branch the run again" in runs.open_store().get(branch).outcome.error
    assert "no one is recorded as having asked for it" in runs.open_store().get(unasked).outcome.error
    assert any(f"queued the runs ['{orphan}']" in line for line in worker.lines)
    stub.close()


def test_a_worker_without_the_dqa_data_leaves_dqa_items_to_others(team, workers, tmp_path):
    """A DQA item waits in its own queue: a worker without the DQA data takes the demo items queued after it and
    leaves it waiting (it took DQA items fast and failed them)."""
    from core.benchmark.items import Item
    from core.jobs import bench_items

    stub = TurnStub([ACT, FINAL])
    demo = bench(stub.url, name="demo-beside-dqa")
    dqa_key = Item("locating", 1, "sqlite", "iterrag", "m").key
    held = queue.enqueue_items(bench_items.config_dict(demo), [dqa_key], "dqa-elsewhere")
    worker = workers("w1", DQA_DIR=str(tmp_path / "nowhere"), OPENAI_BASE_URL=stub.url)  # a job names no server
    assert "DQA benchmark items are left to other workers" in worker.lines[0]
    progress = bench_items.drive(demo)
    assert progress.done == 6 and not progress.errors
    assert queue.job_states(list(held.values())) == {held[dqa_key]: "todo"}
    stub.close()


def test_a_generated_question_set_is_run_only_by_workers_that_hold_it(team, workers, tmp_path):
    """A generated question set's items wait in its own queue (core.jobs.routing): a worker whose DQA folder holds
    another set runs the demo items queued beside them and leaves them waiting, neither failed nor kept as not run
    (it took them and failed them); a worker that holds the set runs them. A job of that set found in another
    set's queue is handed back to its own, not failed, and run there."""
    from core.benchmark.results import read_not_run, read_results
    from core.jobs import bench_items, routing
    from sims.generator import Knobs, generate

    for name in ("alpha", "beta"):
        generate(Knobs("locating", 2, seed=1), tmp_path / name, name=name)
    stub = TurnStub([ACT, FINAL])
    alpha = bench(stub.url, name="on-alpha", source="dqa", scenario="locating", db="sqlite", questions="1-2",
                  dqa_root=tmp_path / "alpha")
    assert alpha.set_name == "alpha"
    held = queue.enqueue_items(bench_items.config_dict(alpha), [i.key for i in alpha.pending], "on-alpha")
    assert queue.counts() == {routing.set_queue("alpha"): {"todo": 2}}
    on_beta = workers("w-beta", DQA_DIR=str(tmp_path / "beta"), OPENAI_BASE_URL=stub.url)  # a job names no server
    assert f"from runs, bench, {routing.set_queue('beta')} " in on_beta.lines[-1]
    assert bench_items.drive(bench(stub.url, name="demo-beside-alpha")).done == 6  # the demo items ran on w-beta
    assert set(queue.job_states(list(held.values())).values()) == {"todo"}  # the set's items left waiting
    assert not read_not_run(alpha.directory) and not read_results(alpha.directory)
    workers("w-alpha", DQA_DIR=str(tmp_path / "alpha"), OPENAI_BASE_URL=stub.url)
    progress = bench_items.drive(alpha)
    assert progress.done == 2 and not progress.errors and not read_not_run(alpha.directory)
    assert {r["set"] for r in read_results(alpha.directory)} == {"alpha"}
    # a job of beta in alpha's queue (queued by hand, as no app routes it so): handed back to beta's, run by w-beta
    beta = bench(stub.url, name="on-beta", source="dqa", scenario="locating", db="sqlite", questions="1",
                 dqa_root=tmp_path / "beta")
    [key] = [i.key for i in beta.pending]
    astray = queue.app().configure_task("bench_item", queue=routing.set_queue("alpha")).defer(
        v=1, config=bench_items.config_dict(beta), key=key, code=queue.code_version())
    wait_for(lambda: len(read_results(beta.directory)) == 1, timeout=90, every=0.5)
    assert queue.job_states([astray]) == {astray: "succeeded"} and not read_not_run(beta.directory)
    assert any(f"handed back to the queue {routing.set_queue('beta')}" in line for line in workers_lines(workers))
    stub.close()


def workers_lines(workers) -> list[str]:
    """Every line the workers started by the ``workers`` fixture printed."""
    return [line for w in workers.started for line in w.lines]


def cli(*args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120)


def test_an_administrator_sees_each_worker_its_jobs_health_and_prunes_old_jobs(team, workers, monkeypatch):
    """``worker --status`` lists each worker (name, host, pid, queues, since, jobs running, last heartbeat) and the
    waiting and failed jobs; ``worker --health NAME`` and ``db check`` answer 0 or 1 for a supervisor; each job is
    one line in its worker's log; ``db prune`` deletes the jobs finished before the retention."""
    import psycopg

    stub = TurnStub([ACT, FINAL])
    # the workers keep what they finished ten years: their own prune, 10 s after they start, must not take the jobs
    # the test makes 40 days old before `db prune` (30 days) does
    monkeypatch.setenv(queue.RETENTION_ENV, "3650")
    w1 = workers("w1", concurrency=2)
    done = runs.start(settings(stub.url), opener(stub.url), who=ME)
    wait_for(lambda: status(done.run_id) == "finished")
    monkeypatch.setattr(queue, "code_version", lambda: "0ther0code000")
    failed = runs.start(settings(stub.url), opener(stub.url), who=ME)  # queued by other code: it fails on the worker
    wait_for(lambda: status(failed.run_id) == "failed")
    w1.stop()
    waiting = runs.start(settings(stub.url), opener(stub.url), who=ME)  # no worker up: it waits
    w2 = workers("w2", queues="bench")  # the run waits: no worker takes runs
    shown = cli("worker", "--status")
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.strip().startswith("worker w2:"))
    assert f"pid {w2.process.pid}" in line and "queues bench" in line and "since " in line
    assert "job(s) running" in line and "last heartbeat" in line and "host " in line
    assert "workers up: 1" in shown.stdout and f"run {failed.run_id}" in shown.stdout
    assert "worker w1" not in shown.stdout  # stopped: unregistered
    assert "waiting: 1 job(s), the oldest queued" in shown.stdout and status(waiting.run_id) == "queued"
    assert cli("worker", "--health", "w2").returncode == 0
    unhealthy = cli("worker", "--health", "w1")
    assert unhealthy.returncode == 1 and "not registered" in unhealthy.stdout
    assert cli("db", "check").returncode == 0
    away = cli("db", "check", PLANRAG_DATABASE_URL="postgresql://postgres@127.0.0.1:1/none")
    assert away.returncode == 1 and away.stdout.startswith("unhealthy: ")
    log = "".join(w1.lines)
    assert f"drive_run run {done.run_id}: succeeded (finished) in " in log
    assert f"drive_run run {failed.run_id}: failed (" in log and "0ther0code000" in log and "Traceback" not in log
    with psycopg.connect(team, autocommit=True) as con:  # the two finished jobs, 40 days old
        finished = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('succeeded', 'failed')"
        # the worker says a job's outcome before procrastinate stores it: wait for both to be stored
        wait_for(lambda: con.execute(finished).fetchone()[0] == 2)
        con.execute("UPDATE procrastinate_events SET at = at - interval '40 days' WHERE job_id IN (SELECT id FROM "
                    "procrastinate_jobs WHERE status IN ('succeeded', 'failed'))")
    pruned = cli("db", "prune", **{queue.RETENTION_ENV: "30"})
    assert pruned.returncode == 0 and "pruned 2 job(s)" in pruned.stdout, pruned.stdout + pruned.stderr
    assert queue.counts()[queue.RUNS] == {"todo": 1}
    stub.close()


def test_a_worker_caught_between_registering_and_describing_itself_is_listed_unnamed(team):
    """procrastinate registers a worker a moment before the worker writes its queue_workers row: in between,
    ``queue.status`` lists it with no name and ``worker --status`` says ``(unnamed)`` (a supervisor's CI run once
    caught this moment)."""
    import psycopg

    with psycopg.connect(team, autocommit=True) as con:
        con.execute("INSERT INTO procrastinate_workers DEFAULT VALUES")
    [starting] = queue.status()["workers"]
    assert starting["name"] is None and starting["pid"] is None and starting["heartbeat_s"] <= queue.LEASE_S
    shown = cli("worker", "--status")
    assert shown.returncode == 0 and "workers up: 1" in shown.stdout and "worker (unnamed): host -" in shown.stdout


def test_the_settings_page_shows_the_admin_each_worker_and_the_failed_jobs(team, workers, monkeypatch, tmp_path):
    from tests.page_app import isolate, open_page

    stub = TurnStub([ACT, FINAL])
    workers("w1", queues="runs")
    monkeypatch.setattr(queue, "code_version", lambda: "0ther0code000")
    failed = runs.start(settings(stub.url), opener(stub.url), who=ME)  # queued by other code: it fails on the worker
    wait_for(lambda: status(failed.run_id) == "failed")
    isolate(monkeypatch, tmp_path / "page")
    read = []
    monkeypatch.setattr(queue, "status", lambda status=queue.status: read.append(1) or status())
    at = open_page("pages/settings.py", question_ref=None)
    assert not at.exception and not at.dataframe and not read  # closed, the queue's expander reads and draws nothing
    at.session_state["settings_queue"] = True  # the admin opens it (pages/settings.py's QUEUE_OPEN)
    at.run()
    assert not at.exception and read
    shown = next(d.value for d in at.dataframe if "jobs running" in d.value.columns)
    assert list(shown["worker"]) == ["w1"] and list(shown["queues"]) == ["runs"] and list(shown["up"]) == [True]
    assert list(next(d.value for d in at.dataframe if "run or item" in d.value.columns)["run or item"]) == [
        f"run {failed.run_id}"]
    stub.close()


def test_supervised_processes_start_the_app_and_workers_and_a_worker_killed_comes_back(team, tmp_path):
    """deploy/supervise.sh (supervisor, deploy/supervisord.conf): the app and two workers start; a worker killed
    (SIGKILL) is started again under its name; the app answers its health check; all stop with supervisor."""
    import socket
    import urllib.request

    pytest.importorskip("supervisor", reason="supervisor is not installed (pip install -r requirements.txt)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PLANRAG_RUN_DIR": str(tmp_path / "run"), "PLANRAG_WORKERS": "2",
           "PLANRAG_PORT": str(port), "PLANRAG_PYTHON": sys.executable, "PLANRAG_HOME": str(tmp_path / "home")}
    ctl = [sys.executable, "-m", "supervisor.supervisorctl", "-c", str(ROOT / "deploy" / "supervisord.conf")]
    supervisor = subprocess.Popen(["sh", str(ROOT / "deploy" / "supervise.sh"), "-n"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    last: set[int] = set()
    try:
        def up() -> dict[str, int]:
            # a worker registered but not yet described (its queue_workers row comes a moment later) has no name
            return {w["name"]: w["pid"] for w in queue.status()["workers"]
                    if w["name"] and w["heartbeat_s"] <= queue.LEASE_S}

        first = wait_for(lambda: len(found := up()) == 2 and found, timeout=120, every=0.5)
        name, pid = sorted(first.items())[0]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: up().get(name) not in (None, pid), timeout=120, every=0.5)
        health = cli("worker", "--health", name)
        assert health.returncode == 0 and f"worker {name}" in health.stdout, health.stdout
        wait_for(lambda: _answers(f"http://127.0.0.1:{port}/_stcore/health", urllib.request), timeout=120, every=0.5)
        last = set(up().values())  # the workers running now (the one killed may still beat within its lease)
    finally:
        subprocess.run([*ctl, "shutdown"], env=env, capture_output=True, timeout=120)
        supervisor.wait(120)
    for pid in last:  # stopped with supervisor, and unregistered on the way out
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not last & {w["pid"] for w in queue.status()["workers"]}


def _answers(url: str, request) -> bool:
    try:
        with request.urlopen(url, timeout=5) as reply:
            return reply.read().decode() == "ok"
    except OSError:
        return False


def test_rate_and_items_at_once_of_a_command_are_refused_with_the_queue(team):
    for extra in (["--rpm", "30"], ["--concurrency", "4"]):
        refused = cli("bench", "--source", "demo", "--technique", "iterrag", "--llm", "m", *extra)
        assert refused.returncode == 2 and "each worker's" in refused.stderr, refused.stderr


def test_a_replay_travels_by_name_to_a_worker_where_its_path_is_not(team, workers):
    """A run on a replay named by a path of another machine (or checkout): the worker finds the transcript by its
    name in its own replay folders (assets/replays, PLANRAG_REPLAYS) and drives the run to its end."""
    from core.llm.client import REPLAY_DIR, replay_path

    elsewhere = "replay:/on/another/machine/demo_locating_1_sql_iterrag.json"
    assert replay_path(elsewhere) == REPLAY_DIR / "demo_locating_1_sql_iterrag.json"
    assert str(replay_path("replay:/on/another/machine/none.json")) == "/on/another/machine/none.json"
    run = runs.start(RunSettings("locating", 1, "sqlite", "iterrag", elsewhere, source="demo"), runs.Opener(),
                     who=ME)
    workers("w1")
    wait_for(lambda: status(run.run_id) in ("finished", "failed"), timeout=90)
    record = runs.open_store().get(run.run_id)
    assert record.status == "finished", record.outcome
