"""The ``python -m core`` command line: ``dqa``, ``query``, ``run`` (and the subcommands other modules add)."""
from __future__ import annotations

import argparse
import json
import sys
import time

from core.agents.config import HITL_MODES
from core.agents.techniques import TECHNIQUES
from core.autoplan import command as autoplan_command
from core.backends.base import QueryError
from core.backends.registry import BACKENDS, open_backend
from core.benchmark import command as bench_command
from core.dqa import DQA, DQAError
from core.scenario import SCENARIOS
from core.settings import dqa_dir
from sims.sqldump import DumpError


def _dqa(path: str | None) -> DQA:
    root = path or dqa_dir()
    if root is None:
        raise DQAError("no DQA directory: set DQA_DIR to the data/ folder of the myeon9h/PlanRAG repository")
    return DQA(root)


def cmd_dqa(args) -> int:
    """Print the question and distinct-database counts of a DQA directory."""
    start = time.perf_counter()
    dqa = _dqa(args.dir)
    for scenario in SCENARIOS:
        n = len(dqa.questions(scenario))
        print(f"{scenario}: {n} questions ({dqa.distinct_databases(scenario)} distinct databases)")
    print(f"imported in {time.perf_counter() - start:.2f} s", file=sys.stderr)
    return 0


def cmd_query(args) -> int:
    """Run one read-only query on a DQA question's database and print its rows."""
    dqa = _dqa(None)
    question = dqa.question(args.scenario, args.question)
    backend = open_backend(args.db, dqa.database(question))
    try:
        result = backend.query(args.query, timeout_s=args.timeout, row_cap=args.row_cap)
    finally:
        backend.close()
    if args.json:
        print(json.dumps(result.as_json(), default=str))
    else:
        print(result.to_text(max_rows=args.row_cap, max_chars=10**9))
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _describe(event) -> str:
    """One line for a human reading a run as it goes."""
    d = event.to_dict()
    text = {"plan": lambda: f"{d['origin']} plan ({d['status']}): " + " | ".join(d["steps"]),
            "replan": lambda: f"re-plan {'Y' if d['replan'] else 'N'}" + (
                ": " + " | ".join(d["new_plan"]) if d["replan"] else ""),
            "thought": lambda: (f"[{d['current_step']}] " if d["current_step"] else "") + d["text"],
            "action": lambda: f"{d['tool']}: {d['query']}",
            "observation": lambda: d["text"],
            "final": lambda: d["answer"],
            "error": lambda: f"{d['error_kind']}: {d['message']}"}[d["kind"]]()
    return f"[{d['step']}] {d['kind']}: {text}"


def _review(args):
    from core.agents import Review

    if args.edit:
        return Review.edit(args.edit, note=args.note or "")
    if args.reject is not None:
        return Review.reject(args.reject)
    return Review.approve(note=args.note or "")


def cmd_run(args) -> int:
    """Run an agent on a DQA question (or resume a paused run) and print its trace and graded decision."""
    from core.agents import AgentRuntime, RunNotPaused, RunSettings
    from core.llm import LLMError

    missing = [f"--{k}" for k in ("scenario", "question", "db", "technique") if getattr(args, k) is None]
    if not args.resume and missing:
        print(f"error: run needs {', '.join(missing)} (or --resume RUN_ID)", file=sys.stderr)
        return 2
    show = None if args.json else (lambda event: print(_describe(event), flush=True))
    runtime = AgentRuntime()
    try:
        if args.resume:
            result = runtime.resume(args.resume, _review(args), on_event=show)
        else:
            settings = RunSettings(args.scenario, args.question, args.db, args.technique, args.llm or "",
                                   base_url=args.base_url, hitl=args.hitl, plan_version=args.plan_version,
                                   replan_on_failure=not args.no_replan)
            result = runtime.start(settings, on_event=show)
    except (LLMError, RunNotPaused, ValueError, KeyError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e  # a KeyError's str() adds quotes
        print(f"error ({getattr(e, 'kind', 'run')}): {message}", file=sys.stderr)
        return 1
    finally:
        runtime.close()
    events = runtime.store.get(result.run_id).events
    outcome = result.outcome or {}
    usage = [e["llm"] for e in events if e.get("llm")]
    prompt, completion = sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)
    report = {"run_id": result.run_id, "status": result.status, "decision": outcome.get("decision"),
              "correct": outcome.get("correct"), "label": outcome.get("label"), "placement": outcome.get("placement"),
              "final_answer": outcome.get("final_answer"), "error": outcome.get("error"), "llm_calls": len(usage),
              "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion,
                         "estimated": any(u["estimated"] for u in usage)},
              "pause": result.pause.to_dict() if result.pause else None, "events": events}
    if args.json:
        print(json.dumps(report, default=str))
    elif result.pause:
        steps = "\n".join(f"  Step {i}: {s}" for i, s in enumerate(result.pause.plan, 1))
        print(f"paused: run {result.run_id} awaits review of its {result.pause.kind}:\n{steps}")
    else:
        verdict = {True: "correct", False: "wrong", None: "no label"}[report["correct"]]
        print(f"{result.status}: decision {report['decision']} ({verdict}); {len(usage)} LLM calls, "
              f"{report['tokens']['total']} tokens")
    if result.pause:
        print(f"resume with: python -m core run --resume {result.run_id} --approve | --edit STEP [--edit STEP ...] "
              "| --reject NOTE", file=sys.stderr)
    return 1 if result.status == "failed" else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="PlanRAG Workbench command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("dqa", help="count the questions and distinct databases of a DQA directory")
    p.add_argument("dir", nargs="?", help="the DQA data folder (default: DQA_DIR or ../shared/dqa)")
    p.set_defaults(func=cmd_dqa)

    p = sub.add_parser("query", help="run one read-only query on a question's database")
    p.add_argument("--scenario", choices=SCENARIOS, required=True)
    p.add_argument("--question", type=int, required=True, help="question number N (1-based, file order)")
    p.add_argument("--db", choices=list(BACKENDS), required=True)
    p.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...]]}')
    p.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    p.add_argument("--row-cap", type=int, default=1000, help="rows at most (default 1000)")
    p.add_argument("query", help="SQL (MySQL dialect) or Cypher, by the database")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("run", help="run an agent on a question, or resume a paused run",
                       description="Run an agent on a DQA question. With --hitl approve-replans or "
                                   "approve-every-plan the run pauses at a plan: it prints the plan and the run id, "
                                   "and exits; resume it (also after a restart) with --resume RUN_ID and one of "
                                   "--approve, --edit STEP ... (the whole edited plan) or --reject NOTE.")
    p.add_argument("--scenario", choices=SCENARIOS)
    p.add_argument("--question", type=int, help="question number N (1-based, file order)")
    p.add_argument("--db", choices=list(BACKENDS))
    p.add_argument("--technique", choices=list(TECHNIQUES))
    p.add_argument("--llm", help="a model name (OpenAI or the --base-url server; default OPENAI_MODEL), "
                                 "or replay:FILE")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default: OPENAI_BASE_URL)")
    p.add_argument("--hitl", choices=HITL_MODES, default="auto", help="when to pause for review (default auto)")
    p.add_argument("--plan-version", type=int, metavar="N",
                   help="start from version N of the scenario's learned AutoPlan plan (loop techniques; technique "
                        "autoplan: default the latest); never on one of its training questions")
    p.add_argument("--no-replan", action="store_true", help="reaper: no re-plan call after failed steps")
    p.add_argument("--json", action="store_true", help="print one JSON object: decision, correct, events, ...")
    p.add_argument("--resume", metavar="RUN_ID", help="resume a paused run with a review")
    review = p.add_mutually_exclusive_group()
    review.add_argument("--approve", action="store_true", help="approve the proposed plan (the default review)")
    review.add_argument("--edit", action="append", metavar="STEP", help="a step of the edited plan (repeat, in order)")
    review.add_argument("--reject", metavar="NOTE", help="reject the plan with a note to the agent")
    p.add_argument("--note", help="a note kept with an approval or an edit")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("bench", help="run DQA (or part of it) with techniques and a model; print the accuracy",
                       description=bench_command.DESCRIPTION)
    bench_command.add_arguments(p)
    p.set_defaults(func=bench_command.main)

    p = sub.add_parser("autoplan", help="learn a scenario's plan with AutoPlan (train), or show learned plans (show)",
                       description=autoplan_command.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    autoplan_command.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (QueryError, DQAError, DumpError) as e:
        kind = getattr(e, "kind", "error")
        print(f"error ({kind}): {e}", file=sys.stderr)
        return 1
