"""``python -m core run``, ``stop`` and ``branch``: run an agent on a question (or resume a paused, interrupted or
stopped run) and print its trace and outcome; stop a run; branch a run at a step."""
from __future__ import annotations

import argparse
import json
import os

from sims.files import FileRefused, check_file
import sys
import time

from core.analysis.grading import placement_text
from core.auth.roles import local_operator
from core.analysis.trace import Trace
from core.backends.registry import BACKENDS
from core.cli.args import (DB_HELP, SCENARIO_HELP, SOURCE_HELP, add_fidelity_arguments, add_limit_arguments,
                           add_llm_arguments, bounded, error_line, limits_from, llm_settings)
from core.config import settings as core_settings
from core.config.secrets import scrub
from core.model.outcome import RunOutcome
from core.model.run_settings import HITL_MODES
from core.model.technique import TECHNIQUES
from core.scenarios import catalog
from core.scenarios.catalog import SOURCES
from core.model.run_settings import Review
from core.model.run_settings import RunSettings, default_reviewer
from core.store.runs import ENDED, RunStore, new_run_id
from core.analysis.format import number


OPERATOR = local_operator()  # who acts on the command line: the machine's operator (README, Sign-in)


def _describe(event) -> str:
    """One line for a human reading a run as it goes."""
    d = event.to_dict()
    by = f" by {d['reviewer']}" if d.get("reviewer") else ""
    text = {"plan": lambda: f"{d['origin']} plan ({d['status']}{by}): " + " | ".join(d["steps"]),
            "replan": lambda: f"re-plan {'Y' if d['replan'] else 'N'}" + (
                ": " + " | ".join(d["new_plan"]) if d["replan"] else ""),
            "thought": lambda: (f"[{d['current_step']}] " if d["current_step"] else "") + d["text"],
            "action": lambda: f"{d['tool']}: {d['query']}",
            "observation": lambda: d["text"],
            "final": lambda: d["answer"],
            "query_review": lambda: f"{d['reviewer'] or 'analyst'} {d['status']} the query" + (
                f": {d['query']}" if d["status"] == "edited" else "") + (f" ({d['note']})" if d["note"] else ""),
            "branch": lambda: f"branched from run {d['parent']} at step {d['at_step']}" + "".join(
                f"; {k}: {v if isinstance(v, str) else ' | '.join(v)}" for k in ("plan", "query", "note")
                if (v := d.get(k))),
            "error": lambda: f"{d['error_kind']}: {d['message']}"}[d["kind"]]()
    return f"[{d['step']}] {d['kind']}: {text}"


EXIT_FINISHED, EXIT_FAILED, EXIT_PAUSED = 0, 1, 3  # ``core run`` / ``core branch`` exit codes


def _review(args):
    reviewer = args.reviewer or ""
    if args.edit:
        return Review("edit", tuple(args.edit), args.note or "", reviewer=reviewer)
    if args.edit_query:
        return Review("edit", (), args.note or "", query=args.edit_query, reviewer=reviewer)
    if args.reject is not None:
        return Review("reject", note=args.reject, reviewer=reviewer)
    return Review("approve", note=args.note or "", reviewer=reviewer)


def _pause_of(args, record) -> str:
    """The pause a review is for: ``--pause ID``; ``--pause current`` or, run interactively, the current one.
    ValueError when it is not named and stdin is not a terminal (a script must say which pause it reviews)."""
    current = (record.pause or {}).get("id") if record.status == "paused" else None
    if args.pause and args.pause != "current":
        return args.pause
    if current is None:
        return ""  # not paused: the runtime says in what state the run is
    if args.pause == "current" or sys.stdin.isatty():
        print(f"reviewing pause {current} of run {record.id}", file=sys.stderr)
        return current
    raise ValueError(f"name the pause this review is for: --pause {current} (the run's current pause), or "
                     "--pause current")


def _hint(result) -> str:
    flags = ("--edit-query QUERY | --reject NOTE" if result.pause.kind == "query"
             else "--edit STEP [--edit STEP ...] | --reject NOTE")
    return (f"resume with: python -m core run --resume {result.run_id} --pause {result.pause.id} "
            f"--approve | {flags}")


def _report(runtime, result, args) -> int:
    """Print a run's outcome (or its pause and how to resume it); the exit code: 0 finished, 1 failed or
    stopped, 3 paused for review."""
    events = runtime.store.get(result.run_id).events
    outcome = result.outcome or RunOutcome()
    trace = Trace.of(events)
    usage = trace.usage
    prompt, completion = trace.prompt_tokens, trace.completion_tokens
    report = {"run_id": result.run_id, "status": result.status,
              # every field of the outcome (all None while paused)
              **(result.outcome.to_dict() if result.outcome else dict.fromkeys(RunOutcome().to_dict())),
              "llm_calls": len(usage),
              "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion,
                         "estimated": trace.tokens_estimated, "failed_attempts": trace.failed_tokens},
              "pause": result.pause.to_dict() if result.pause else None, "events": [e.to_dict() for e in events]}
    if args.json:
        print(scrub(json.dumps(report, default=str)))
    elif result.pause and result.pause.kind == "query":
        step = f" for {result.pause.current_step}" if result.pause.current_step else ""
        print(f"paused: run {result.run_id} awaits review of its query{step} (pause {result.pause.id}):\n"
              f"  {result.pause.query}")
        print(_hint(result))
    elif result.pause:
        steps = "\n".join(f"  Step {i}: {s}" for i, s in enumerate(result.pause.plan, 1))
        print(f"paused: run {result.run_id} awaits review of its {result.pause.kind} (pause {result.pause.id}):"
              f"\n{steps}")
        print(_hint(result))
    elif result.status in ("failed", "stopped"):  # what happened, not "decision None (wrong)"
        print(scrub(f"{result.status}: {report['error'] or 'the run ' + result.status}; {len(usage)} LLM calls, "
                    f"{report['tokens']['total']} tokens{_failed(report)}"))
    else:
        verdict = {True: "correct", False: "wrong", None: "no label"}[report["correct"]]
        rank = placement_text(report["placement"])
        decision = ("the final answer names no decision" if outcome.no_decision
                    else f"decision {report['decision']}")
        said = f"{decision} ({verdict}{', rank ' + rank if rank else ''})"
        if result.status in ("stuck", "context_exceeded"):  # what ended it, and the answer it gave then
            said = outcome.error + (f"; {said}" if outcome.answered else "")
        print(f"{result.status}: {said}; {len(usage)} LLM calls, {report['tokens']['total']} tokens{_failed(report)}")
        if outcome.unconsulted:
            print("  answered without consulting the database (no query ran before the final answer)")
        if report["grade_reason"] and result.status not in ("stuck", "context_exceeded"):  # those say what ended them
            print(f"  grade: {report['grade_status']}: {report['grade_reason']}")
    if result.pause:
        return EXIT_PAUSED
    return EXIT_FINISHED if result.status == "finished" else EXIT_FAILED


def _failed(report: dict) -> str:
    spent = report["tokens"]["failed_attempts"]
    return f" ({spent} of them spent on attempts abandoned at a time limit)" if spent else ""


def _fail(e: Exception) -> int:
    print(scrub(error_line(e)), file=sys.stderr)
    return EXIT_FAILED


def cmd_run(args) -> int:
    """Run an agent on a DQA question (or resume a paused, interrupted or stopped run) and print its trace and
    graded decision."""
    if (args.llm or "").startswith("replay:"):  # an odd replay file is refused before the agents' slow imports
        try:
            check_file(os.path.abspath(os.path.expanduser(args.llm[len("replay:"):])), "replay file")
        except FileRefused as e:
            return _fail(e)
        except FileNotFoundError:
            pass  # said by the run, as before
    from core.agents.runtime import AgentRuntime, RunNotPaused  # heavy: loads langchain_core, langgraph
    from core.llm.client import LLMError  # heavy: loads langchain_core

    missing = [f"--{k}" for k in ("scenario", "question", "db", "technique") if getattr(args, k) is None]
    if not args.resume and missing:
        print(f"error: run needs {', '.join(missing)} (or --resume RUN_ID)", file=sys.stderr)
        return 2
    show = None if args.json else (lambda event: print(scrub(_describe(event)), flush=True))
    try:
        runtime = AgentRuntime(llm_settings=llm_settings(args))
    except ValueError as e:
        print(f"error (settings): {e}", file=sys.stderr)
        return 2
    try:
        if args.resume:
            record = runtime.store.get(args.resume, events=False)
            reviewing = any((args.approve, args.edit, args.edit_query, args.reject is not None, args.pause))
            if record.status != "paused" and not reviewing:  # interrupted or stopped; else says why it cannot
                result = runtime.proceed(args.resume, on_event=show)
            else:
                result = runtime.resume(args.resume, _review(args), on_event=show,
                                        pause_id=_pause_of(args, record) or None)
        else:
            source = args.source or catalog.default_source(args.scenario)
            settings = RunSettings(args.scenario, args.question, args.db, args.technique, args.llm or "", source=source,
                                   base_url=args.base_url, endpoint=args.endpoint, hitl=args.hitl,
                                   plan_version=args.plan_version,
                                   replan_on_failure=False if args.no_replan else None,
                                   review_queries=args.approve_queries,
                                   limits=limits_from(args), prompts=args.prompts,
                                   reaper_planner=args.reaper_planner)
            run_id = new_run_id()
            if show:  # the id first: it resumes, branches or opens the run, also one this process does not finish
                print(f"run {run_id}: {args.technique} on {source} {args.scenario} question {args.question} "
                      f"({args.db})", flush=True)
            runtime.store.record_start(run_id, OPERATOR.name)
            result = runtime.start(settings, on_event=show, run_id=run_id)
    except (LLMError, RunNotPaused, ValueError, KeyError) as e:
        return _fail(e)
    finally:
        runtime.close()
    return _report(runtime, result, args)


def cmd_stop(args) -> int:
    """Stop a run (also one another process drives); close a paused or interrupted one."""

    store = RunStore(core_settings.DATA_HOME / "runs.sqlite")
    try:
        before = store.get(args.run_id, events=False).status
        if before in ENDED:
            print(f"error: run {args.run_id} is already {before}", file=sys.stderr)
            return EXIT_FAILED
        status = store.request_stop(args.run_id, by=default_reviewer())
    except KeyError as e:
        return _fail(e)
    deadline = time.monotonic() + args.wait
    while status == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
        status = store.get(args.run_id, events=False).status
    if status == "running":
        print(f"error: run {args.run_id} was asked to stop but its process has not answered in {number(args.wait)} s; "
              "it is marked interrupted once that process is gone", file=sys.stderr)
        return EXIT_FAILED
    print(f"{status}: run {args.run_id}" + (" (closed)" if before in ("paused", "interrupted") else ""))
    return EXIT_FINISHED


def cmd_branch(args) -> int:
    """Start a new run from a run's state just before one of its steps, with an edited plan, query or note."""
    from core.agents.runtime import AgentRuntime, RunNotPaused  # heavy: loads langchain_core, langgraph
    from core.llm.client import LLMError  # heavy: loads langchain_core

    try:
        runtime = AgentRuntime(llm_settings=llm_settings(args))
    except ValueError as e:
        print(f"error (settings): {e}", file=sys.stderr)
        return 2
    new_id = new_run_id()
    runtime.store.record_start(new_id, OPERATOR.name)
    announced = False

    def show(event) -> None:
        nonlocal announced
        if not announced:  # the branch exists once its first event is stored: a refused one names no run
            print(f"branch: run {new_id} (from run {args.run_id} at step {args.step})", flush=True)
            announced = True
        print(scrub(_describe(event)), flush=True)

    try:
        result = runtime.branch(args.run_id, args.step, on_event=None if args.json else show, plan=args.plan,
                                query=args.query, note=args.note or "", reviewer=args.reviewer or "", new_id=new_id)
    except (LLMError, RunNotPaused, ValueError, KeyError) as e:
        return _fail(e)
    finally:
        runtime.close()
    return _report(runtime, result, args)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``run``, ``stop`` and ``branch`` subcommands."""
    p = sub.add_parser("run", help="run an agent on a question, or resume a paused run",
                       description="Run an agent on a question (DQA, demo or a plugin's). With --hitl "
                                   "approve-replans or approve-every-plan the run pauses at a plan (with "
                                   "--approve-queries also before "
                                   "each query): it prints the plan, the run id and the pause id, and exits with "
                                   "code 3; resume it (also after a restart) with --resume RUN_ID --pause ID and "
                                   "one of --approve, --edit STEP ... (the whole edited plan), --edit-query QUERY "
                                   "or --reject NOTE. Exit codes: 0 finished, 1 failed (also stuck or "
                                   "context_exceeded), stopped or error, 3 paused.")
    p.add_argument("--scenario", help=SCENARIO_HELP)
    p.add_argument("--source", choices=list(SOURCES), help=SOURCE_HELP)
    p.add_argument("--question", type=bounded("question"), help="question number N (1-based, file order)")
    p.add_argument("--db", choices=list(BACKENDS), help=DB_HELP)
    p.add_argument("--technique", choices=list(TECHNIQUES),
                   help=", ".join(f"{t.name} ({t.label})" for t in TECHNIQUES.values()))
    p.add_argument("--llm", help="a model name (OpenAI or the --base-url server; default OPENAI_MODEL), "
                                 "or replay:FILE")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default: OPENAI_BASE_URL; OPENAI_API_KEY is sent "
                                      "only to OPENAI_BASE_URL, never to another server)")
    p.add_argument("--endpoint", help="a model endpoint of the server's secrets file ([planrag.endpoints.NAME]): its "
                                      "model, URL and key, also when the run is resumed (instead of --llm/--base-url)")
    p.add_argument("--hitl", choices=HITL_MODES, default="auto", help="when to pause for review (default auto)")
    p.add_argument("--plan-version", type=bounded("plan_version"), metavar="N",
                   help="start from version N of the scenario's learned AutoPlan plan (loop techniques; technique "
                        "autoplan: default the latest); never on one of its training questions")
    p.add_argument("--no-replan", action="store_true", help="reaper: no re-plan call after failed steps")
    add_fidelity_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object: decision, correct, events, ...")
    add_llm_arguments(p)
    add_limit_arguments(p)
    p.add_argument("--approve-queries", action="store_true",
                   help="pause before each query for the analyst's review (with any --hitl)")
    p.add_argument("--resume", metavar="RUN_ID", help="resume a paused run with a review; an interrupted or "
                                                      "stopped run (no review given) from its last checkpoint")
    p.add_argument("--pause", metavar="ID", help="the pause the review is for (p1, p2, ... as printed when the run "
                                                 "paused; 'current': whatever pause is current). Required when "
                                                 "stdin is not a terminal")
    review = p.add_mutually_exclusive_group()
    review.add_argument("--approve", action="store_true", help="approve the proposed plan or query (the default)")
    review.add_argument("--edit", action="append", metavar="STEP", help="a step of the edited plan (repeat, in order)")
    review.add_argument("--edit-query", metavar="QUERY", help="at a query pause: the query to run instead")
    review.add_argument("--reject", metavar="NOTE", help="reject the plan or query with a note to the agent")
    p.add_argument("--note", help="a note kept with an approval or an edit")
    p.add_argument("--reviewer", help="who reviews (default: local operator)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("stop", help="stop a run (also one another process drives), or close a paused or "
                                    "interrupted one")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to stop (or to close, when paused or interrupted)")
    p.add_argument("--wait", type=bounded("wait_s"), default=10.0, help="seconds to wait for the run to stop (default 10)")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("branch", help="start a new run from a run's state just before a step, with an edited plan, "
                                      "query or note; prints the new run's id",
                       description="Branch RUN_ID at step N (the LLM call number shown as [N] in traces): a new "
                                   "run starts from the state just before that step (with --query: just before "
                                   "its query), changed as given; the parent run is left as it was.")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to branch from (it stays as it was)")
    p.add_argument("--step", type=bounded("step"), required=True, metavar="N",
                   help="the step (LLM call number, as the trace numbers it) the new run starts just before")
    p.add_argument("--plan", action="append", metavar="STEP", help="a step of the plan to follow from there")
    p.add_argument("--query", help="the query step N runs instead")
    p.add_argument("--note", help="a note to the agent before step N")
    p.add_argument("--reviewer", help="who branched it (default: local operator)")
    p.add_argument("--json", action="store_true", help="print one JSON object, as run --json")
    add_llm_arguments(p)
    p.set_defaults(func=cmd_branch)
