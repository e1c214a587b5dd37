"""A benchmark's budget running out mid-benchmark (issue 19): it stops before the call that would go past the cap,
keeps the finished items, names the cap, and a rerun goes on with the rest; the per-run limits on the command line;
stuck runs counted apart in the reports. Scripted replay transcripts (tests/bench_scripts.py) over DQA.

The budget is a row of the result store shared by every worker of the benchmark (issue 25): each call reserved by
one conditional UPDATE, so processes racing on both engines never exceed the call cap and overshoot the token cap
by at most the calls in flight, and two workers of one benchmark stop together at its cap."""
from __future__ import annotations

import json
import multiprocessing
import re
import sqlite3

import pytest

from core.benchmark import reports
from core.benchmark.budget import Budget, BudgetReached
from core.benchmark.items import BenchError
from core.benchmark.results import ResultStore, read_results
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
    assert "repeat limit must be a whole number from 1 to 100" in bad.communicate(timeout=120)[1] and bad.returncode == 2


def test_the_command_line_caps_the_calls(scripts, tmp_path, dqa_dir):
    process = cli(tmp_path, "--scenario", "locating", "--technique", "iterrag", "--llm", f"replay:{scripts}",
                  "--questions", "1-6", "--concurrency", "2", "--out", str(tmp_path / "out"), "--no-cache",
                  "--budget-calls", "4", dqa_dir=dqa_dir)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 1
    assert re.search(r"^stopped: benchmark call budget reached: [34] LLM calls made( and 1 in flight)? of the 4 "
                     r"allowed; finished items are kept, rerun to go on with the rest$", err, re.M), out + err
    budgets = sqlite3.connect(tmp_path / "out" / "results.sqlite").execute(
        "SELECT max_calls, calls, in_flight FROM budgets").fetchall()
    assert budgets == [(4, 4, 0)]  # the calls in flight when it stopped were answered: exactly the cap


def test_a_cost_budget_needs_a_price_and_counts_at_the_table_rate(tmp_path):
    store = ResultStore(tmp_path / "b")
    with pytest.raises(BenchError, match="not in the price table"):
        Budget.open(store, "run", max_cost_usd=1.0, price=None, model="my-model")
    budget = Budget.open(store, "run", max_cost_usd=0.5, price=[2.5, 10.0])
    budget.reserve()
    budget.settle(Completion("x", 100_000, 10_000, 0.0, False))
    assert budget.cost_usd == pytest.approx(0.35) and budget.reached() is None
    budget.reserve()
    budget.settle(Completion("x", 100_000, 0, 0.0, False))
    assert budget.reached().startswith("benchmark cost budget reached: $0.6000 spent of the $0.5000 allowed")
    with pytest.raises(BudgetReached, match="cost budget reached") as e:
        budget.reserve()
    assert e.value.kind == "budget" and (budget.calls, budget.in_flight) == (2, 0)


@pytest.mark.usefixtures("store_engine")
def test_a_budget_lives_in_the_result_store_and_is_reopened_by_its_id(tmp_path):
    budget = Budget.open(ResultStore(tmp_path / "b"), "run1", max_tokens=1000, max_calls=2)
    again = Budget.open(ResultStore(tmp_path / "b"), "run1", max_calls=99)  # there already: keeps its caps
    budget.reserve()
    again.reserve()
    assert budget.in_flight == 2 and budget.reached() == (
        "benchmark call budget reached: 0 LLM calls made and 2 in flight of the 2 allowed; finished items are kept, "
        "rerun to go on with the rest")
    with pytest.raises(BudgetReached, match="call budget reached"):
        again.reserve()  # the calls in flight count: the cap is never exceeded
    budget.release()  # a call that failed without an answer gives its place back
    again.settle(Completion("x", 300, 200, 0.0, False))
    assert (again.calls, again.tokens, again.in_flight, again.cost_usd) == (1, 500, 0, None)
    budget.reserve()
    budget.settle(Completion("x", 400, 200, 0.0, False))
    assert budget.reached() == ("benchmark token budget reached: 1,100 tokens spent of the 1,000 allowed; finished "
                                "items are kept, rerun to go on with the rest")
    with pytest.raises(BenchError, match="no benchmark budget 'run1'"):
        Budget(ResultStore(tmp_path / "other"), "run1")  # another benchmark's store
    with pytest.raises(BenchError, match="at least 1 LLM call"):
        Budget.open(ResultStore(tmp_path / "b"), "run2", max_calls=0)


def test_the_benchmark_llm_reserves_each_model_call_and_gives_back_a_failed_one(tmp_path):
    from core.benchmark.cache import CachingLLM
    from core.llm.client import LLMError

    class Server:
        """Answers, fails (a network error past its retries), answers; counts what it was asked."""

        def __init__(self):
            self.script, self.asked = [True, False, True], 0

        def complete(self, messages, stop, on_retry=None):
            self.asked += 1
            if not self.script.pop(0):
                raise LLMError("network", "the server went away")
            return Completion("Final answer: krakow", 10, 2, 1.0, False)

    server = Server()
    budget = Budget.open(ResultStore(tmp_path / "b"), "run", max_calls=2)
    llm = CachingLLM(lambda answered: server, {"model": "m"}, None, budget=budget)
    llm.complete([], [])
    assert (budget.calls, budget.tokens, budget.in_flight) == (1, 12, 0)
    with pytest.raises(LLMError, match="went away"):
        llm.complete([], [])
    assert (budget.calls, budget.in_flight) == (1, 0)  # the failed call is out of flight and not counted
    llm.complete([], [])
    with pytest.raises(BudgetReached, match="2 LLM calls made of the 2 allowed"):
        llm.complete([], [])
    assert server.asked == 3 and (budget.calls, budget.in_flight) == (2, 0)  # refused before asking the model


@pytest.mark.usefixtures("store_engine")
def test_racing_processes_never_exceed_the_call_cap_and_overshoot_tokens_by_at_most_the_calls_in_flight(tmp_path):
    """8 processes released together reserve, settle (30 tokens) or release (every fifth) calls on one budget until
    refused: first with a cap of 100 calls, then of 2,000 tokens. Each holds at most one call in flight."""
    from tests.budget_worker import spend

    workers, tokens, directory = 8, 30, tmp_path / "b"
    store = ResultStore(directory)
    Budget.open(store, "calls", max_calls=100)
    Budget.open(store, "tokens", max_tokens=2000)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers, timeout=300), ctx.Queue()
    processes = [ctx.Process(target=spend, args=(str(directory), ["calls", "tokens"], 500, tokens, barrier, results))
                 for _ in range(workers)]
    for p in processes:
        p.start()
    seen: dict[str, list] = {"calls": [], "tokens": []}
    for _ in range(2 * workers):
        budget_id, *outcome = results.get(timeout=300)
        assert budget_id != "error", outcome[0]
        seen[budget_id].append(outcome)
    for p in processes:
        p.join(60)
    for budget_id, kind in (("calls", "call"), ("tokens", "token")):
        budget = Budget(store, budget_id)
        assert budget.in_flight == 0 and budget.calls == sum(s for s, _, _ in seen[budget_id])  # none lost
        assert budget.tokens == budget.calls * tokens
        assert sum(r for _, r, _ in seen[budget_id]) > 0  # calls were released too
        assert all(refusal.startswith(f"benchmark {kind} budget reached") for _, _, refusal in seen[budget_id])
    calls = Budget(store, "calls").calls
    assert 100 - workers < calls <= 100  # never past the cap; short of it by the calls in flight released at most
    assert 2000 <= Budget(store, "tokens").tokens < 2000 + workers * tokens  # past it by the calls in flight at most


@pytest.mark.usefixtures("store_engine")
def test_two_workers_of_one_benchmark_share_its_budget_and_stop_together_at_the_cap(scripts, tmp_path, dqa_dir):
    """Two processes each run half of one benchmark's items (as a worker handed its budget id does); each item makes
    at least two calls, so either half alone would go past the cap of 5 calls."""
    from tests.budget_worker import bench

    shared = config(scripts, tmp_path, dqa_dir, "shared", budget_calls=5, budget_id="run-1")
    budget = Bench(shared).open_budget("run-1")  # the benchmark and its budget made, as the app does before its workers
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2, timeout=300), ctx.Queue()
    processes = [ctx.Process(target=bench, args=(shared, questions, barrier, results))
                 for questions in ([1, 3, 5], [2, 4, 6])]
    for p in processes:
        p.start()
    outcomes = [results.get(timeout=300) for _ in processes]
    for p in processes:
        p.join(60)
    assert all(stopped.startswith("benchmark call budget reached") for _, stopped in outcomes), outcomes
    assert (budget.calls, budget.in_flight) == (5, 0)  # the calls in flight at the cap were answered: exactly it
    kept = read_results(tmp_path / "shared")
    assert len(kept) == sum(done for done, _ in outcomes) < 6 and sum(r["llm_calls"] for r in kept) < 5


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


def test_a_benchmark_budget_counts_what_abandoned_attempts_spent(tmp_path):
    """Issue 45 item 2: the tokens of attempts abandoned at a time limit count, whether the call then answered or
    failed for good."""
    budget = Budget.open(ResultStore(tmp_path / "b"), "run", max_tokens=1000)
    budget.reserve()
    budget.settle(Completion("x", 300, 20, 0.0, False, failed_prompt_tokens=300, failed_completion_tokens=80))
    assert budget.tokens == 700
    budget.reserve()
    budget.release([{"error_kind": "timeout", "prompt_tokens": 300, "completion_tokens": 50},
                    {"error_kind": "server"}])  # a failed call: its timed-out attempt spent, the server error not
    assert budget.tokens == 1050 and budget.reached().startswith("benchmark token budget reached: 1,050 tokens")
