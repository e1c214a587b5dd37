"""What real servers do, seen through runs, the command line and the benchmark, without a model (issue 20 items
1-3, 7, 8; issue 12 section 4): stand-in servers that fail, echo the key, answer HTML or hang; every attempt
recorded; failures said as what they are; secrets stored nowhere."""
from __future__ import annotations

import csv
import io
import json
import threading
from pathlib import Path

import pytest

import core.cli.main as cli_module
from core.config import secrets
from core.benchmark import reports
from core.benchmark.results import ResultStore, read_not_run, read_results
from core.benchmark.runner import CallGate
from core.llm.client import LLMError, LLMSettings
from core.store.runs import RunStore
from tests.test_agents_runtime import ACT, FINAL, kinds, make_runtime, settings
from tests.stub_server import completion
from tests.test_llm import HANG, KEY, serve  # noqa: F401 (serve: a fixture)

MASKED = "sk-test-DO******7890"
ECHO = {"error": {"message": f"Invalid request with key {KEY} ({MASKED})", "code": 401}}


@pytest.fixture
def home(tmp_path):
    return tmp_path / "home"


def llm_settings(**kw) -> LLMSettings:
    return LLMSettings(**{"api_key": KEY, "retry_base_s": 0.001, "max_retries": 2, **kw})


def test_a_retried_call_leaves_an_event_and_records_every_attempt(home, serve):
    server = serve((503, {"error": {"message": "loading model"}}), (200, completion(ACT)), (200, completion(FINAL)))
    runtime = make_runtime(home, llm_settings=llm_settings())
    result = runtime.start(settings("stand-in", base_url=server.url))
    events = runtime.store.get(result.run_id).events
    assert result.status == "finished"
    assert kinds(events)[:2] == ["error", "thought"]
    retry = events[0]
    assert (retry.error_kind, retry.fatal) == ("retry", False)
    assert "server error on attempt 1 of 3" in retry.message and "loading model" in retry.message
    usage = events[1].llm
    assert [a["error_kind"] for a in usage.attempts] == ["server", None]
    assert usage.wait_s >= usage.latency_s and not usage.cached
    assert result.outcome.decision == "krakow"
    runtime.close()


def test_an_error_body_echoing_the_key_is_a_server_error_and_no_secret_is_stored(home, serve):
    server = serve((200, completion(ACT)), (200, ECHO), (200, ECHO), (200, ECHO))
    runtime = make_runtime(home, llm_settings=llm_settings())
    result = runtime.start(settings("stand-in", base_url=server.url))
    events = runtime.store.get(result.run_id).events
    assert result.status == "failed" and len(server.requests) == 4
    assert [e.error_kind for e in events if e.kind == "error"] == ["retry", "retry", "server"]
    assert result.outcome.error.startswith("server error after 3 attempts")
    assert "internal error" not in json.dumps([e.to_dict() for e in events]) and len(events[-1].attempts) == 3
    runtime.close()
    for path in home.iterdir():  # run store and checkpoints
        data = path.read_bytes()
        assert KEY.encode() not in data and MASKED.encode() not in data, path


def test_an_html_page_with_status_200_is_retried_as_a_server_error(home, serve):
    server = serve((200, "<html><body><h1>502 Bad Gateway</h1></body></html>"), (200, completion(ACT)),
                   (200, completion(FINAL)))  # a query before the answer (else the agent is told it has none)
    runtime = make_runtime(home, llm_settings=llm_settings())
    result = runtime.start(settings("stand-in", base_url=server.url))
    assert result.status == "finished" and result.outcome.decision == "krakow"
    runtime.close()


def test_the_command_line_says_what_failed_and_never_prints_the_key(home, serve, monkeypatch, capsys):
    import core.agents.runtime as agents

    server = serve(*[(200, ECHO)] * 2)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(agents, "AgentRuntime", lambda llm_settings: make_runtime(home, llm_settings=llm_settings))
    args = ["run", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--technique", "iterrag",
            "--llm", "stand-in", "--base-url", server.url, "--llm-retries", "1", "--llm-timeout", "5"]
    assert cli_module.main(args) == 1
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("failed: server error after 2 attempts") and "decision None" not in out
    assert KEY not in out and MASKED not in out
    server.script.extend([(200, ECHO)] * 2)
    assert cli_module.main(args + ["--json"]) == 1
    printed = capsys.readouterr().out
    report = json.loads(printed)
    assert report["status"] == "failed" and KEY not in printed and MASKED not in printed


@pytest.mark.parametrize("flag, value", [("--llm-timeout", "nan"), ("--llm-retries", "-1"),
                                         ("--max-reply-tokens", "0")])
def test_bad_limits_on_the_command_line_get_a_clear_error(flag, value, capsys):
    """Refused by the argument parser with one line naming the flag and its bounds (core.model.bounds), exit 2."""
    for argv in (["run", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--technique", "iterrag",
                  "--llm", "m", flag, value], ["branch", "r1", "--step", "2", flag, value]):  # a branch's calls too
        with pytest.raises(SystemExit) as refused:
            cli_module.main(argv)
        err = capsys.readouterr().err
        assert refused.value.code == 2 and f"argument {flag}: " in err and "must be" in err and "Traceback" not in err


def test_a_timed_out_call_under_load_lowers_the_gate_and_says_so():
    notes = []
    gate = CallGate(4, notes.append)
    with gate, gate, gate:  # three calls in flight
        gate.watch(None)({"error_kind": "timeout"})
        assert gate.limit == 1 and gate.in_flight == 3
    assert notes == ["the server timed out with 3 LLM calls at once: at most 1 at a time from now on"]
    with gate:
        gate.watch(None)({"error_kind": "timeout"})  # alone: not load, nothing to lower
    assert len(notes) == 1


def test_the_gate_holds_calls_past_its_limit():
    gate = CallGate(1)
    entered = threading.Event()

    def second():
        with gate:
            entered.set()

    with gate:
        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(0.05) and gate.in_flight == 1  # waiting for the first call to end
    thread.join()
    assert entered.is_set() and gate.in_flight == 0


def test_a_call_that_fails_with_a_timeout_tells_the_gate():
    gate = CallGate(2)
    with pytest.raises(LLMError), gate, gate:
        raise LLMError("timeout", "timeout error after 3 attempts")
    assert gate.limit == 1


def test_items_that_could_not_run_are_kept_and_listed_until_they_run(tmp_path):
    from core.benchmark.items import Item

    secrets.register(KEY)  # as opening the model does
    store = ResultStore(tmp_path)
    item = Item("locating", 1, "sqlite", "iterrag", "m @ http://x")
    store.put_not_run(item, "network", f"network error after 5 attempts (key {KEY})", [{"attempt": 1}] * 5)
    [row] = read_not_run(tmp_path)
    assert (row["error_kind"], row["question"], len(row["attempts"])) == ("network", 1, 5)
    assert KEY not in row["error"]
    reports.export([], {}, tmp_path / "report", not_run=read_not_run(tmp_path))
    listed = (tmp_path / "report" / "not_run.csv").read_text()
    assert "network error after 5 attempts" in listed and KEY not in listed
    store.put({"scenario": "locating", "question": 1, "db": "sqlite", "technique": "iterrag", "model": "m @ http://x",
               "status": "finished", "correct": True, "finished": 0.0})
    assert read_not_run(tmp_path) == [] and len(read_results(tmp_path)) == 1


def test_cached_calls_are_reported_apart_from_time_waited():
    base = {"scenario": "locating", "question": 1, "db": "sqlite", "language": "sql", "technique": "iterrag",
            "model": "m", "status": "finished", "correct": True, "llm_calls": 4, "prompt_tokens": 100,
            "completion_tokens": 10, "tokens_estimated": False, "wall_s": 0.14, "overhead_s": 0.01, "ready_s": 0.01}
    cached = {**base, "cached_calls": 4, "llm_latency_s": 0.0, "cached_latency_s": 876.0, "llm_attempts": 0}
    row = reports.costs([cached], {}).iloc[0]
    assert row["llm latency s"] == 0.0 and row["cached latency s"] == 876.0 and row["cached %"] == 100.0
    fresh = {**base, "question": 2, "cached_calls": 0, "llm_latency_s": 50.0, "cached_latency_s": 0.0,
             "llm_attempts": 6}
    assert reports.costs([fresh], {}).iloc[0]["attempts per call"] == 1.5


def test_the_benchmark_llm_passes_its_calls_through_the_gate():
    from core.benchmark.cache import CachingLLM
    from core.llm.client import Completion

    class OneAtATimeServer:
        """Both calls in flight, then each attempt times out once before its answer (scripted)."""

        def __init__(self):
            self.together = threading.Barrier(2)

        def complete(self, messages, stop, on_retry=None):
            self.together.wait()
            on_retry({"attempt": 1, "error_kind": "timeout", "duration_s": 120.0, "retry_in_s": 1.0, "of": 5})
            return Completion("Final answer: krakow", 10, 2, 1.0, False)

    notes, server = [], OneAtATimeServer()
    gate = CallGate(2, notes.append)
    retries = []
    llms = [CachingLLM(lambda answered: server, {"model": "m"}, None, gate=gate) for _ in range(2)]
    threads = [threading.Thread(target=llm.complete, args=([], [], retries.append)) for llm in llms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gate.limit == 1 and gate.in_flight == 0 and len(retries) == 2
    assert notes == ["the server timed out with 2 LLM calls at once: at most 1 at a time from now on"]


def test_the_run_page_shows_the_real_wait_of_a_retried_call_and_cached_replies_as_such():
    from core.model.events import usage_from_dict
    from ui.run_view import llm_wait

    retried = usage_from_dict({"latency_s": 44.6, "wait_s": 541.2, "attempts": [{}, {}, {}], "cached": False})
    assert llm_wait(retried) == "44.60 s · waited 541.2 s over 3 attempts"
    assert llm_wait(usage_from_dict({"latency_s": 2.0, "wait_s": 2.0, "attempts": [{}]})) == "2.00 s"
    assert llm_wait(usage_from_dict({"latency_s": 2.0})) == "2.00 s"  # stored before attempts were recorded
    assert llm_wait(usage_from_dict({"latency_s": 9.5, "wait_s": 0.0, "cached": True})) == "cached reply (took 9.50 s when made)"


def test_a_benchmark_on_a_one_at_a_time_server_lowers_its_concurrency_and_records_the_attempts(
        tmp_path, dqa_dir, monkeypatch):
    from core.benchmark import cache as cache_module
    from core.benchmark.runner import Bench, BenchConfig
    from core.llm.client import Completion

    act = 'Thought: look\nAction: Relational DB\nAction input: SELECT source FROM flow WHERE dest = "baltic_sea"'
    together = threading.Barrier(2)

    class Scripted:
        """Each item's model (scripted): its first call waits until both items' calls are in flight, then has one
        attempt time out, as on a server taking one request at a time; then the final answer."""

        def __init__(self):
            self.calls = 0

        def complete(self, messages, stop, on_retry=None):
            self.calls += 1
            attempts = [{"attempt": 1, "start": 0.0, "timeout_s": 120.0, "duration_s": 120.0,
                         "error_kind": None, "error": None}]
            if self.calls == 1:
                together.wait()
                failed = {**attempts[0], "error_kind": "timeout", "error": "Request timed out."}
                on_retry({**failed, "retry_in_s": 1.0, "of": 5})
                attempts = [failed, {**attempts[0], "attempt": 2}]
            text = act if self.calls == 1 else "Thought: done.\nFinal answer: krakow"
            return Completion(text, 300, 20, 120.0, False, wait_s=241.0 if self.calls == 1 else 120.0,
                              attempts=attempts)

    monkeypatch.setattr(cache_module, "open_llm", lambda spec, settings, skip=0: Scripted())
    bench = Bench(BenchConfig(["iterrag"], "stand-in", scenario="locating", questions="1-2", concurrency=2,
                              base_url="http://127.0.0.1:9/v1", out=tmp_path / "out", home=tmp_path / "home",
                              dqa_root=dqa_dir, llm_settings=LLMSettings(api_key=KEY), cache=False))
    seen = []
    progress = bench.run(on_note=seen.append)
    assert bench.not_run() == []
    assert progress.notes == seen == ["the server timed out with 2 LLM calls at once: at most 1 at a time from now on"]
    results = bench.results()
    assert len(results) == 2 and all(r["llm_attempts"] == 3 for r in results)
    assert all(r["llm_latency_s"] == 361.0 and r["cached_latency_s"] == 0 for r in results)
    store = RunStore(tmp_path / "home" / "runs.sqlite")
    for r in results:  # each run keeps its retry as an event
        first = store.get(r["run_id"]).events[0]
        assert (first.kind, first.error_kind, first.fatal) == ("error", "retry", False)


def test_a_fully_cached_rerun_reports_no_time_waited(tmp_path, dqa_dir, serve):
    from core.benchmark.runner import Bench, BenchConfig

    act = 'Thought: look\nAction: Relational DB\nAction input: SELECT source FROM flow WHERE dest = "baltic_sea"'
    server = serve((200, completion(act, 300, 20)), (200, completion("Final answer: krakow", 300, 20)))

    def bench(out):
        return Bench(BenchConfig(["iterrag"], "stand-in", scenario="locating", questions="1", base_url=server.url,
                                 out=tmp_path / out, home=tmp_path / "home", dqa_root=dqa_dir,
                                 llm_settings=LLMSettings(api_key=KEY)))

    first, second = bench("a"), bench("b")
    first.run()
    second.run()
    [made], [rerun] = first.results(), second.results()
    assert len(server.requests) == 2 and rerun["cached_calls"] == 2
    assert made["llm_latency_s"] > 0 and made["cached_latency_s"] == 0 and made["llm_attempts"] == 2
    assert rerun["llm_latency_s"] == 0 and rerun["llm_attempts"] == 0
    assert rerun["cached_latency_s"] == pytest.approx(made["llm_latency_s"], abs=0.01)
    row = reports.costs([rerun], {}).iloc[0]
    assert row["llm latency s"] == 0 and row["cached %"] == 100.0


def test_a_hung_server_fails_the_run_as_a_timeout_with_every_attempt_kept(home, serve):
    server = serve((HANG, {}), (HANG, {}))
    runtime = make_runtime(home, llm_settings=llm_settings(timeout_s=0.2, max_retries=1))
    result = runtime.start(settings("stand-in", base_url=server.url))
    events = runtime.store.get(result.run_id).events
    assert result.status == "failed" and result.outcome.error.startswith("timeout error after 2 attempts")
    assert [(e.error_kind, e.fatal) for e in events] == [("retry", False), ("timeout", True)]
    attempts = events[-1].attempts
    assert [a["timeout_s"] for a in attempts] == [0.2, pytest.approx(0.3)]
    assert attempts[1]["start"] >= attempts[0]["start"] + attempts[0]["duration_s"] - 0.002  # starts kept to ms
    runtime.close()


def test_bench_lists_an_item_that_could_not_run_and_says_why(tmp_path, dqa_dir, serve, monkeypatch, capsys):
    from core.config import settings as core_settings

    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("DQA_DIR", str(dqa_dir))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = serve((200, ECHO), (200, ECHO))
    out = tmp_path / "out"
    args = ["bench", "--scenario", "locating", "--questions", "1", "--technique", "iterrag", "--llm", "stand-in",
            "--base-url", server.url, "--out", str(out), "--llm-retries", "1", "--no-cache"]
    assert cli_module.main(args) == 1
    captured = capsys.readouterr()
    assert "locating-1-sqlite-iterrag: not run: server error after 2 attempts" in captured.out
    assert "no candidate" not in captured.out and KEY not in captured.out + captured.err
    listed = (out / "report" / "not_run.csv").read_text()
    [row] = list(csv.DictReader(io.StringIO(listed)))
    assert (row["scenario"], row["question"], row["technique"], row["error_kind"], row["attempts"]) == (
        "locating", "1", "iterrag", "server", "2")
    assert row["error"].startswith("server error after 2 attempts")
    assert read_results(out) == [] and read_not_run(out)[0]["attempts"][1]["attempt"] == 2
    assert KEY not in listed and MASKED not in listed
    assert KEY not in (out / "report" / "report.json").read_text()


def _files_without_secrets(*folders):
    for folder in folders:
        for path in Path(folder).rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert KEY.encode() not in data and MASKED.encode() not in data, path


def test_no_file_a_failed_bench_writes_and_no_json_output_holds_the_key(tmp_path, dqa_dir, serve, monkeypatch,
                                                                           capsys):
    """Issue 12 section 4, every store at once: results, not-run list, reports, reply cache, run store, checkpoints,
    and ``run --json``."""
    monkeypatch.setattr("core.config.settings.DATA_HOME", tmp_path / "home")
    monkeypatch.setenv("DQA_DIR", str(dqa_dir))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = serve(*[(200, ECHO)] * 4)
    cli_module.main(["bench", "--scenario", "locating", "--questions", "1", "--technique", "iterrag", "--llm",
                     "stand-in", "--base-url", server.url, "--out", str(tmp_path / "out"), "--llm-retries", "1"])
    cli_module.main(["run", "--scenario", "locating", "--question", "1", "--db", "sqlite", "--technique", "iterrag",
                     "--llm", "stand-in", "--base-url", server.url, "--llm-retries", "1", "--json"])
    captured = capsys.readouterr()
    assert KEY not in captured.out + captured.err and MASKED not in captured.out + captured.err
    assert '"server error after 2 attempts' in captured.out  # the --json object says what failed
    _files_without_secrets(tmp_path / "out", tmp_path / "home")
