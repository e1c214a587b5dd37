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


class Worker:
    """A ``python -m core worker`` process with its own home folder."""

    def __init__(self, tmp_path: Path, name: str, concurrency: int = 1, **env):
        self.home = tmp_path / name
        self.process = subprocess.Popen(
            [sys.executable, "-m", "core", "worker", "--concurrency", str(concurrency), "--name", name],
            cwd=ROOT, env={**os.environ, "PLANRAG_HOME": str(self.home), **env}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.ready.wait(60), "".join(self.lines)

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

    yield start
    for worker in started:
        worker.stop()


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
    assert record.status == "finished" and record.outcome["final_answer"].endswith("krakow.")
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
    message = record.outcome["error"]
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

    return Bench(BenchConfig(["iterrag"], "m", source="demo", base_url=url, name=name, cache=False,
                             llm_settings=LLMSettings.unattended(model="m", base_url=url), **kw))


def test_two_commands_on_one_benchmark_share_its_items_on_the_workers(team, workers):
    from core.benchmark.results import read_results
    from core.jobs import bench_items

    stub = TurnStub([ACT, FINAL], latency=0.3)
    for n in range(2):
        workers(f"w{n}", concurrency=2)
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


@pytest.mark.skipif(not os.path.exists("/usr/bin/pg_ctlcluster"), reason="PostgreSQL is not this machine's "
                    "(pg_ctlcluster): the restart test restarts the local server")
def test_postgresql_restarted_mid_benchmark_loses_no_finished_item(team, workers):
    """The server restarts while items are in flight: workers and the following command reconnect by themselves,
    finished items stay, those in flight are tried once more."""
    from core.benchmark.results import read_results
    from core.jobs import bench_items
    from core.store import database

    stub = TurnStub([ACT, FINAL], latency=1.0)
    workers("w1", concurrency=2)
    b = bench(stub.url, name="restarted")
    following = threading.Thread(target=lambda: bench_items.drive(b))
    following.start()
    wait_for(lambda: len(read_results(b.directory)) >= 2, timeout=60, every=0.2)
    before = {r["run_id"] for r in read_results(b.directory)}
    version, cluster = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout.split()[:2]
    subprocess.run(["pg_ctlcluster", version, cluster, "restart"], check=True, timeout=120)
    database.close_pools()  # this process's pools: their connections died with the server
    following.join(180)
    assert not following.is_alive()
    results = read_results(b.directory)
    assert before <= {r["run_id"] for r in results} and len(results) == 6, b.not_run()
    stub.close()


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
    workers("w1", concurrency=2)
    env = {**os.environ, "PLANRAG_HOME": str(tmp_path / "cli")}
    cli = subprocess.run([sys.executable, "-m", "core", "bench", "--source", "demo", "--technique", "iterrag",
                          "--llm", "m", "--base-url", stub.url, "--name", "stopped", "--no-cache"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=180)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "6 to run, queued for the team's workers" in cli.stdout
    assert len(read_results(b.directory)) == 6 and sum(stub.calls.values()) == 12
    stub.close()
