"""``python -m core bench``: run DQA, or part of it, with techniques and a model; print progress and the accuracy
per scenario x database x technique; write the reports (CSV and JSON) beside the results."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.agents.techniques import TECHNIQUES
from core.backends.registry import BACKENDS
from core.scenario import SCENARIOS

DESCRIPTION = """Run DQA questions with one or more techniques and a model. Each result is stored as its item
finishes (results.sqlite in the output directory); rerunning the same command skips the finished items.
LLM replies are cached on disk, so an identical rerun makes no LLM call (--no-cache turns the cache off).
--llm replay:DIR plays DIR/{scenario}-{question}-{db}-{technique}.json (or {scenario}-{question}-{technique}.json)
for each item. Reports (the paper's tables) go to OUT/report."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all", help="default all")
    p.add_argument("--db", choices=[*BACKENDS, "all"], default="sqlite",
                   help="a backend, or all available ones (default sqlite)")
    p.add_argument("--technique", action="append", choices=list(TECHNIQUES), required=True,
                   help="repeat for several")
    p.add_argument("--llm", help="a model name (default OPENAI_MODEL), replay:FILE or replay:DIR")
    p.add_argument("--questions", default="all", help="numbers and ranges, e.g. 1-10,15 (default all)")
    p.add_argument("--concurrency", type=int, default=1, help="items at once (default 1)")
    p.add_argument("--rpm", type=float, help="at most this many LLM requests a minute")
    p.add_argument("--out", type=Path, help="results directory (default DATA_HOME/bench/NAME)")
    p.add_argument("--name", help="the results directory's name under DATA_HOME/bench (default: the model's)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the LLM reply cache")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default OPENAI_BASE_URL)")
    p.add_argument("--temperature", type=float, default=0.0, help="default 0")


def duration(seconds: float | None) -> str:
    """``1m 05s``, ``42s``, or ``?`` for None."""
    if seconds is None:
        return "?"
    minutes, s = divmod(round(seconds), 60)
    return f"{minutes}m {s:02d}s" if minutes else f"{s}s"


def _line(item, result, error, progress) -> str:
    if result is None:
        return f"{item.name}: not run: {error}"
    verdict = {True: "right", False: "wrong", None: "no label"}[result["correct"]]
    decision = "no candidate" if result["decision"] is None else result["decision"]
    detail = f"{decision}" + (f"; label {result['label']}" if result["correct"] is False else "")
    if result["failure"]:
        detail += f"; {result['failure']}"
    acc = progress.accuracy
    return (f"{item.name}: {verdict} ({detail}) in {result['wall_s']:.2f} s | accuracy "
            f"{'-' if acc is None else f'{acc:.1f}%'} | ETA {duration(progress.eta_s)}")


def main(args) -> int:
    import pandas as pd

    from core.benchmark import reports
    from core.benchmark.items import BenchError
    from core.benchmark.prices import load_prices
    from core.benchmark.results import read_results
    from core.benchmark.runner import Bench, BenchConfig
    from core.llm import LLMError

    config = BenchConfig(args.technique, args.llm or "", scenario=args.scenario, db=args.db,
                         questions=args.questions, concurrency=args.concurrency, rpm=args.rpm, out=args.out,
                         name=args.name, cache=not args.no_cache, base_url=args.base_url, temperature=args.temperature)
    try:
        bench = Bench(config)
        prices = load_prices()
    except (BenchError, LLMError, ValueError) as e:
        print(f"error ({getattr(e, 'kind', 'bench')}): {e}", file=sys.stderr)
        return 1
    for note in bench.notes:
        print(f"note: {note}")
    total = len(bench.work.items)
    print(f"bench: {total} items, model {bench.model}, results in {bench.directory}")
    print(f"skipped {total - len(bench.pending)} items already done; {len(bench.pending)} to run, "
          f"{config.concurrency} at a time", flush=True)

    def show(item, result, error, progress):
        print(f"[{progress.finished + len(progress.errors)}/{total}] {_line(item, result, error, progress)}",
              flush=True)

    try:
        progress = bench.run(on_result=show)
    except KeyboardInterrupt:
        print("interrupted: the finished items are stored; rerun the same command to go on", file=sys.stderr)
        return 130
    print("accuracy (correct/total):")
    for r in reports.accuracy(bench.results()).itertuples():
        paper = f"  (paper {r.paper})" if pd.notna(r.paper) else ""
        print(f"  {r.scenario:<9} {r.db:<8} {r.technique:<13} {r.correct}/{r.total}  {r.accuracy:.1f}%{paper}")
    written = reports.export(read_results(bench.directory), prices, bench.directory / "report")
    print(f"reports of all results in {bench.directory}: {', '.join(p.name for p in written)} in report/")
    if progress.errors:
        print(f"{len(progress.errors)} items could not run (a rerun tries them again):", file=sys.stderr)
        for error in progress.errors[:10]:
            print(f"  {error}", file=sys.stderr)
    if progress.stopped:
        print(f"stopped: {progress.stopped}", file=sys.stderr)
    return 1 if progress.errors or progress.stopped else 0
