"""``python -m core bench``: run DQA, or part of it, with techniques and a model; print progress and the accuracy
per scenario x database x technique; write the reports (CSV and JSON) beside the results."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from functools import partial
from pathlib import Path

from core.auth.roles import local_operator
from core.model.technique import FEATURED, TECHNIQUES, parse_voted
from core.backends.registry import BACKENDS
from core.cli.args import (add_budget_arguments, add_fidelity_arguments, add_limit_arguments, add_llm_arguments,
                           bounded, error_line, limits_from, llm_settings)
from core.analysis.format import duration, number, percent, spent, usd
from core.scenarios.catalog import SOURCES
from core.benchmark.items import BenchError
from core.llm.prices import load_prices
from core.benchmark.results import read_all, read_not_run, read_results
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the runner loads LangGraph: only ``bench`` itself needs it, not every ``python -m core``
    from core.benchmark.runner import Bench, BenchConfig
from core.llm.client import LLMError
from core.config.secrets import scrub
from core.jobs import queue
from core.auth.gate import asked_by
from core.store import database
from core.store.runs import RunStore
from core.config import home as project_home

DESCRIPTION = """Run DQA questions with one or more techniques and a model. Each result is stored as its item
finishes (results.sqlite in the output directory); rerunning the same command skips the finished items.
LLM replies are cached on disk, so an identical rerun makes no LLM call (--no-cache turns the cache off).
Ctrl-C starts no new item and says which items in progress it waits for; a second Ctrl-C stops at once.
--llm replay:DIR plays DIR/{scenario}-{question}-{db}-{technique}.json (or {scenario}-{question}-{technique}.json)
for each item (and the shipped naming {source}_{scenario}_{question}_{sql|cypher}_{technique}.json).
--source demo runs the built-in demo scenarios; --smoke is a benchmark without a model: the demo questions
played from the shipped scripted transcripts (assets/replays) with PlanRAG and IterRAG, to try the whole
pipeline (results, reports) in seconds. Reports (the paper's tables) go to OUT/report: every accuracy with n and
a 95% Wilson interval (items that could not run count as not correct), and paired comparisons of the techniques.
--epochs K runs every item K times (a rerun with a larger K runs only the missing epochs); the reports then treat
a question's samples as a cluster (docs/verdicts.md); --vote N adds each technique's majority decision over N
samples as TECHNIQUE+voteN."""

OPERATOR = local_operator()  # who acts on the command line: the machine's operator (README, Sign-in)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="all",
                   help="locating, building, a plugin's name (python -m core scenario list), several separated by "
                        "commas, or all (default): every scenario with questions in --source")
    p.add_argument("--db", choices=[*BACKENDS, "all"], default="sqlite",
                   help="a backend, or all available ones (default sqlite)")
    p.add_argument("--technique", action="append", choices=list(TECHNIQUES),
                   help=f"repeat for several (required, but for --smoke: {' and '.join(FEATURED)})")
    p.add_argument("--source", choices=list(SOURCES), default="dqa",
                   help="the questions: DQA (default), the built-in demo scenarios, or a plugin scenario's own "
                        "(scenario)")
    p.add_argument("--smoke", action="store_true",
                   help="no model needed: demo question 1 played from the shipped transcripts (assets/replays); with "
                        "--source scenario, question 1 of each plugin scenario")
    p.add_argument("--llm", help="a model name (default OPENAI_MODEL), replay:FILE or replay:DIR")
    p.add_argument("--questions", default="all", help="numbers and ranges, e.g. 1-10,15 (default all)")
    p.add_argument("--concurrency", type=bounded("concurrency"), default=1,
                   help="items at once (default 1); fewer LLM calls at once, said in a note, when the server "
                        "times out under load")
    p.add_argument("--rpm", type=bounded("rpm"), help="at most this many LLM requests a minute")
    p.add_argument("--dqa-dir", type=Path, metavar="DIR",
                   help="the question set: a DQA folder or one made by python -m sims generate (default DQA_DIR)")
    p.add_argument("--out", type=Path, help="results directory (default PLANRAG_HOME/bench/NAME)")
    p.add_argument("--name", help="the results directory's name under PLANRAG_HOME/bench (default: the model's)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the LLM reply cache")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default OPENAI_BASE_URL)")
    p.add_argument("--temperature", type=bounded("temperature"), default=0.0, help="default 0")
    p.add_argument("--top-p", type=bounded("top_p"), help="nucleus sampling (default: not sent, the server's own)")
    p.add_argument("--seed", type=bounded("seed"), help="the sampling seed of epoch 1, for servers that take one (epoch e sends "
                                            "SEED + e - 1; default: not sent)")
    p.add_argument("--epochs", type=bounded("epochs"), default=1, metavar="K",
                   help="run every item K times, each a run stored as such (default 1); a rerun with a larger K runs "
                        "only the missing epochs; reports then give clustered intervals (docs/verdicts.md)")
    p.add_argument("--vote", type=bounded("vote"), default=0, metavar="N",
                   help="also record each technique's decision by majority over N samples (epochs 1..N, run if "
                        "missing) as technique TECHNIQUE+voteN, costing the N samples' calls")
    p.add_argument("--inspect-log", type=Path, metavar="FILE",
                   help="also write the results as an Inspect AI eval log, FILE.eval or FILE.json (inspect view)")
    add_fidelity_arguments(p)
    add_llm_arguments(p, unattended=True)
    add_limit_arguments(p)
    add_budget_arguments(p)




def _line(item, result, error, progress) -> str:
    if result is None:
        return f"{item.name}: not run: {error}"
    if result["status"] == "failed":  # what happened, not "no candidate (wrong)"
        acc = progress.accuracy
        return (f"{item.name}: failed ({result.get('error_kind') or 'error'}): {result.get('error')} in "
                f"{number(result['wall_s'], decimals=2)} s | accuracy {'-' if acc is None else percent(acc)} | "
                f"ETA {duration(progress.eta_s)}")
    verdict = ({True: "right", False: "wrong", None: "no label"}[result["correct"]] if result.get("final_answer")
               else "not answered")
    status = result.get("grade_status")
    decision = (result["decision"] if result["decision"] is not None else
                "ambiguous answer" if status == "ambiguous" else "no decision")
    detail = f"{decision}" + (f"; label {result['label']}" if result.get("failure") else "")
    if result["failure"]:
        detail += f"; {result['failure']}"
    if result["status"] in ("stuck", "context_exceeded"):
        detail += f"; {result['status']}"
    acc = progress.accuracy
    return (f"{item.name}: {verdict} ({detail}) in {number(result['wall_s'], decimals=2)} s | accuracy "
            f"{'-' if acc is None else f'{percent(acc)} of n={progress.n}'} | {spent(progress)} | "
            f"ETA {duration(progress.eta_s)}")



def main(args) -> int:
    if not args.smoke and not args.technique:
        print("error: --technique is required (or --smoke)", file=sys.stderr)
        return 2
    from core.benchmark.runner import Bench  # heavy: LangGraph, see the imports
    from core.jobs import bench_items  # heavy: as above

    if queue.enabled() and (args.rpm or args.concurrency != 1):
        print("error: with the team's job queue the workers run the items: --concurrency is each worker's "
              "(python -m core worker --concurrency N) and no --rpm is applied across workers; leave them out "
              "(or PLANRAG_JOBS=threads to run here)", file=sys.stderr)
        return 2
    try:
        config = _config(args)
        bench = Bench(config)
        if not queue.enabled():  # with the job queue, commands on one benchmark share its items
            bench.claim()  # BenchBusy when another benchmark runs into the same directory
        prices = load_prices()
    except (BenchError, LLMError, ValueError) as e:
        print(scrub(error_line(e)), file=sys.stderr)
        return 1
    for note in bench.notes:
        print(f"note: {note}")
    total = len(bench.work.items)
    epochs = f" ({bench.epochs} epochs)" if bench.epochs > 1 else ""
    print(f"bench: {total} items{epochs} of set {bench.set_name}, model {bench.model}, results in {bench.directory}")
    where = ("queued for the team's workers (python -m core worker)" if queue.enabled()
             else f"{config.concurrency} at a time")
    print(f"skipped {total - len(bench.pending)} items already done; {len(bench.pending)} to run, {where}",
          flush=True)

    shown = threading.Lock()

    def show(item, result, error, progress):
        # Called from worker threads: print() writes the text and the newline apart, so two lines could run
        # together; one write of the whole line under a lock keeps each line whole.
        with shown:
            line = f"[{progress.finished + len(progress.errors)}/{total}] {_line(item, result, error, progress)}\n"
            sys.stdout.write(scrub(line))
            sys.stdout.flush()

    def note(text):
        with shown:
            sys.stdout.write(f"note: {text}\n")
            sys.stdout.flush()

    stop = threading.Event()
    main_thread = threading.current_thread() is threading.main_thread()  # only there can a signal be handled
    previous = signal.signal(signal.SIGINT, partial(_interrupted, bench, stop)) if main_thread else None
    try:
        progress = bench_items.drive(bench, on_result=show, on_note=note, stop=stop)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
    if stop.is_set() and progress.stopped == "stopped":
        print("interrupted: the finished items are stored; rerun the same command to go on", file=sys.stderr)
    # the closing reads and reports wait for a team store that is away (said, as the items' outcomes were)
    where = database.location(bench.store.path)
    this_run, results = database.patiently(
        lambda: (read_all(bench.directory, bench.keys(), config.home), bench.results()), where, note)
    _print_accuracy(bench, this_run, results, prices)
    database.patiently(lambda: _write_reports(bench, config, prices), where, note)
    if args.inspect_log:
        database.patiently(lambda: _write_inspect_log(bench, config, args.inspect_log), where, note)
    if progress.errors:
        print(f"{len(progress.errors)} items could not run (a rerun tries them again):", file=sys.stderr)
        for error in progress.errors[:10]:
            print(f"  {error}", file=sys.stderr)
        print("  (listed in report/not_run.csv)", file=sys.stderr)
    stuck = sum(r.get("status") == "stuck" for r in results)
    if stuck:
        print(f"stuck: {stuck} of the runs (the loop guard ended them after repeated actions)")
    print(f"this run spent {spent(progress)} on LLM calls")
    if progress.stopped:
        print(f"stopped: {progress.stopped}", file=sys.stderr)
    if stop.is_set() and progress.stopped == "stopped":
        return 130
    return 1 if progress.errors or progress.stopped else 0


def _interrupted(bench: Bench, stop: threading.Event, signum, frame) -> None:
    """Ctrl-C: the first says at once that the benchmark is stopping and which items it waits for (no new item
    starts); the second stops now, keeping what is finished (each result is stored as its item ends; the items in
    progress run again on a rerun)."""
    running = sorted(list(getattr(bench.progress, "running", ()) or ()))
    if not stop.is_set():
        stop.set()
        waits = (f"waiting for the {len(running)} item{'s' if len(running) != 1 else ''} in progress to finish "
                 f"({', '.join(running)})" if running else "no item is in progress")
        sys.stderr.write(f"stopping: no new item starts; {waits}. Press Ctrl-C again to stop now (the finished "
                         "items are kept; a rerun runs the others)\n")
        sys.stderr.flush()
        return
    sys.stderr.write(f"stopped now: {len(running)} item{'s' if len(running) != 1 else ''} in progress left "
                     f"unfinished ({', '.join(running) or 'none'}); the finished items are stored; rerun the same "
                     "command to go on\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)  # the items in flight wait on the model or the database: nothing to keep from them


def _config(args) -> BenchConfig:
    """The benchmark the arguments describe (``--smoke``: the smoke benchmark)."""
    from core.benchmark.runner import BenchConfig  # heavy: LangGraph, see the imports
    from core.benchmark.smoke import smoke_config  # heavy: loads the runner too

    if args.smoke:
        return smoke_config(args.technique, scenario=args.scenario, db=args.db, out=args.out, name=args.name,
                            source="scenario" if args.source == "scenario" else None, limits=limits_from(args),
                            budget_tokens=args.budget_tokens, budget_cost=args.budget_cost,
                            budget_calls=args.budget_calls, started_by=OPERATOR.name,
                            asked=asked_by(OPERATOR, "benchmark_start"))
    return BenchConfig(args.technique, args.llm or "", scenario=args.scenario, db=args.db,
                       questions=args.questions, concurrency=args.concurrency, rpm=args.rpm, out=args.out,
                       name=args.name, cache=not args.no_cache, base_url=args.base_url,
                       temperature=args.temperature, source=args.source, dqa_root=args.dqa_dir,
                       llm_settings=llm_settings(args, unattended=True), limits=limits_from(args),
                       budget_tokens=args.budget_tokens, budget_cost=args.budget_cost, budget_calls=args.budget_calls,
                       prompts=args.prompts, reaper_planner=args.reaper_planner, epochs=args.epochs,
                       top_p=args.top_p, seed=args.seed, vote=args.vote, started_by=OPERATOR.name,
                       asked=asked_by(OPERATOR, "benchmark_start"))


def _print_accuracy(bench: Bench, this_run: list[dict], results: list[dict], prices) -> None:
    """This run's accuracy and optimal decisions per setting (beside the paper's), the paired comparisons, the
    votes' costs and how each setting compares with the paper's."""
    import pandas as pd  # heavy: loads pandas
    from core.benchmark import fidelity, reports  # heavy: pandas (not for the command line's other commands)

    clustered = ", clustered by question over the epochs" if bench.epochs > 1 else ""
    print(f"accuracy on set {bench.set_name} (correct/n, items that could not run count as wrong; 95% Wilson "
          f"interval{clustered}) | optimal decisions (regret 0, ties with the best included):")
    for r in reports.accuracy(this_run).to_dict("records"):
        paper = (f"  (paper {r['paper']}, GPT-4, n={reports.PAPER_N[r['scenario']]})"
                 if pd.notna(r["paper"]) else "")
        errors = "".join(f", {r[key]} {label}" for key, label in (
            ("errors", "not run"), ("undecided", "deciding nothing"), ("overridden", "grades overridden"),
            ("all tied", "on questions where every candidate ties"),
            ("unconsulted", "answered without consulting the database")) if r[key])
        print(f"  {r['scenario']:<9} {r['db']:<8} {r['technique']:<13} {r['correct']}/{r['n']}{errors}  "
              f"{reports.accuracy_text(r)} | optimal {percent(r['optimal rate'])} "
              f"[{number(r['optimal ci95_low'], decimals=1)}–{number(r['optimal ci95_high'], decimals=1)}]{paper}")
    for r in reports.paired(this_run).to_dict("records"):
        print(f"  paired {r['scenario']} {r['db']}: {reports.paired_text(r)}")
    for r in reports.costs(this_run, prices).to_dict("records"):
        if parse_voted(r["technique"]):
            total, per = r["cost USD"], r["cost per correct USD"]
            print(f"  {r['scenario']} {r['db']} {reports.technique_name(r['technique'])}: {r['llm calls']} LLM calls "
                  f"per question, cost {'unknown' if total is None else usd(total)}, per correct decision "
                  f"{'-' if per is None else '$' + number(per, decimals=5)}")
    for line in fidelity.summary_lines(results):
        print(line)


def _write_reports(bench: Bench, config: BenchConfig, prices) -> None:
    """The reports of all the benchmark's results, in its ``report/`` folder."""
    from core.benchmark import fidelity, reports  # heavy: pandas (not for the command line's other commands)

    written = reports.export(read_all(bench.directory, home=config.home), prices, bench.directory / "report",
                             not_run=read_not_run(bench.directory))
    written = [*written, *fidelity.export(read_results(bench.directory), bench.directory / "report")]
    print(f"reports of all results in {bench.directory}: {', '.join(p.name for p in written)} in report/")


def _write_inspect_log(bench: Bench, config: BenchConfig, path: Path) -> None:
    """The benchmark's results as an Inspect AI eval log at ``path``, with each run's transcript."""
    from core.evals.bench_log import write_bench_log  # heavy: Inspect AI

    store = RunStore(project_home.check(config.home or project_home.data_home()) / "runs.sqlite")
    written = write_bench_log(read_results(bench.directory), store, bench.directory.name, path, bench.root)
    print(f"Inspect log of the results: {written} (inspect view --log-dir {written.parent})")
