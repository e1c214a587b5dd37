"""Run control (issue 11): reviews bound to their pause (also across processes), reviewer and time, Stop of a
run in flight, interrupted runs (owner gone) resumed or closed, query review, branching from a step."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from core.model.run_settings import Review, RunSettings
from core.agents.runtime import RunNotPaused
from core.agents.control import RunControl, RunStopped
from core.llm.client import ChatLLM
from core.store.runs import PauseTaken, RunStore
from tests.test_agents_runtime import ACT, FINAL, PLAN, FakeBackend, make_runtime, replay, settings

ROOT = Path(__file__).resolve().parent.parent
REPLAN = "Re-plan: Y\nPlan: [Step 1: compare, Step 2: answer]\nCurrent step: Step 1: compare\n" + ACT
PLANNED = [PLAN, REPLAN, "Re-plan: N\n" + FINAL]
pytestmark = pytest.mark.usefixtures("store_engine")  # every test on both engines (conftest)


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def paused_run(home, tmp_path, **kw):
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, PLANNED), "planrag", hitl="approve-every-plan", **kw))
    assert result.status == "paused" and result.pause.id == "p1"
    return runtime, result


# ------------------------------------------------------------------------------------------ pause identity

def test_a_review_names_its_pause_and_a_stale_one_is_refused_with_the_state(home, tmp_path):
    runtime, first = paused_run(home, tmp_path)
    second = runtime.resume(first.run_id, Review.approve(), pause_id="p1")
    assert second.status == "paused" and second.pause.id == "p2" and second.pause.kind == "replan"
    # a second tab still showing p1 approves it: refused, the current pause named, the run unchanged
    with pytest.raises(RunNotPaused, match=r"pause p1 of run \w+ is no longer current: local operator reviewed it "
                                           r"\(approve\) at .*; the run now waits at pause p2 \(replan\)"):
        runtime.resume(first.run_id, Review.reject("no"), pause_id="p1")
    assert runtime.result(first.run_id).pause.id == "p2"
    done = runtime.resume(first.run_id, Review.approve(note="fine", reviewer="ana"), pause_id="p2")
    assert done.status == "finished"
    with pytest.raises(RunNotPaused, match="pause p2 .* no longer current.*the run is finished"):
        runtime.resume(first.run_id, Review.approve(), pause_id="p2")
    reviews = runtime.store.reviews(first.run_id)
    assert [(r["pause_id"], r["kind"], r["action"]) for r in reviews] == [("p1", "plan", "approve"),
                                                                          ("p2", "replan", "approve")]
    assert reviews[1]["reviewer"] == "ana" and reviews[0]["reviewer"] == "local operator"  # by default
    events = runtime.store.get(first.run_id).events
    assert [e.reviewer for e in events if e.kind == "plan" and e.origin == "analyst"][1] == "ana"


def test_racing_processes_claim_one_pause_exactly_once(tmp_path):
    """Two processes released together claim the same pause, for 10 runs: always one claim and one refusal. The
    same two processes race for every run (a barrier releases them each time), so the test waits on no start-up."""
    from tests.claim_worker import claim

    store = RunStore(tmp_path / "runs.sqlite")
    ctx = multiprocessing.get_context("spawn")
    run_ids = [f"run{i}" for i in range(10)]
    for i, run_id in enumerate(run_ids):
        store.create(run_id, RunSettings("locating", 1, "sqlite", "planrag", "x"))
        store.set_pause(run_id, {"kind": "plan", "plan": ["a"]}, interrupt_id=f"i{i}")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [ctx.Process(target=claim, args=(str(store.path), run_ids, barrier, results)) for _ in range(2)]
    for w in workers:
        w.start()
    outcomes: dict[str, list[str]] = {}
    for _ in range(2 * len(run_ids)):
        run_id, outcome = results.get(timeout=120)
        outcomes.setdefault(run_id, []).append(outcome)
    for w in workers:
        w.join(60)
    for run_id in run_ids:
        outcome = sorted(outcomes[run_id])
        assert outcome[0] == "claimed" and outcome[1].startswith(f"refused: pause p1 of run {run_id} is no longer")
        assert len(store.reviews(run_id)) == 1


def core(home: Path, *args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PLANRAG_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "core", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, **kw)


def test_two_cli_approvals_started_together_one_applies_one_is_refused(tmp_path, dqa_dir):
    from tests.test_agents_dqa import TRANSCRIPTS, backend

    home = tmp_path / "home"
    transcript = TRANSCRIPTS / "locating_cypher_planrag.json"
    start = core(home, "run", "--scenario", "locating", "--question", "1", "--db", backend("cypher"),
                 "--technique", "planrag", "--llm", f"replay:{transcript}", "--hitl", "approve-replans")
    out, err = start.communicate(timeout=120)
    assert start.returncode == 3, err
    run_id = out.split("paused: run ")[1].split()[0]
    hint = out.strip().splitlines()[-1]  # the resume hint comes after the plan, on stdout
    assert hint.startswith(f"resume with: python -m core run --resume {run_id} --pause p1 --approve")
    # without a pause named, a script is told which one to name
    unnamed = core(home, "run", "--resume", run_id, "--approve")
    assert unnamed.wait(60) == 1 and "--pause p1" in unnamed.stderr.read()
    racers = [core(home, "run", "--resume", run_id, "--pause", "p1", "--approve", "--reviewer", f"r{i}")
              for i in range(2)]
    done = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in racers]
    codes = sorted(code for code, _, _ in done)
    assert codes == [0, 1], done
    refused = next(err for code, _, err in done if code == 1)
    assert f"pause p1 of run {run_id} is no longer current" in refused
    store = RunStore(home / "runs.sqlite")
    assert store.get(run_id, events=False).status == "finished" and len(store.reviews(run_id)) == 1
    events = store.get(run_id).events
    assert sum(1 for e in events if e.kind == "plan" and e.origin == "analyst") == 1


# ------------------------------------------------------------------------------------------ stop

class Hanging(GenericFakeChatModel):
    """A model whose call after ``answers`` hangs until ``release`` is set (a silent server)."""

    release: threading.Event
    answers: int = 0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.answers <= 0:
            self.release.wait(60)
        self.answers -= 1
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_stop_ends_a_run_waiting_for_the_model_and_it_can_be_resumed(home, tmp_path):
    release = threading.Event()

    def opener(spec, llm_settings, skip=0):  # a new connection to the server each time the run is driven
        model = Hanging(messages=iter([ACT, FINAL][skip:]), release=release, answers=1 - skip)
        return ChatLLM(model, "hanging", estimate_usage=True)

    runtime = make_runtime(home, llm_opener=opener)
    events, result = [], {}
    worker = threading.Thread(target=lambda: result.update(r=runtime.start(
        settings("stub", "iterrag"), on_event=events.append, run_id="stopme")))
    worker.start()
    while not any(e.kind == "observation" for e in events):  # the second call now hangs
        worker.join(0.05)
    assert runtime.stop("stopme") == "running"
    worker.join(30)
    assert not worker.is_alive() and result["r"].status == "stopped"
    trace = runtime.store.get("stopme").events
    assert [e.kind for e in trace] == ["thought", "action", "observation", "error"]
    assert trace[-1].error_kind == "stopped"
    release.set()  # the server answers again: the stopped run goes on from its last checkpoint
    done = runtime.proceed("stopme")
    assert done.status == "finished" and done.outcome.decision == "krakow"


class TimingOut(GenericFakeChatModel):
    """A silent server: each attempt (counted) hangs until ``release`` is set, then times out."""

    release: threading.Event
    attempts: Any  # the test's list itself (a list field would be copied)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        import httpx
        import openai

        self.attempts.append(1)
        self.release.wait(60)
        raise openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions"))


def test_a_stopped_run_makes_no_further_attempt_of_its_model_call(home, tmp_path):
    """The attempt in flight cannot be interrupted; once it ends, the abandoned call does not retry."""
    release, attempts = threading.Event(), []

    def opener(spec, llm_settings, skip=0):
        model = TimingOut(messages=iter([]), release=release, attempts=attempts)
        return ChatLLM(model, "silent", max_retries=3, sleep=lambda s: None)

    runtime = make_runtime(home, llm_opener=opener)
    worker = threading.Thread(target=runtime.start, args=(settings("stub", "iterrag"),), kwargs={"run_id": "quiet"})
    worker.start()
    while not attempts and worker.is_alive():
        worker.join(0.05)
    runtime.stop("quiet")
    worker.join(30)
    assert runtime.store.get("quiet", events=False).status == "stopped"
    release.set()  # the attempt under way times out now
    for abandoned in [t for t in threading.enumerate() if t.name == "call-quiet"]:
        abandoned.join(30)
    assert len(attempts) == 1  # no retry of a stopped run's call (3 were allowed)


def test_stop_asked_in_the_store_reaches_the_owner_and_cancels_the_query(home, tmp_path):
    cancelled = threading.Event()

    class Slow(FakeBackend):
        def query(self, text, **kw):
            cancelled.wait(60)
            return super().query(text, **kw)

        def cancel(self):
            cancelled.set()

    runtime = make_runtime(home, Slow())
    result = {}
    worker = threading.Thread(target=lambda: result.update(r=runtime.start(
        settings(replay(tmp_path, [ACT, FINAL])), run_id="q")))
    worker.start()
    store = RunStore(home / "runs.sqlite")  # as another process would
    while not any(e.kind == "action" for e in (store.get("q").events if store.list(limit=None) else [])):
        worker.join(0.05)
    assert store.request_stop("q") == "running"
    worker.join(30)
    assert result["r"].status == "stopped" and cancelled.is_set()


def test_a_paused_run_is_closed_by_stop(home, tmp_path):
    runtime, first = paused_run(home, tmp_path)
    assert runtime.stop(first.run_id) == "stopped"
    with pytest.raises(RunNotPaused, match="the run is stopped"):
        runtime.resume(first.run_id, Review.approve(), pause_id="p1")
    again = runtime.proceed(first.run_id)  # resumable: it waits at its pause again, same id
    assert again.status == "paused" and again.pause.id == "p1"


def test_run_control_call_returns_raises_or_stops():
    control = RunControl(None, "x")
    assert control.call(lambda a, b=0: a + b, 1, b=2) == 3
    with pytest.raises(ZeroDivisionError):
        control.call(lambda: 1 / 0)
    threading.Timer(0.05, control.stop).start()
    with pytest.raises(RunStopped):
        control.call(threading.Event().wait, 60)
    with pytest.raises(RunStopped):
        control.check()


# ------------------------------------------------------------------------------------------ orphans

def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_run_whose_process_died_is_interrupted_then_resumed_or_closed(home, tmp_path):
    runtime = make_runtime(home)
    done = runtime.start(settings(replay(tmp_path, [ACT, FINAL])))
    store = runtime.store
    for run_id in ("a", "b"):
        store.create(run_id, RunSettings("locating", 1, "sqlite", "iterrag", "x"))
    with store.db.transaction() as con:
        con.execute("UPDATE runs SET owner_pid = ? WHERE id = 'a'", (dead_pid(),))
        con.execute("UPDATE runs SET heartbeat = heartbeat - 3600 WHERE id = 'b'")  # alive pid, stale heartbeat
    assert {r.id: r.status for r in store.list()} == {"a": "interrupted", "b": "interrupted", done.run_id: "finished"}
    assert store.request_stop("a") == "stopped"  # closed
    with pytest.raises(PauseTaken, match="cannot be resumed: it is finished$"):
        store.claim_run(done.run_id, ("interrupted", "stopped"))
    assert store.claim_run("b", ("interrupted", "stopped")) == "interrupted"  # the first of two racers
    with pytest.raises(PauseTaken, match=r"cannot be resumed: it is running \(another process drives it\)"):
        store.claim_run("b", ("interrupted", "stopped"))  # the second: told why, not "not waiting for a review"


def test_reads_show_an_orphaned_run_interrupted_without_writing_it(home):
    """get and list are pure reads (issue 38): an orphaned running run reads as interrupted, in every filter, while
    its stored row is left as it was until the sweep (detect_orphans) stores it."""
    store = RunStore(home / "runs.sqlite")
    for run_id in ("a", "b"):
        store.create(run_id, RunSettings("locating", 1, "sqlite", "iterrag", "x"))
    with store.db.transaction() as con:
        con.execute("UPDATE runs SET owner_pid = ? WHERE id = 'a'", (dead_pid(),))

    def stored():
        with store.db.transaction() as con:
            return con.execute("SELECT id, status, updated FROM runs ORDER BY id").fetchall()

    before = stored()
    assert store.get("a").status == "interrupted" and store.get("b").status == "running"
    assert {r.id: r.status for r in store.list()} == {"a": "interrupted", "b": "running"}
    assert [r.id for r in store.list(status="interrupted")] == ["a"]
    assert [r.id for r in store.list(status="running")] == ["b"]
    assert [r.id for r in store.list(limit=1, status="interrupted")] == ["a"]
    assert stored() == before  # nothing written
    assert store.detect_orphans() == ["a"]
    assert [tuple(r[:2]) for r in stored()] == [("a", "interrupted"), ("b", "running")]


def test_a_run_killed_mid_resume_is_interrupted_and_goes_on_with_its_review(tmp_path):
    """A resume process dies in the LLM call after the review: the run is interrupted, and resuming it applies
    that review (not a second one), from its last checkpoint."""
    from tests.stub_server import StubServer, completion, send_json

    replies, hang, asked = iter(PLANNED), threading.Event(), threading.Event()

    def chat(handler, body):
        if hang.is_set():  # a silent server: the process asking is killed while it waits
            asked.set()
            while hang.is_set():
                time.sleep(0.05)
            return
        send_json(handler, 200, completion(next(replies)))

    server = StubServer({"POST /v1/chat/completions": chat})  # an OpenAI-like server: no tokenize, no /api/show
    url = server.url
    home = tmp_path / "home"
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from tests.test_agents_runtime import make_runtime, settings\n"
              "from core.model.run_settings import Review\n"
              "import core.llm.client as llm\n"
              f"rt = make_runtime({str(home)!r}, llm_settings=llm.LLMSettings(model='m', base_url={url!r}))\n"
              "if sys.argv[1] == 'start':\n"
              "    print(rt.start(settings('m', 'planrag', hitl='approve-every-plan')).run_id)\n"
              "elif sys.argv[1] == 'resume':\n"
              "    rt.resume(sys.argv[2], Review.approve(reviewer='first'), pause_id='p1')\n"
              "else:\n"
              "    print(rt.proceed(sys.argv[2]).status)\n")

    def run(*a):
        return subprocess.run([sys.executable, "-c", script, *a], capture_output=True, text=True, timeout=120)

    run_id = run("start").stdout.strip()
    hang.set()
    resume = subprocess.Popen([sys.executable, "-c", script, "resume", run_id])
    store = RunStore(home / "runs.sqlite")
    # killed in the LLM call after the review's step (not at a moment found by polling the store: killed after a
    # step's writes, before its checkpoint, is the next test's case)
    while not asked.wait(0.1):
        assert resume.poll() is None
    assert store.reviews(run_id) and store.get(run_id).events[-1].kind == "observation"
    resume.kill()
    resume.wait()
    record = store.get(run_id)
    assert record.status == "interrupted"
    with pytest.raises(RunNotPaused, match="pause p1 .* no longer current: first reviewed it "
                                           r"\(approve\).*the run is interrupted \(resume it"):
        make_runtime(home).resume(run_id, Review.approve(), pause_id="p1")
    hang.clear()
    assert run("proceed", run_id).stdout.strip() == "paused"  # at the agent's re-plan, as if never killed
    record = store.get(run_id)
    assert record.pause["id"] == "p2" and record.pause["kind"] == "replan"
    assert [r["reviewer"] for r in store.reviews(run_id)] == ["first"]
    assert [e.status for e in record.events if e.kind == "plan" and e.origin == "analyst"] == ["approved"]
    server.close()


@pytest.mark.parametrize("writes", [1, 2, 3])
def test_a_run_killed_between_a_steps_writes_and_its_checkpoint_goes_on(home, tmp_path, writes):
    """Issue 28 (a flaky test's cause): a resume process killed after LangGraph saved a step's writes but before
    the checkpoint after them leaves no next node, only that step with its result; resuming read this as "ended"
    and stored the run as running with no process driving it. Now the step's writes are applied and the run goes
    on to its re-plan, with the one review."""
    _, first = paused_run(home, tmp_path)
    saver = ("from langgraph.checkpoint.postgres import PostgresSaver as Saver\n" if os.environ.get(
        "PLANRAG_DATABASE_URL") else "from langgraph.checkpoint.sqlite import SqliteSaver as Saver\n")
    script = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r})\n"
              + saver +
              "from tests.test_agents_runtime import make_runtime\n"
              "from core.model.run_settings import Review\n"
              "saved, put_writes = [], Saver.put_writes\n"
              "def killed_after(self, *a, **kw):\n"
              "    put_writes(self, *a, **kw)\n"
              "    saved.append(1)\n"
              f"    if len(saved) == {writes}:\n"
              "        os._exit(9)\n"
              "Saver.put_writes = killed_after\n"
              f"make_runtime({str(home)!r}).resume({first.run_id!r}, Review.approve(reviewer='first'), "
              "pause_id='p1')\n")
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    runtime = make_runtime(home)
    assert runtime.result(first.run_id).status == "interrupted"
    result = runtime.proceed(first.run_id)
    assert result.status == "paused" and (result.pause.id, result.pause.kind) == ("p2", "replan")
    assert [r["reviewer"] for r in runtime.store.reviews(first.run_id)] == ["first"]


# ------------------------------------------------------------------------------------------ query review

def test_every_query_waits_for_approval_edit_or_rejection(home, tmp_path):
    runtime = make_runtime(home, backend := FakeBackend())
    # three different queries (the loop guard would not run a repeated one, nor pause for it)
    replies = [ACT, ACT.replace("trade_node FROM", "local_value FROM"), ACT.replace("trade_node FROM", "ingoing FROM"),
               FINAL]
    first = runtime.start(settings(replay(tmp_path, replies), review_queries=True))
    assert first.status == "paused" and first.pause.kind == "query"
    assert first.pause.query == "SELECT trade_node FROM trade_node" and first.pause.language == "sql"
    assert backend.queries == []  # nothing ran before the analyst saw it
    second = runtime.resume(first.run_id, Review.approve(), pause_id="p1")
    assert backend.queries == ["SELECT trade_node FROM trade_node"] and second.pause.id == "p2"
    with pytest.raises(ValueError, match="needs a note"):
        runtime.resume(first.run_id, Review.reject(""), pause_id="p2")
    third = runtime.resume(first.run_id, Review.reject("that column is useless"), pause_id="p2")
    assert len(backend.queries) == 1 and third.pause.id == "p3"
    done = runtime.resume(first.run_id, Review.edit_query("SELECT 42 FROM trade_node"), pause_id="p3")
    assert done.status == "finished" and backend.queries[-1] == "SELECT 42 FROM trade_node"
    events = runtime.store.get(first.run_id).events
    assert [e.status for e in events if e.kind == "query_review"] == ["approved", "rejected", "edited"]
    rejected = next(e for e in events if e.kind == "observation" and e.error_kind == "rejected")
    assert "that column is useless" in rejected.text
    # it survives a restart: a fresh runtime resumes a query pause
    again = make_runtime(home).start(settings(replay(tmp_path, [ACT, FINAL]), review_queries=True))
    assert make_runtime(home).resume(again.run_id, Review.approve(), pause_id="p1").status == "finished"


# ------------------------------------------------------------------------------------------ branching

def test_branch_before_a_step_with_a_new_plan_leaves_the_parent_as_it_was(home, tmp_path):
    runtime = make_runtime(home)
    parent = runtime.start(settings(replay(tmp_path, PLANNED), "planrag"))
    assert parent.status == "finished"
    before = runtime.store.get(parent.run_id).to_dict()
    branch = runtime.branch(parent.run_id, 2, plan=["count the nodes", "answer"], note="be quick",
                            reviewer="ana")
    assert branch.status == "finished" and branch.run_id != parent.run_id
    assert runtime.store.get(parent.run_id).to_dict() == before
    record = runtime.store.get(branch.run_id)
    assert (record.parent_id, record.branch_step) == (parent.run_id, 2)
    mark = next(e for e in record.events if e.kind == "branch")
    assert (mark.parent, mark.at_step, mark.plan, mark.note, mark.reviewer) == (
        parent.run_id, 2, ["count the nodes", "answer"], "be quick", "ana")
    kept = record.events[:record.events.index(mark)]
    assert [e.to_dict() for e in kept] == [e for e in before["events"] if e["step"] < 2]
    told = runtime.transcript(branch.run_id)
    said = next(m["content"] for m in told if "count the nodes" in m["content"])  # before step 2's call
    assert "Note from the analyst: be quick" in said and told.index(next(m for m in told if m["content"] == said)) == 3
    assert [r.id for r in runtime.store.branches(parent.run_id)] == [branch.run_id]
    with pytest.raises(ValueError, match="has no step 9 to branch from"):
        runtime.branch(parent.run_id, 9, note="x")
    with pytest.raises(ValueError, match="changes something"):
        runtime.branch(parent.run_id, 1)


def test_branch_at_a_query_runs_the_edited_query(home, tmp_path):
    runtime = make_runtime(home, backend := FakeBackend())
    parent = runtime.start(settings(replay(tmp_path, [ACT, FINAL])))
    branch = runtime.branch(parent.run_id, 1, query="SELECT 7 FROM trade_node")
    assert branch.status == "finished" and backend.queries[-1] == "SELECT 7 FROM trade_node"
    kinds = [e.kind for e in runtime.store.get(branch.run_id).events]
    assert kinds == ["thought", "action", "branch", "observation", "thought", "final"]


def test_cli_branch_prints_the_new_run_and_stop_closes_a_paused_run(tmp_path, dqa_dir):
    from tests.test_agents_dqa import TRANSCRIPTS, backend

    home = tmp_path / "home"
    transcript = TRANSCRIPTS / "locating_cypher_planrag.json"
    start = core(home, "run", "--scenario", "locating", "--question", "1", "--db", backend("cypher"),
                 "--technique", "planrag", "--llm", f"replay:{transcript}", "--json")
    out, err = start.communicate(timeout=120)
    assert start.returncode == 0, err
    run_id = json.loads(out)["run_id"]
    branch = core(home, "branch", run_id, "--step", "2", "--note", "check the totals")
    out, err = branch.communicate(timeout=120)
    first = out.splitlines()[0]
    assert first.startswith("branch: run ") and f"from run {run_id} at step 2" in first, err
    new_id = first.split()[2]
    store = RunStore(home / "runs.sqlite")
    assert store.get(new_id, events=False).parent_id == run_id
    refused = core(home, "branch", run_id, "--step", "99", "--note", "x")
    out, err = refused.communicate(timeout=120)
    assert refused.returncode == 1 and out == "" and f"run {run_id} has no step 99 to branch from" in err
    assert [r.id for r in store.list(limit=None)].count(new_id) == 1 and len(store.list(limit=None)) == 2
    paused = core(home, "run", "--scenario", "locating", "--question", "1", "--db", backend("cypher"),
                  "--technique", "planrag", "--llm", f"replay:{transcript}", "--hitl", "approve-every-plan", "--json")
    out, _ = paused.communicate(timeout=120)
    paused_id = json.loads(out)["run_id"]
    stop = core(home, "stop", paused_id)
    assert stop.wait(60) == 0 and stop.stdout.read().strip() == f"stopped: run {paused_id} (closed)"
    again = core(home, "stop", paused_id)
    assert again.wait(60) == 1 and "already stopped" in again.stderr.read()


def test_an_owner_that_lost_its_run_stops_it(home, tmp_path):
    """A process that hung past the stale limit finds its run interrupted (maybe taken by another): it stops."""
    store = RunStore(home / "runs.sqlite")
    store.create("x", RunSettings("locating", 1, "sqlite", "iterrag", "x"))
    assert store.beat("x") is False
    with store.db.transaction() as con:
        con.execute("UPDATE runs SET status = 'interrupted' WHERE id = 'x'")
    assert store.beat("x") is True


@pytest.mark.parametrize("store_engine", ["sqlite"], indirect=True)  # a SQLite file of an older version
def test_an_older_run_store_gets_the_run_control_columns(tmp_path):
    import sqlite3

    path = tmp_path / "runs.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, created REAL, updated REAL, status TEXT, scenario TEXT, "
                    "question INTEGER, db TEXT, technique TEXT, llm TEXT, hitl TEXT, settings TEXT, pause TEXT, "
                    "outcome TEXT, decision TEXT, correct INTEGER)")
        con.execute("INSERT INTO runs (id, created, updated, status, settings, pause) VALUES ('old', 1, 1, 'paused', "
                    "'{}', '{\"kind\": \"plan\", \"plan\": [\"a\"], \"old_plan\": [], \"reply\": \"\"}')")
    stores = [RunStore(path), RunStore(path)]  # opened twice: the columns are added once
    record = stores[1].get("old")
    assert record.status == "paused" and record.parent_id is None and record.pause["kind"] == "plan"


def test_cli_query_review_pauses_with_exit_3_and_takes_an_edited_query(tmp_path, dqa_dir):
    from tests.test_agents_dqa import TRANSCRIPTS, backend

    home = tmp_path / "home"
    transcript = TRANSCRIPTS / "building_sql_singlerag.json"
    start = core(home, "run", "--scenario", "building", "--question", "1", "--db", backend("sql"),
                 "--technique", "singlerag", "--llm", f"replay:{transcript}", "--approve-queries")
    out, err = start.communicate(timeout=120)
    assert start.returncode == 3, err
    assert "awaits review of its query" in out and "--edit-query QUERY" in out.strip().splitlines()[-1]
    run_id = out.split("paused: run ")[1].split()[0]
    edited = "SELECT COUNT(*) AS n FROM building"
    resume = core(home, "run", "--resume", run_id, "--pause", "p1", "--edit-query", edited, "--json")
    out, err = resume.communicate(timeout=120)
    report = json.loads(out)
    review = next(e for e in report["events"] if e["kind"] == "query_review")
    assert (review["status"], review["query"]) == ("edited", edited) and report["status"] == "finished", err
    assert resume.returncode == 0


def test_cli_review_from_a_terminal_defaults_to_the_current_pause(home, tmp_path, monkeypatch, capsys, dqa_dir):
    """(The command line opens the question from the catalog: DQA Locating question 1.)"""
    import io

    import core.cli.main as cli_module
    from core.config import settings as core_settings

    runtime, first = paused_run(home, tmp_path)
    monkeypatch.setattr(core_settings, "DATA_HOME", home)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    code = cli_module.main(["run", "--resume", first.run_id, "--approve", "--reviewer", "tty-user"])
    captured = capsys.readouterr()
    assert f"reviewing pause p1 of run {first.run_id}" in captured.err
    assert code == 3 and "(pause p2)" in captured.out  # it went on to the re-plan, the next pause
    assert runtime.store.reviews(first.run_id)[0]["reviewer"] == "tty-user"


def test_reaper_steps_wait_for_query_approval_and_a_rejected_step_fails(home, tmp_path):
    two = ("Step 1: the nodes - #E1 = Relational DB[SELECT trade_node FROM trade_node]\n"
           "Step 2: the values - #E2 = Relational DB[SELECT local_value FROM trade_node]")
    runtime = make_runtime(home, backend := FakeBackend())
    first = runtime.start(settings(replay(tmp_path, [two, "Thought: done\nFinal answer: krakow"]), "reaper",
                                   review_queries=True, replan_on_failure=False))
    assert first.pause.kind == "query" and first.pause.current_step.startswith("Step 1")
    second = runtime.resume(first.run_id, Review.edit_query("SELECT 1 FROM trade_node"), pause_id="p1")
    assert backend.queries == ["SELECT 1 FROM trade_node"] and second.pause.query.startswith("SELECT local_value")
    done = runtime.resume(first.run_id, Review.reject("not needed"), pause_id="p2")
    assert done.status == "finished" and len(backend.queries) == 1
    events = runtime.store.get(first.run_id).events
    assert [e.status for e in events if e.kind == "query_review"] == ["edited", "rejected"]
    assert any(e.kind == "observation" and e.error_kind == "rejected" and "not needed" in e.text
               for e in events)


def test_core_stop_ends_a_run_another_process_drives_while_its_model_is_silent(tmp_path):
    from tests.stub_server import StubServer, completion, send_json

    answered = []

    def chat(handler, body):
        if answered:  # the second call: a silent server
            time.sleep(60)
            return
        answered.append(1)
        send_json(handler, 200, completion(ACT))

    server = StubServer({"POST /v1/chat/completions": chat})  # an OpenAI-like server: no tokenize, no /api/show
    url = server.url
    home = tmp_path / "home"
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from tests.test_agents_runtime import make_runtime, settings\n"
              "import core.llm.client as llm\n"
              f"rt = make_runtime({str(home)!r}, llm_settings=llm.LLMSettings(model='m', base_url={url!r}))\n"
              "print(rt.start(settings('m', 'iterrag'), run_id='far').status)\n")
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    store = RunStore(home / "runs.sqlite")
    while not any(e.kind == "observation" for e in (store.get("far").events if store.list(limit=None)
                                                   else [])):
        assert driver.poll() is None
        time.sleep(0.05)
    stop = core(home, "stop", "far")
    out, err = stop.communicate(timeout=60)
    assert stop.returncode == 0 and out.strip() == "stopped: run far", err
    assert driver.communicate(timeout=60)[0].strip() == "stopped"
    record = store.get("far")
    assert record.status == "stopped" and record.events[-1].error_kind == "stopped"
    server.close()


def test_a_viewer_who_changed_name_is_listed_once(home):
    """Issue 40: one browser was listed twice as looking, under its old and its new name."""
    store = RunStore(home / "runs.sqlite")
    store.create("r", RunSettings("locating", 1, "sqlite", "planrag", "x"))
    store.viewing("r", "local user")
    store.viewing("r", "ana")
    store.unview("r", "local user")
    assert list(store.viewers("r")) == ["ana"]
