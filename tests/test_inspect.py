"""Decision QA in Inspect AI: the task over 10 DQA questions with the workbench's PlanRAG as the solver and the
simulators as the scorer gives the same decisions and scores as the benchmark runner (``core bench``) on the same
scripted replies, through Inspect's scripted mock model and through the project's stand-in OpenAI-compatible
server; the database tool; a benchmark's results as an Inspect log."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

inspect_ai = pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (requirements.txt pins it)")
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from core.benchmark.runner import Bench, BenchConfig  # noqa: E402
from core.config import settings as core_settings  # noqa: E402
from core.evals.task import decision_qa  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.test_telemetry import _free_port  # noqa: E402
from tests.bench_scripts import VARIANTS, write_transcripts  # noqa: E402
from tests.stub_server import StubServer, completion, send_json  # noqa: E402

QUESTIONS = {"locating": [1, 2, 3, 4, 5], "building": [1, 2, 3, 4, 5]}


@pytest.fixture(scope="module")
def benched_all(dqa, dqa_dir, tmp_path_factory):
    """Scripted PlanRAG and IterRAG transcripts of 10 questions (every variant: right, wrong, missed, a failed
    query, no candidate) and the benchmark's results on them: (results by technique, folder)."""
    folder = tmp_path_factory.mktemp("inspect_scripts")
    write_transcripts(dqa, folder, QUESTIONS, ["sqlite"], ["planrag", "iterrag"],
                      lambda q: VARIANTS[(q.number + (q.scenario == "building")) % len(VARIANTS)], lambda q: q.number % 3)
    bench = Bench(BenchConfig(["planrag", "iterrag"], f"replay:{folder}", scenario="all", questions="1-5",
                              cache=False, home=tmp_path_factory.mktemp("bench_home"),
                              out=tmp_path_factory.mktemp("bench_out"), dqa_root=dqa_dir))
    progress = bench.run()
    assert progress.done == 20 and progress.errors == []
    results: dict[str, dict] = {}
    for r in bench.results():
        results.setdefault(r["technique"], {})[f"{r['scenario']}-{r['question']}"] = r
    return results, folder


def scripts_of(folder, technique: str) -> list[str]:
    """The replies of the 10 questions' transcripts of ``technique``, in the samples' order."""
    return [reply for scenario, numbers in QUESTIONS.items() for n in numbers
            for reply in json.loads((folder / f"{scenario}-{n}-sqlite-{technique}.json").read_text())]


@pytest.fixture(scope="module")
def benched(benched_all):
    """PlanRAG's: (results, replies in the samples' order, the transcripts' folder)."""
    results, folder = benched_all
    return results["planrag"], scripts_of(folder, "planrag"), folder


def scripted(reply: str) -> ModelOutput:
    """A mock model's reply with its usage given (without it mockllm counts tokens with a tokenizer it downloads)."""
    output = ModelOutput.from_content("mockllm/model", reply)
    output.usage = ModelUsage(input_tokens=11, output_tokens=7, total_tokens=18)
    return output


def verdicts(log) -> dict[str, dict]:
    assert log.status == "success", log.error
    return {s.id: s.scores["decision_scorer"] for s in log.samples}


def same_as_bench(log, results) -> None:
    got = verdicts(log)
    assert set(got) == set(results)
    for key, r in results.items():
        meta = got[key].metadata
        assert (meta["decision"], meta["correct"], meta["rank"], meta["of"], meta["regret"]) == (
            r["decision"], r["correct"], r["rank"], r["candidates"], r["regret"]), key
        assert got[key].value["decision"] == ("C" if r["correct"] else "I"), key
    assert {r["correct"] for r in results.values()} == {True, False}  # both kinds are compared


@pytest.mark.parametrize("technique", ["planrag", "iterrag"])
def test_mockllm_eval_gives_the_bench_decisions_and_scores(benched_all, dqa_dir, tmp_path, technique):
    by_technique, folder = benched_all
    results = by_technique[technique]
    model = get_model("mockllm/model", custom_outputs=[scripted(r) for r in scripts_of(folder, technique)])
    (log,) = inspect_eval(decision_qa(questions="1-5", technique=technique, root=str(dqa_dir)), model=model,
                          max_samples=1, log_dir=str(tmp_path / "logs"), display="none")
    same_as_bench(log, results)
    means = {score.name: score.metrics["mean"].value for score in log.results.scores}
    assert means["decision"] == sum(bool(r["correct"]) for r in results.values()) / 10
    assert means["optimal"] == sum(bool(r["optimal"]) for r in results.values()) / 10


def test_stand_in_server_eval_gives_the_bench_decisions_and_scores(benched, dqa_dir, tmp_path, monkeypatch):
    results, replies, _ = benched
    queue = list(replies)

    def chat(handler, body):
        send_json(handler, 200, completion(queue.pop(0)))

    server = StubServer({"POST /v1/chat/completions": chat})
    monkeypatch.setenv("STANDIN_BASE_URL", server.url)
    monkeypatch.setenv("STANDIN_API_KEY", "sk-stand-in")
    try:
        (log,) = inspect_eval(decision_qa(questions="1-5", root=str(dqa_dir)), model="openai-api/standin/stand-in",
                              max_samples=1, log_dir=str(tmp_path / "logs"), display="none")
    finally:
        server.close()
    same_as_bench(log, results)
    assert queue == []  # every scripted reply was asked for, through Inspect's OpenAI-compatible provider


def test_bench_results_as_an_inspect_log_that_inspect_view_opens(benched, dqa_dir, tmp_path, monkeypatch):
    from core.cli.main import main

    results, _, folder = benched
    monkeypatch.setattr(core_settings, "DATA_HOME", tmp_path / "home")
    log_file = tmp_path / "logs" / "bench.eval"
    assert main(["bench", "--questions", "1-5", "--technique", "planrag", "--db", "sqlite", "--llm",
                 f"replay:{folder}", "--out", str(tmp_path / "out"), "--no-cache", "--dqa-dir", str(dqa_dir),
                 "--inspect-log", str(log_file)]) == 0
    log = read_eval_log(str(log_file))
    assert log.status == "success" and len(log.samples) == 10
    for sample in log.samples:
        r = results[sample.id.rsplit("-", 2)[0]]
        meta = sample.scores["decision_scorer"].metadata
        assert (meta["decision"], meta["correct"], meta["rank"], meta["regret"]) == (
            r["decision"], r["correct"], r["rank"], r["regret"]), sample.id
        assert sample.messages and sample.messages[0].role == "assistant"  # the run's transcript
        assert sample.output.completion == (r["final_answer"] or "")

    port = _free_port()
    viewer = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "inspect"), "view",
                               "start", "--log-dir", str(log_file.parent), "--host", "127.0.0.1", "--port",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/log-files", timeout=10) as reply:
                    listed = json.load(reply)
                break
            except OSError:
                assert viewer.poll() is None and time.monotonic() < deadline, "inspect view did not start"
                time.sleep(0.3)
        (name,) = [f["name"] for f in listed["files"] if f["name"].endswith("bench.eval")]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/logs/{urllib.parse.quote(name)}",
                                    timeout=30) as reply:
            opened = json.load(reply)
        assert len(opened["samples"]) == 10
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)


def test_inspect_react_agent_queries_the_database_tool_read_only(dqa_dir, tmp_path):
    def call(tool: str, **arguments) -> ModelOutput:
        output = ModelOutput.for_tool_call("mockllm/model", tool, arguments)
        output.usage = ModelUsage(input_tokens=11, output_tokens=7, total_tokens=18)
        return output

    outputs = [call("database_query", query="DELETE FROM flow"),
               call("database_query", query="SELECT source FROM flow WHERE dest = 'no such node'"),
               call("database_query", query="SELECT COUNT(*) FROM flow"),
               call("submit", answer="I cannot decide.")]
    model = get_model("mockllm/model", custom_outputs=outputs)
    (log,) = inspect_eval(decision_qa(scenario="locating", questions="1", technique="react", root=str(dqa_dir)),
                          model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    (sample,) = log.samples
    tools = [m for m in sample.messages if m.role == "tool" and m.function == "database_query"]
    assert len(tools) == 3
    assert tools[0].error is not None and "Query failed" in tools[0].error.message  # the write was refused
    assert "(0 rows)" in tools[1].text and "COUNT(*)" in tools[2].text
    assert sample.scores["decision_scorer"].metadata["decision"] is None
    asked = next(m for m in sample.messages if m.role == "user").text
    assert "query it with database_query" in asked and "trade_node" in asked  # the question and the schema


def test_the_readme_inspect_eval_command_on_the_stand_in_server(benched, dqa_dir, tmp_path):
    results, _, folder = benched
    queue = json.loads((folder / "locating-1-sqlite-planrag.json").read_text())

    def chat(handler, body):
        send_json(handler, 200, completion(queue.pop(0)))

    server = StubServer({"POST /v1/chat/completions": chat})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DQA_DIR": str(dqa_dir), "STANDIN_BASE_URL": server.url,
           "STANDIN_API_KEY": "sk-stand-in"}
    inspect = os.path.join(os.path.dirname(sys.executable), "inspect")
    try:
        done = subprocess.run([inspect, "eval", "core/evals/task.py", "-T", "technique=planrag", "-T", "questions=1",
                               "-T", "scenario=locating", "--model", "openai-api/standin/stand-in", "--log-dir",
                               str(tmp_path / "logs"), "--display", "none"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = (tmp_path / "logs").glob("*.eval")
    (sample,) = read_eval_log(str(path)).samples
    assert sample.scores["decision_scorer"].metadata["decision"] == results["locating-1"]["decision"]
    assert queue == []


def acting(i: int) -> str:
    return f"Thought: look again.\nAction: Query[SELECT {i} AS step]"


@pytest.mark.parametrize("limits, kind", [({"message_limit": 4}, "message"), ({"token_limit": 40}, "token"),
                                          ({"message_limit": 60}, "message")])
def test_inspects_limits_end_a_sample_as_inspect_reports_limits(dqa_dir, tmp_path, limits, kind):
    """Issue 42: a sample past Inspect's message or token limit was a failed run of the workbench's (the limit's
    message as its error, no limit on the sample); the workbench's own call budget (20 calls) stopped a run first
    under a larger limit. Now Inspect's limits govern, and the sample ends at one as Inspect reports limits, scored
    on what it has."""
    model = get_model("mockllm/model", custom_outputs=[scripted(acting(i)) for i in range(100)])
    (log,) = inspect_eval(decision_qa(scenario="locating", questions="1", technique="iterrag", root=str(dqa_dir)),
                          model=model, log_dir=str(tmp_path / "logs"), display="none", **limits)
    assert log.status == "success", log.error
    [sample] = log.samples
    assert sample.error is None and sample.limit is not None and sample.limit.type == kind
    assert sample.limit.limit == next(iter(limits.values()))
    assert sample.scores["decision_scorer"].value["decision"] == "I"  # scored: no final answer
    calls = [e for e in sample.events if e.event == "model"]
    if limits == {"message_limit": 60}:
        assert len(calls) > 20  # beyond the workbench's own budget of calls
