"""Print the benchmark runner's speed with the replay LLM (scripted PlanRAG transcripts, nothing from DQA kept).

1. Framework overhead, one item at a time (warm databases): everything but waiting for the LLM, per agent step,
   and the share of it spent in the run store (core/runs.py); the time to get a question ready (first LLM call).
2. PlanRAG over every DQA question on SQLite and Ladybug (602 question-database pairs), --concurrency at once,
   from cold databases; then the same from the LLM reply cache.

Targets (issue "Benchmark runner"): overhead <= 20 ms per agent step, <= 1 s to get any question ready; the 602
pairs in <= 3 minutes on 2 cores.

3. With --epochs K: the same questions in K epochs against one, per sample, and the time to make the reports.

Usage: python bench/bench_runner.py [--concurrency N] [--questions 1-200] [--epochs K] [DQA_DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.benchmark import reports  # noqa: E402
from core.benchmark.items import parse_numbers  # noqa: E402
from core.benchmark.runner import Bench, BenchConfig  # noqa: E402
from core.scenarios.dqa.source import DQA  # noqa: E402
from core.store.runs import RunStore  # noqa: E402
from core.config.settings import dqa_dir  # noqa: E402
from tests.bench_scripts import VARIANTS, write_transcripts  # noqa: E402

DBS = ["sqlite", "ladybug"]
store_time = [0.0]


def _timed(method):
    def timed(*args, **kw):
        start = time.perf_counter()
        try:
            return method(*args, **kw)
        finally:
            store_time[0] += time.perf_counter() - start
    return timed


for _name in ("create", "add_event", "update", "get"):  # to tell the run store's share of the overhead
    setattr(RunStore, _name, _timed(getattr(RunStore, _name)))


def run(home: Path, replays: Path, out: str, questions: str, concurrency: int, dqa,
        epochs: int = 1, cache: bool = True) -> tuple[float, list[dict]]:
    """Both databases (as ``--db sqlite`` then ``--db ladybug``); the seconds taken and the results."""
    start, results = time.perf_counter(), []
    for db in DBS:
        bench = Bench(BenchConfig(["planrag"], f"replay:{replays}", db=db, questions=questions,
                                  concurrency=concurrency, out=home / out, home=home, dqa_root=dqa, epochs=epochs,
                                  cache=cache))
        bench.run()
        results += bench.results()
    return time.perf_counter() - start, results


def overhead(label: str, results: list[dict], store_s: float) -> None:
    steps = sum(r["llm_calls"] for r in results)
    ready = [r["ready_s"] for r in results]
    print(f"{label}: overhead {1000 * sum(r['overhead_s'] for r in results) / steps:.1f} ms per step (target 20), "
          f"of which the run store {1000 * store_s / steps:.1f} ms; ready median {1000 * statistics.median(ready):.0f} "
          f"ms, max {1000 * max(ready):.0f} ms (target 1000)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dqa", nargs="?", default=dqa_dir())
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--questions", default="all")
    parser.add_argument("--epochs", type=int, default=1, help="also measure the overhead of K epochs")
    args = parser.parse_args()
    if args.dqa is None:
        sys.exit("no DQA directory: pass it or set DQA_DIR")
    dqa = DQA(args.dqa)
    numbers = parse_numbers(args.questions)
    chosen = {s: [n for n in numbers or range(1, len(dqa.questions(s)) + 1) if n <= len(dqa.questions(s))]
              for s in ("locating", "building")}
    with tempfile.TemporaryDirectory() as tmp:
        home, replays = Path(tmp), Path(tmp) / "replays"
        write_transcripts(dqa, replays, chosen, DBS, ["planrag"], lambda q: VARIANTS[q.number % len(VARIANTS)],
                          lambda q: q.number % 3)
        run(home, replays, "warm", "1-20", 1, args.dqa)  # loads the databases of the sample
        store_time[0] = 0.0
        _, sample = run(home, replays, "sample", "1-20", 1, args.dqa)
        overhead(f"one at a time, {len(sample)} pairs (warm)", sample, store_time[0])

        seconds, results = run(home, replays, "all", args.questions, args.concurrency, args.dqa)
        steps = sum(r["llm_calls"] for r in results)
        print(f"PlanRAG, {len(results)} pairs, {args.concurrency} at a time (cold): {seconds:.1f} s (target 180), "
              f"{steps} agent steps, ready max {max(r['ready_s'] for r in results):.2f} s")
        seconds, again = run(home, replays, "cached", args.questions, args.concurrency, args.dqa)
        print(f"the same from the reply cache: {seconds:.1f} s, {sum(r['llm_calls'] - r['cached_calls'] for r in again)} "
              f"LLM calls, {sum(r['cached_calls'] for r in again)} cached replies")
        if args.epochs > 1:
            epochs(home, replays, args)


def epochs(home: Path, replays: Path, args) -> None:
    """The overhead of epochs: the same questions once, then K epochs, both without the reply cache (every sample
    plays its transcript; warm databases), per sample and per agent step; and the reports of K epochs against those
    of one."""
    store_time[0] = 0.0
    seconds_one, one = run(home, replays, "epoch-1", args.questions, args.concurrency, args.dqa, cache=False)
    overhead("1 epoch, no cache", one, store_time[0])
    store_time[0] = 0.0
    seconds_k, many = run(home, replays, "epochs", args.questions, args.concurrency, args.dqa, epochs=args.epochs,
                          cache=False)
    overhead(f"{args.epochs} epochs, no cache", many, store_time[0])
    per_one, per_k = seconds_one / len(one), seconds_k / len(many)
    print(f"{args.epochs} epochs: {len(many)} samples in {seconds_k:.1f} s, {1000 * per_k:.1f} ms a sample against "
          f"{1000 * per_one:.1f} ms for one epoch ({100 * (per_k / per_one - 1):+.1f}% a sample)")
    for label, results in (("1 epoch", one), (f"{args.epochs} epochs", many)):
        start = time.perf_counter()
        reports.tables(results, {})
        print(f"reports of {label} ({len(results)} results): {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
