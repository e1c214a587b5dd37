"""One verdict (issue 38): the same answers to dqa/building/15 (four candidates tied for best: 2677, the label,
2668, 2655 and 2623) through ``core grade``, a run's outcome, a benchmark's result row and a grade override give
the same decision, status, reason, best group, correctness and place in the simulator's ranking."""
from __future__ import annotations

import json

import pytest

import core.cli.main as cli
from core.agents.runtime import AgentRuntime
from core.analysis.grading import override_for
from core.benchmark.runner import Bench, BenchConfig
from core.model.run_settings import RunSettings

QUESTION = RunSettings("building", 15, "sqlite", "singlerag", "x")
ANSWERS = {  # answer: (decision, status, correct, optimal)
    "Raise building 2677.": (2677, "decided", True, True),  # plain correct
    "Raise building 2668.": (2668, "decided", False, True),  # tied with the label for best: wrong, yet optimal
    "Raise building 2616.": (2616, "decided", False, False),  # plain wrong
    "Any of buildings 2677, 2668, 2655 or 2623.": (None, "ambiguous", False, True),  # exactly the best group
    "any of 2677, 2668, 2655 or 2623": (None, "ambiguous", False, True),  # the same, as the issue quotes it
    "Either building 2677 or 2616.": (None, "ambiguous", False, False),  # ambiguous, not the best group
    "I cannot determine which building to raise.": (None, "none", False, False),  # no decision
}


def _reply(answer: str) -> str:
    return f"Thought: I now know the answer.\nFinal answer: {answer}"


def _from_cli(answer: str, capsys) -> dict:
    assert cli.main(["grade", "--scenario", "building", "--question", "15", "--json", answer]) == 0
    out = json.loads(capsys.readouterr().out)
    return {"decision": out["decision"], "status": out["status"], "reason": out["reason"],
            "correct": out["correct"], "best_group": out["best_group"], "rank": out["rank"], "tied": out["tied"],
            "regret": out["regret"], "optimal": bool(out["optimal"])}


def _from_run(answer: str, runtime: AgentRuntime, tmp_path) -> dict:
    replay = tmp_path / f"run-{abs(hash(answer))}.json"
    replay.write_text(json.dumps([_reply(answer)] * 2))  # the same answer after the "not queried yet" note
    result = runtime.start(RunSettings("building", 15, "sqlite", "singlerag", f"replay:{replay}"))
    o = result.outcome
    assert result.status == "finished" and o.final_answer == answer
    p = o.placement or {}
    return {"decision": o.decision, "status": o.grade_status, "reason": o.grade_reason, "correct": o.correct,
            "best_group": o.best_group, "rank": p.get("rank"), "tied": p.get("tied"), "regret": p.get("regret"),
            "optimal": p.get("regret") == 0 if p else o.best_group}


def _from_bench(tmp_path, dqa_dir) -> list[dict]:
    folder = tmp_path / "replays"
    folder.mkdir()
    for epoch, answer in enumerate(ANSWERS, 1):  # one epoch an answer
        stem = "building-15-sqlite-singlerag" + (f"-e{epoch}" if epoch > 1 else "")
        (folder / f"{stem}.json").write_text(json.dumps([_reply(answer)] * 2))
    bench = Bench(BenchConfig(["singlerag"], f"replay:{folder}", scenario="building", questions="15", db="sqlite",
                              epochs=len(ANSWERS), home=tmp_path / "bench-home", dqa_root=dqa_dir,
                              out=tmp_path / "out"))
    bench.run()
    rows = sorted(bench.results(), key=lambda r: r["epoch"])
    assert [r["final_answer"] for r in rows] == list(ANSWERS)
    return [{"decision": r["decision"], "status": r["grade_status"], "reason": r["grade_reason"],
             "correct": r["correct"], "best_group": r["optimal"] and r["rank"] is None, "rank": r["rank"],
             "tied": r["tied"], "regret": r["regret"], "optimal": r["optimal"]} for r in rows]


def test_the_same_answers_get_the_same_verdict_on_every_path(dqa_dir, tmp_path, capsys):
    runtime = AgentRuntime(tmp_path / "home")
    try:
        runs = [_from_run(answer, runtime, tmp_path) for answer in ANSWERS]
    finally:
        runtime.close()
    graded = [_from_cli(answer, capsys) for answer in ANSWERS]
    benched = _from_bench(tmp_path, dqa_dir)
    for answer, cli_v, run_v, bench_v in zip(ANSWERS, graded, runs, benched):
        assert cli_v == run_v == bench_v, answer
        decision, status, correct, optimal = ANSWERS[answer]
        assert (cli_v["decision"], cli_v["status"], cli_v["correct"], cli_v["optimal"]) == (
            decision, status, correct, optimal), answer
        # an override to the decision read gives the same decision, correctness and place
        made = override_for(QUESTION, decision, by="ana")
        placement = {k: v for k, v in (made.placement or {}).items() if k in ("rank", "tied", "regret")}
        assert (made.decision, made.correct, placement or None) == (
            decision, correct, {k: cli_v[k] for k in ("rank", "tied", "regret")} if decision else None), answer
    group = graded[3]
    assert group["best_group"] and "exactly the candidates tied for the best score" in group["reason"]


@pytest.mark.parametrize("answer", ["", None])
def test_no_answer_is_neither_right_nor_wrong(dqa, answer):
    from core.analysis.grading import judge

    question = dqa.question("building", 15)
    v = judge(question, dqa.database(question), answer)
    assert (v.decision, v.status, v.correct, v.optimal, v.best_group) == (None, "none", None, None, False)
