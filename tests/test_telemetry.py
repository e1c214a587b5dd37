"""Runs as OpenTelemetry traces, read back from a real receiver (Arize Phoenix, started here on a free port): the
run span, its segments, LLM calls and queries nested under it, reviews and pauses as events, no key anywhere; a
dead receiver neither slows nor fails a run, and what it did not take is counted."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from core import telemetry
from core.agents.runtime import AgentRuntime
from core.llm.client import LLMSettings
from core.model.run_settings import Review, RunSettings
from core.telemetry.runs import run_ids
from tests.conftest import ROOT, require
from tests.page_app import open_file, shown
from tests.test_agents_runtime import ACT, FINAL, PLAN, home, make_runtime, replay, settings  # noqa: F401 (home: a fixture)
from tests.test_llm import KEY
from tests.stub_server import StubServer, send_json
from tests.test_jobs_queue import team, workers  # noqa: F401 (fixtures: the PostgreSQL queue, its workers)

#: the receiver: PHOENIX_BIN, else `phoenix` on PATH, else the venv `make phoenix` makes (.phoenix-venv)
PHOENIX = os.environ.get("PHOENIX_BIN") or shutil.which("phoenix") or str(ROOT / ".phoenix-venv" / "bin" / "phoenix")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.load(reply)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory):
    """A Phoenix server on free ports for the session: its base URL."""
    if not Path(PHOENIX).exists():
        require("phoenix", f"Arize Phoenix not found at {PHOENIX} (make phoenix, or set PHOENIX_BIN)")
    port, work = _free_port(), tmp_path_factory.mktemp("phoenix")
    env = {**os.environ, "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port()),
           "PHOENIX_HOST": "127.0.0.1", "PHOENIX_WORKING_DIR": str(work)}
    log = open(work / "log.txt", "wb")
    server = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _get(f"{url}/v1/projects")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"Phoenix did not start: {(work / 'log.txt').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def spans_of(url: str, trace_id: int, names_needed: set[str]) -> list[dict]:
    """The spans Phoenix holds for trace ``trace_id`` once those named ``names_needed`` have arrived."""
    wanted, deadline = f"{trace_id:032x}", time.monotonic() + 60
    while True:
        telemetry.flush()
        spans = [s for s in _get(f"{url}/v1/projects/default/spans?limit=1000")["data"]
                 if s["context"]["trace_id"] == wanted]
        if names_needed <= {s["name"] for s in spans} or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_a_run_with_a_review_and_a_failed_query_is_one_trace(phoenix, home, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", phoenix)
    failing = "Re-plan: N\nCurrent step: Step 1: list the nodes\nThought: try\nAction: Relational DB\n" \
              "Action input: SELEKT * FROM trade_node"
    runtime = make_runtime(home, llm_settings=LLMSettings(api_key=KEY))
    first = runtime.start(settings(replay(tmp_path, [PLAN, failing, "Re-plan: N\n" + FINAL]), "planrag",
                                   hitl="approve-every-plan"))
    assert first.status == "paused"
    done = runtime.resume(first.run_id, Review.approve(note="fine", reviewer="ana@example.org"))
    assert done.status == "finished" and done.outcome.decision == "krakow"

    trace_id, root_id = run_ids(first.run_id)
    spans = spans_of(phoenix, trace_id, {"agent run"})
    assert KEY not in json.dumps(spans)
    by_name: dict[str, list[dict]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    (run,) = by_name["agent run"]
    assert run["context"]["span_id"] == f"{root_id:016x}" and run["parent_id"] is None
    attrs = run["attributes"]
    assert run["span_kind"] == "AGENT" and attrs["planrag.technique"] == "planrag"
    assert attrs["planrag.review_mode"] == "approve-every-plan" and attrs["planrag.database"] == "sqlite"
    assert attrs["planrag.outcome"] == "finished" and attrs["planrag.decision"] == "krakow"
    assert "allocate my merchant" in attrs["input.value"]
    reviews = [e for e in run["events"] if e["name"] == "review"]
    assert [(e["attributes"]["planrag.reviewer"], e["attributes"]["planrag.review.action"],
             e["attributes"]["planrag.review.note"]) for e in reviews] == [("ana@example.org", "approve", "fine")]

    segments = by_name["run segment"]
    assert len(segments) == 2 and {s["parent_id"] for s in segments} == {run["context"]["span_id"]}
    paused = [s for s in segments if any(e["name"] == "pause" for e in s["events"])]
    assert len(paused) == 1 and paused[0]["attributes"]["planrag.status"] == "paused"
    segment_ids = {s["context"]["span_id"] for s in segments}

    calls = by_name["llm call"]
    assert len(calls) == 3 and {c["parent_id"] for c in calls} <= segment_ids
    assert all(c["attributes"]["llm.token_count.prompt"] > 0 and c["span_kind"] == "LLM" for c in calls)
    assert any("Final answer" in c["attributes"]["llm.output_messages.0.message.content"] for c in calls)
    for call in calls:  # what the model was sent: the system prompt, then the question (the store's caps)
        a = call["attributes"]
        assert a["llm.input_messages.0.message.role"] == "system" and len(a["llm.input_messages.0.message.content"]) > 0
        assert "allocate my merchant" in json.dumps([v for k, v in a.items() if k.startswith("llm.input_messages")])

    queries = sorted(by_name["database query"], key=lambda s: s["start_time"])
    assert [q["attributes"]["db.query.text"] for q in queries] == ["SELECT trade_node FROM trade_node",
                                                                   "SELEKT * FROM trade_node"]
    assert queries[0]["status_code"] == "UNSET" and queries[0]["span_kind"] == "TOOL"
    assert queries[0]["attributes"]["db.response.returned_rows"] == 2
    assert queries[1]["status_code"] == "ERROR" and queries[1]["attributes"]["error.type"] == "syntax"
    assert {q["parent_id"] for q in queries} <= segment_ids
    runtime.close()


def test_a_stop_is_an_event_of_the_run_and_of_its_segment(phoenix, home, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", phoenix)
    runtime = make_runtime(home)

    def listen(event):
        if event.kind == "action":
            runtime.stop("stopped-run", by="ana@example.org")

    result = runtime.start(settings(replay(tmp_path, [ACT, ACT + " WHERE local_value > 0", FINAL])), on_event=listen,
                           run_id="stopped-run")
    assert result.status == "stopped"
    spans = spans_of(phoenix, run_ids("stopped-run")[0], {"agent run"})
    (run,) = [s for s in spans if s["name"] == "agent run"]
    (segment,) = [s for s in spans if s["name"] == "run segment"]
    assert run["attributes"]["planrag.outcome"] == "stopped" and run["status_code"] == "ERROR"
    assert [e["attributes"]["planrag.reviewer"] for e in run["events"] if e["name"] == "stop"] == ["ana@example.org"]
    assert [e["name"] for e in segment["events"]] == ["stop"]
    runtime.close()


def test_the_run_span_places_the_decision_in_the_simulator_ranking(phoenix, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", phoenix)
    runtime = AgentRuntime(tmp_path / "home")
    result = runtime.start(RunSettings("locating", 1, "sqlite", "planrag",
                                       f"replay:{ROOT / 'assets' / 'replays' / 'demo_locating_1_sql_planrag.json'}",
                                       source="demo"))
    runtime.close()
    placement = result.outcome.placement
    spans = spans_of(phoenix, run_ids(result.run_id)[0], {"agent run"})
    (run,) = [s["attributes"] for s in spans if s["name"] == "agent run"]
    assert (run["planrag.rank"], run["planrag.of"], run["planrag.regret"], run["planrag.optimal"]) == (
        placement["rank"], placement["of"], placement["regret"], placement["regret"] == 0)
    assert run["planrag.decision"] == str(result.outcome.decision) and run["planrag.database"] == "sqlite"


def test_a_benchmark_groups_its_items_traces(phoenix, tmp_path, monkeypatch):
    from core.benchmark.runner import Bench, BenchConfig

    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", phoenix)
    replay = ROOT / "assets" / "replays" / "demo_locating_1_sql_planrag.json"
    bench = Bench(BenchConfig(["planrag"], f"replay:{replay}", scenario="locating", questions="1", source="demo",
                              epochs=2, cache=False, home=tmp_path / "home", out=tmp_path / "grouped"))
    assert bench.run().done == 2
    runs = []
    for result in bench.results():
        spans = spans_of(phoenix, run_ids(result["run_id"])[0], {"agent run"})
        runs += [s["attributes"] for s in spans if s["name"] == "agent run"]
    assert len(runs) == 2 and {r["session.id"] for r in runs} == {"bench:grouped"}  # one trace per item


def test_a_dead_receiver_neither_fails_nor_holds_a_run(home, tmp_path, monkeypatch):
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    monkeypatch.setattr(telemetry, "EXPORT_TIMEOUT_S", 0.5)
    runtime = make_runtime(home)
    result = runtime.start(settings(replay(tmp_path, [ACT, FINAL])))
    assert result.status == "finished" and result.outcome.correct is True
    telemetry.flush()
    status = telemetry.status()
    assert status.sent == 0 and status.dropped == 5  # the run, its segment, two LLM calls and one query: 5
    runtime.close()


def test_a_receiver_that_does_not_answer_never_holds_a_run(home, tmp_path, monkeypatch):
    # The receiver holds every export until the run has ended: a run waiting on it would never end.
    gate = threading.Event()

    def hold(handler, body):
        gate.wait(timeout=120)
        send_json(handler, 400, {"error": "refused"})

    receiver = StubServer({"POST /v1/traces": hold})
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", receiver.url.removesuffix("/v1"))
    monkeypatch.setattr(telemetry, "QUEUE_SIZE", 2)  # the queue fills while the receiver holds the first export
    monkeypatch.setattr(telemetry, "EXPORT_TIMEOUT_S", 1.0)  # the exporter's retries after the refusal end sooner
    try:
        runtime = make_runtime(home)
        result = runtime.start(settings(replay(tmp_path, [ACT, ACT + " WHERE local_value > 0", FINAL])))
        assert result.status == "finished" and not gate.is_set()
        gate.set()
        telemetry.flush()
    finally:
        gate.set()
        receiver.close()
    status = telemetry.status()
    assert status.sent == 0 and status.dropped == 7  # the run, its segment, three calls and two queries: none taken
    runtime.close()


def test_a_failure_to_trace_never_fails_a_run(home, tmp_path, monkeypatch):
    from core.telemetry import runs

    def broken(*args):
        raise RuntimeError("a defect in tracing")

    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", f"http://127.0.0.1:{_free_port()}")
    monkeypatch.setattr(runs._Segment, "_llm", broken)
    monkeypatch.setattr(runs._Segment, "_close", broken)
    result = make_runtime(home).start(settings(replay(tmp_path, [ACT, FINAL])))
    assert result.status == "finished" and result.outcome.correct is True


def test_no_endpoint_no_tracing(home, tmp_path, monkeypatch):
    for name in ("PLANRAG_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert telemetry.tracing() is None and telemetry.status().endpoint is None
    assert make_runtime(home).start(settings(replay(tmp_path, [ACT, FINAL]))).status == "finished"


def test_settings_page_shows_spans_sent_and_dropped(monkeypatch):
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", f"http://127.0.0.1:{_free_port()}")
    telemetry.tracing().status.dropped = 3
    at = open_file("pages/settings.py")
    assert any("3 dropped" in shown(c.value) for c in at.caption), [c.value for c in at.caption]


def shape(spans: list[dict]) -> list[tuple[str, str | None, tuple]]:
    """A trace's structure: each span's name, its parent's name and its events' names, sorted."""
    names = {s["context"]["span_id"]: s["name"] for s in spans}
    return sorted((s["name"], names.get(s["parent_id"]), tuple(sorted(e["name"] for e in s["events"])))
                  for s in spans)


def reviewed_in_process(phoenix: str, tmp_path: Path) -> list[dict]:
    """The spans of a PlanRAG run with a review (approved with a note), driven in this process."""
    runtime = make_runtime(tmp_path / "in-process", llm_settings=LLMSettings(api_key=KEY))
    first = runtime.start(RunSettings("locating", 1, "sqlite", "planrag", replay(tmp_path, [PLAN, "Re-plan: N\n"
                                                                                           + FINAL]),
                                      source="demo", hitl="approve-every-plan"))
    assert runtime.resume(first.run_id, Review.approve(note="fine")).status == "finished"
    runtime.close()
    return spans_of(phoenix, run_ids(first.run_id)[0], {"agent run", "run segment"})


def test_a_run_on_a_queue_worker_is_one_trace_shaped_as_an_in_process_run(phoenix, team, workers, tmp_path,
                                                                          monkeypatch):
    """Issue 42: runs on workers trace the same way. A run with a review, driven by a ``python -m core worker``
    process on the real PostgreSQL queue (its pause and its resumed segment each a job), is one trace in Phoenix
    with the spans, nesting and events of the same run driven in-process."""
    from core.jobs import runs as job_runs
    from tests.test_jobs_queue import ME, opener, settings as queued_settings, status, wait_for
    from tests.turn_stub import TurnStub

    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", phoenix)
    stub = TurnStub([PLAN, "Re-plan: N\n" + FINAL.replace("krakow", "doab")])  # a node of the demo's question
    workers("w1", PLANRAG_OTLP_ENDPOINT=phoenix)
    run = job_runs.start(queued_settings(stub.url, "planrag", hitl="approve-every-plan"), opener(stub.url), who=ME)
    wait_for(lambda: status(run.run_id) == "paused")
    record = job_runs.open_store().get(run.run_id, events=False)
    job_runs.resume(record, Review.approve(note="fine"), opener(stub.url), pause_id="p1", who=ME)
    wait_for(lambda: status(run.run_id) == "finished")
    stub.close()
    queued = spans_of(phoenix, run_ids(run.run_id)[0], {"agent run", "run segment"})
    assert len({s["context"]["trace_id"] for s in queued}) == 1

    in_process = reviewed_in_process(phoenix, tmp_path)
    assert shape(queued) == shape(in_process)
    assert [s["name"] for s in queued].count("agent run") == 1 and [s["name"] for s in queued].count(
        "run segment") == 2
    (root,) = [s for s in queued if s["name"] == "agent run"]
    (alike,) = [s for s in in_process if s["name"] == "agent run"]
    assert root["attributes"]["planrag.outcome"] == "finished" and root["parent_id"] is None
    # every attribute of the in-process run's span, and the placement the demo question's simulator gives
    assert set(alike["attributes"]) <= set(root["attributes"]) and root["attributes"]["planrag.decision"] == "doab"
    assert {"planrag.rank", "planrag.of", "planrag.regret"} <= set(root["attributes"])
    assert KEY not in json.dumps(queued)


def test_a_run_in_the_local_run_process_is_one_trace_shaped_as_an_in_process_run(phoenix, tmp_path, monkeypatch):
    """Issue 41: the app's runs in its local run process (``PLANRAG_JOBS=process``, the embedded default) trace as
    runs in-process do. A run with a review, paused and resumed there (its segments driven by the run process, the
    review claimed by the app), is one trace in Phoenix shaped as the same run in-process; the Settings page tells
    the spans the run process sent."""
    from core.jobs import local, runs as job_runs
    from tests.page_app import isolate
    from tests.test_jobs_local import ME, opener, settings as local_settings, wait_for
    from tests.turn_stub import TurnStub

    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("PLANRAG_JOBS", "process")
    monkeypatch.setenv("PLANRAG_OTLP_ENDPOINT", phoenix)  # before the run process starts: it is started with it
    stub = TurnStub([PLAN, "Re-plan: N\n" + FINAL.replace("krakow", "doab")])  # a node of the demo's question
    try:
        run = job_runs.start(local_settings(stub.url, "planrag", hitl="approve-every-plan"), opener(stub.url),
                             who=ME)
        assert run.join(60) and run.status() == "paused"
        record = job_runs.open_store().get(run.run_id, events=False)
        resumed = job_runs.resume(record, Review.approve(note="fine"), opener(stub.url), pause_id="p1", who=ME)
        assert resumed.join(60) and resumed.status() == "finished"
        there = spans_of(phoenix, run_ids(run.run_id)[0], {"agent run", "run segment"})
        told = wait_for(lambda: (n := local.spans()) and n[0] >= len(there) and n)  # the resumed segment's too
        at = open_file("pages/settings.py")
        said = [shown(c.value) for c in at.caption if "local run process" in c.value and "spans" in c.value]
    finally:
        local.stop_all()
        stub.close()
    assert len({s["context"]["trace_id"] for s in there}) == 1 and told[1] == 0
    assert said == [f"The runs' spans are sent by the local run process: {told[0]} sent, 0 dropped, as it last told "
                    "(once a run's spans were out)."]

    in_process = reviewed_in_process(phoenix, tmp_path)
    assert shape(there) == shape(in_process)
