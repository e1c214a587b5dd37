"""A benchmark's budget running out mid-benchmark (issue 19): it stops before the call that would go past the cap,
keeps the finished items, names the cap, and a rerun goes on with the rest; the per-run limits on the command line;
stuck runs counted apart in the reports. Scripted replay transcripts (tests/bench_scripts.py) over DQA."""
from __future__ import annotations

import json
import re

import pytest

from core.benchmark import reports
from core.benchmark.budget import Budget
from core.benchmark.items import BenchError
from core.benchmark.results import read_results
from core.benchmark.runner import Bench, BenchConfig
from core.llm.client import Completion
from tests.bench_scripts import write_transcripts
from tests.test_benchmark_dqa import cli

QUESTIONS = [1, 2, 3, 4, 5, 6]


@pytest.fixture(scope="module")
def scripts(dqa, tmp_path_factory):
    folder = tmp_path_factory.mktemp("budget_scripts")
    write_transcripts(dqa, folder, {"locating": QUESTIONS}, ["sqlite"], ["iterrag"], lambda q: "right")
    return folder


def config(folder, tmp_path, dqa_dir, out: str, **kw) -> BenchConfig:
    return BenchConfig(["iterrag"], f"replay:{folder}", scenario="locating", questions="1-6", out=tmp_path / out,
                       home=tmp_path / "home", dqa_root=dqa_dir, cache=False, **kw)


def test_a_budget_running_out_mid_benchmark_stops_cleanly_and_the_rest_resumes(scripts, tmp_path, dqa_dir):
    measured = Bench(config(scripts, tmp_path, dqa_dir, "measure")).run()
    assert measured.done == 6
    spent = {r["question"]: r["prompt_tokens"] + r["completion_tokens"] for r in read_results(tmp_path / "measure")}
    assert measured.tokens == sum(spent.values())  # the live counter counts every call once
    cap = spent[1] + spent[2] + spent[3] // 2  # runs out during the third item
    bench = Bench(config(scripts, tmp_path, dqa_dir, "capped", budget_tokens=cap))
    progress = bench.run()
    kept = read_results(tmp_path / "capped")
    assert sorted(r["question"] for r in kept) == [1, 2]  # finished items kept; the one cut short is not stored
    assert progress.stopped.startswith("benchmark token budget reached:") and f"of the {cap:,} allowed" in \
        progress.stopped
    assert len(progress.errors) == 1 and progress.errors[0].startswith("locating-3-sqlite-iterrag")
    assert cap <= progress.tokens < cap + spent[3]  # stopped before the call that would go past the cap
    rerun = Bench(config(scripts, tmp_path, dqa_dir, "capped"))
    assert [i.question for i in rerun.pending] == [3, 4, 5, 6]
    assert rerun.run().done == 4 and len(read_results(tmp_path / "capped")) == 6


def test_the_command_line_sets_the_budget_and_the_run_limits(scripts, tmp_path, dqa_dir):
    args = ["--scenario", "locating", "--technique", "iterrag", "--llm", f"replay:{scripts}", "--questions", "1-6",
            "--out", str(tmp_path / "out"), "--no-cache", "--budget-tokens", "1", "--max-llm-calls", "12",
            "--max-repeats", "2"]
    process = cli(tmp_path, *args, dqa_dir=dqa_dir)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 1
    assert re.search(r"^stopped: benchmark token budget reached: [\d,]+ tokens spent of the 1 allowed; finished "
                     r"items are kept, rerun to go on with the rest$", err, re.M), err
    assert re.search(r"^this run spent [\d,]+ tokens, \$0\.0000 on LLM calls$", out, re.M), out
    params = json.loads(__import__("sqlite3").connect(tmp_path / "out" / "results.sqlite")
                        .execute("SELECT value FROM meta").fetchone()[0])
    assert params["limits"]["max_llm_calls"] == 12 and params["limits"]["max_repeats"] == 2
    bad = cli(tmp_path, *args[:-6], "--max-repeats", "0", dqa_dir=dqa_dir)
    assert "repeat limit must be at least 1" in bad.communicate(timeout=120)[1] and bad.returncode == 1


def test_a_cost_budget_needs_a_price_and_counts_at_the_table_rate():
    with pytest.raises(BenchError, match="not in the price table"):
        Budget(max_cost_usd=1.0, price=None, model="my-model")
    budget = Budget(max_cost_usd=0.5, price=[2.5, 10.0])
    budget.spend(Completion("x", 100_000, 10_000, 0.0, False))
    assert budget.cost_usd == pytest.approx(0.35) and budget.reached() is None
    budget.spend(Completion("x", 100_000, 0, 0.0, False))
    assert budget.reached().startswith("benchmark cost budget reached: $0.6000 spent of the $0.5000 allowed")
    with pytest.raises(Exception, match="cost budget reached") as e:
        budget.check()
    assert e.value.kind == "budget"


def test_stuck_runs_are_counted_apart_in_the_reports():
    base = {"scenario": "locating", "db": "sqlite", "language": "sql", "technique": "iterrag", "model": "m",
            "correct": False, "failure": "OTH"}
    results = [{**base, "question": 1, "status": "stuck"}, {**base, "question": 2, "status": "failed"},
               {**base, "question": 3, "status": "finished", "correct": True, "failure": None}]
    row = reports.accuracy(results).iloc[0]
    assert (row["correct"], row["total"], row["stuck"]) == (1, 3, 1)


def test_a_run_with_no_answer_is_not_answered_by_one_rule_in_the_reports_and_the_bench_line():
    """Issue 29: a stuck run counted as wrong, a failed one with no answer stored correct false but showed an empty
    column. One rule: no final answer is "not answered" (correct empty), counted in n as not correct, a failure
    (OTH) in failures.csv; an answer is graded whatever the status."""
    from core.benchmark.runner import Progress
    from core.cli.bench import _line

    base = {"scenario": "locating", "db": "sqlite", "language": "sql", "technique": "iterrag", "model": "m",
            "label": "krakow", "decision": None, "grade_status": "none", "wall_s": 1.0}
    results = [{**base, "question": 1, "status": "stuck", "correct": None, "failure": "OTH", "final_answer": None},
               {**base, "question": 2, "status": "context_exceeded", "correct": None, "failure": "OTH",
                "final_answer": None},
               {**base, "question": 3, "status": "stuck", "correct": True, "failure": None, "decision": "krakow",
                "final_answer": "krakow"}]
    row = reports.accuracy(results).iloc[0]
    assert (row["correct"], row["n"], row["stuck"]) == (1, 3, 2)
    assert reports.failures(results).iloc[0]["wrong"] == 2
    progress = Progress(3, 0, 0)
    item = type("Item", (), {"name": "locating-1-sqlite-iterrag"})()
    assert _line(item, results[0], None, progress).startswith("locating-1-sqlite-iterrag: not answered (no decision; "
                                                              "label krakow; OTH; stuck)")
    assert _line(item, results[2], None, progress).startswith("locating-1-sqlite-iterrag: right (krakow; stuck)")


def test_cost_caps_need_the_models_price_before_anything_runs(scripts, tmp_path, dqa_dir):
    from core.model.run_settings import Limits

    base = BenchConfig(["iterrag"], "my-local-model", scenario="locating", questions="1", base_url="http://x/v1",
                       out=tmp_path / "out", home=tmp_path / "home", dqa_root=dqa_dir)
    for kw in ({"budget_cost": 1.0}, {"limits": Limits(max_cost_usd=0.1)}):
        with pytest.raises(BenchError, match="not in the price table"):
            Bench(BenchConfig(**{**base.__dict__, **kw}))


def test_the_smoke_benchmark_takes_the_budget_and_the_run_limits(tmp_path):
    def smoke(out: str, *flags):
        process = cli(tmp_path, "--smoke", "--out", str(tmp_path / out), *flags, dqa_dir=tmp_path / "no-dqa")
        return process, *process.communicate(timeout=300)

    process, _, err = smoke("full")
    assert process.returncode == 0, err
    locating = sum(r["prompt_tokens"] + r["completion_tokens"] for r in read_results(tmp_path / "full")
                   if r["scenario"] == "locating")  # the smoke runs Locating's items first
    process, out, err = smoke("capped", "--budget-tokens", str(locating + 1), "--max-llm-calls", "12")
    assert process.returncode == 1 and "stopped: benchmark token budget reached" in err, out + err
    assert {r["scenario"] for r in read_results(tmp_path / "capped")} == {"locating"}
    params = json.loads(__import__("sqlite3").connect(tmp_path / "capped" / "results.sqlite")
                        .execute("SELECT value FROM meta").fetchone()[0])
    assert params["limits"]["max_llm_calls"] == 12
    process, out, err = smoke("capped", "--max-llm-calls", "12")  # the same limits, no budget
    assert process.returncode == 0 and "skipped 2 items already done; 2 to run" in out, out + err
    assert len(read_results(tmp_path / "capped")) == 4
