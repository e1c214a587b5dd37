"""A benchmark's results as an Inspect eval log (``core bench ... --inspect-log FILE``; ``inspect view`` opens it):
one sample per result with the question, the label, the final answer, the run's transcript from the run store and
the simulators' verdict as its score, as the ``decision_qa`` task's scorer gives it."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalSample, EvalScore,
                            EvalSpec, EvalStats, write_eval_log)
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import CORRECT, INCORRECT, Score

from core.analysis.grading import paper_rule
from core.evals.solvers import messages_of
from core.scenarios import catalog

SCORES = ("decision", "lenient", "optimal")


def _mark(value) -> str:
    return CORRECT if value else INCORRECT


def _sample(result: dict, store, root) -> EvalSample:
    question = catalog.question(result.get("source", "dqa"), result["scenario"], result["question"], root)
    try:
        events = store.get(result["run_id"]).events
    except KeyError:  # the run was deleted from the store: the sample keeps its result without the transcript
        events = []
    answer = result.get("final_answer") or ""
    lenient = paper_rule(answer, result.get("label")) if answer else False
    verdict = {"decision": result.get("decision"), "correct": result.get("correct"), "lenient": lenient,
               "rank": result.get("rank"), "of": result.get("candidates"), "regret": result.get("regret"),
               "optimal": result.get("optimal"), "grade_status": result.get("grade_status"),
               "grade_reason": result.get("grade_reason")}
    score = Score(value={"decision": _mark(result.get("correct")), "lenient": _mark(lenient),
                         "optimal": _mark(result.get("optimal"))},
                  answer=None if result.get("decision") is None else str(result["decision"]),
                  explanation=result.get("grade_reason"), metadata=verdict)
    return EvalSample(id=f"{result['scenario']}-{result['question']}-{result['db']}-{result['technique']}",
                      epoch=result.get("epoch", 1), input=question.text, target=str(result.get("label")),
                      messages=messages_of(events), output=ModelOutput.from_content(result.get("model", ""), answer),
                      scores={"decision_scorer": score},
                      metadata={k: result.get(k) for k in ("scenario", "question", "db", "technique", "run_id",
                                                           "status", "llm_calls", "failure")})


def bench_log(results: list[dict], store, name: str, root=None) -> EvalLog:
    """The Inspect log of benchmark ``name``'s ``results`` (their transcripts read from run store ``store``)."""
    samples = [_sample(r, store, root) for r in results]
    models = sorted({str(r.get("model", "")) for r in results}) or [""]
    now = datetime.now(timezone.utc).isoformat()
    n = len(samples)
    scores = [EvalScore(name=key, scorer="decision_scorer", scored_samples=n, unscored_samples=0, metrics={
        "mean": EvalMetric(name="mean", value=sum(s.scores["decision_scorer"].value[key] == CORRECT
                                                   for s in samples) / n if n else 0.0)}) for key in SCORES]
    spec = EvalSpec(created=now, task="decision_qa", task_id=f"bench-{name}", run_id=f"bench-{name}-{int(time.time())}",
                    dataset=EvalDataset(name=name, samples=n), model=", ".join(models), config=EvalConfig(),
                    metadata={"source": "core bench"})
    return EvalLog(status="success", eval=spec, samples=samples,
                   results=EvalResults(total_samples=n, completed_samples=n, scores=scores),
                   stats=EvalStats(started_at=now, completed_at=now))


def write_bench_log(results: list[dict], store, name: str, path: str | Path, root=None) -> Path:
    """Write the Inspect log of ``results`` to ``path`` (a ``.eval`` or ``.json`` file); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(bench_log(results, store, name, root), str(path))
    return path
