"""Decision QA in Inspect AI: the task over 10 DQA questions with the workbench's PlanRAG as the solver and the
simulators as the scorer gives the same decisions and scores as the benchmark runner (``core bench``) on the same
scripted replies, through Inspect's scripted mock model and through the project's stand-in OpenAI-compatible
server; the database tool; a benchmark's results as an Inspect log."""
from __future__ import annotations

import json

import pytest

inspect_ai = pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (requirements.txt pins it)")
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from core.benchmark.runner import Bench, BenchConfig  # noqa: E402
from core.evals.task import decision_qa  # noqa: E402
from tests.bench_scripts import VARIANTS, write_transcripts  # noqa: E402
from tests.stub_server import StubServer, completion, send_json  # noqa: E402

QUESTIONS = {"locating": [1, 2, 3, 4, 5], "building": [1, 2, 3, 4, 5]}


@pytest.fixture(scope="module")
def benched(dqa, dqa_dir, tmp_path_factory):
    """Scripted PlanRAG transcripts of 10 questions (every variant: right, wrong, missed, a failed query, no
    candidate), the benchmark's results on them, and the replies in the samples' order."""
    folder = tmp_path_factory.mktemp("inspect_scripts")
    write_transcripts(dqa, folder, QUESTIONS, ["sqlite"], ["planrag"],
                      lambda q: VARIANTS[(q.number + (q.scenario == "building")) % len(VARIANTS)], lambda q: q.number % 3)
    bench = Bench(BenchConfig(["planrag"], f"replay:{folder}", scenario="all", questions="1-5", cache=False,
                              home=tmp_path_factory.mktemp("bench_home"), out=tmp_path_factory.mktemp("bench_out"),
                              dqa_root=dqa_dir))
    progress = bench.run()
    assert progress.done == 10 and progress.errors == []
    results = {f"{r['scenario']}-{r['question']}": r for r in bench.results()}
    replies = [reply for scenario, numbers in QUESTIONS.items() for n in numbers
               for reply in json.loads((folder / f"{scenario}-{n}-sqlite-planrag.json").read_text())]
    return results, replies


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


def test_mockllm_eval_gives_the_bench_decisions_and_scores(benched, dqa_dir, tmp_path):
    results, replies = benched
    model = get_model("mockllm/model", custom_outputs=[scripted(r) for r in replies])
    (log,) = inspect_eval(decision_qa(questions="1-5", root=str(dqa_dir)), model=model, max_samples=1,
                          log_dir=str(tmp_path / "logs"), display="none")
    same_as_bench(log, results)
    means = {score.name: score.metrics["mean"].value for score in log.results.scores}
    assert means["decision"] == sum(bool(r["correct"]) for r in results.values()) / 10
    assert means["optimal"] == sum(bool(r["optimal"]) for r in results.values()) / 10


def test_stand_in_server_eval_gives_the_bench_decisions_and_scores(benched, dqa_dir, tmp_path, monkeypatch):
    results, replies = benched
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
