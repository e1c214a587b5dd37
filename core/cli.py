"""The ``python -m core`` command line: ``dqa``, ``schema``, ``query``, ``run`` (and the subcommands other modules
add)."""
from __future__ import annotations

import argparse
import json
import sys
import time

from core import catalog, grade_command, graph_server, override_command
from core.agents.config import HITL_MODES
from core.agents.techniques import TECHNIQUES
from core.autoplan import command as autoplan_command
from core.backends.base import QueryError
from core.backends.registry import BACKENDS, open_backend
from core.benchmark import command as bench_command
from core.catalog import SOURCES
from core.dqa import DQA, DQAError
from core.grading import placement_text
from core.home import HomeError, notices
from core.limit_args import add_limit_arguments, add_query_limit_arguments, limits_from
from core.numbers import spans
from core.runs import store_notices
from core.scenario import SCENARIOS
from core.scenarios import command as scenario_command
from core.secrets import scrub
from core.settings import dqa_dir
from sims.sqldump import DumpError

SCENARIO_HELP = ("locating (EU4: where to place a merchant), building (Victoria 3: which building to grow) or a "
                 "plugin's name (python -m core scenario list)")
DB_HELP = "the database backend: sqlite, mysql (SQL); ladybug, neo4j (Cypher)"
SOURCE_HELP = ("dqa: the DQA benchmark, from DQA_DIR; demo: the built-in demo scenarios; scenario: a plugin's own "
               "questions (default: dqa, or a plugin's own)")


def error_line(e: BaseException) -> str:
    """``error: MESSAGE``, or ``error (KIND): MESSAGE`` when the error has a kind worth naming (timeout, refused,
    syntax, config, ...)."""
    kind = getattr(e, "kind", None)
    message = e.args[0] if isinstance(e, KeyError) and e.args else e  # a KeyError's str() adds quotes
    return f"error ({kind}): {message}" if kind and kind != "error" else f"error: {message}"


def _dqa(path: str | None) -> DQA:
    root = path or dqa_dir()
    if root is None:
        raise DQAError("no DQA directory: set DQA_DIR to the data/ folder of the myeon9h/PlanRAG repository")
    return DQA(root)


def repairs(dqa: DQA, scenario: str) -> list[tuple[str, str]]:
    """The data repairs made in a scenario's files: (repair, the questions whose files needed it), in the order
    first met; a repair is its rule with the kind of file (SQL or graph) it was made in."""
    found: dict[str, list[int]] = {}
    for question in dqa.questions(scenario):
        for note in dqa.notes(question):
            file, _, rule = note.partition(": ")
            kind = "graph" if file.endswith(".cql") else "SQL"
            found.setdefault(f"{rule} ({kind})", []).append(question.number)
    return [(repair, spans(sorted(set(numbers)))) for repair, numbers in found.items()]


def cmd_dqa(args) -> int:
    """Print the question and distinct-database counts of a DQA directory, and the data repairs it needed."""
    start = time.perf_counter()
    dqa = _dqa(args.dir)
    for scenario in SCENARIOS:
        n = len(dqa.questions(scenario))
        print(f"{scenario}: {n} questions ({dqa.distinct_databases(scenario)} distinct databases)")
    print("data repairs (by rule, never by dropping rows):")
    for scenario in SCENARIOS:
        for repair, questions in repairs(dqa, scenario) or [("none", "")]:
            print(f"  {scenario}: {repair}" + (f": questions {questions}" if questions else ""))
    print(f"set {dqa.name}, imported in {time.perf_counter() - start:.2f} s", file=sys.stderr)
    return 0


def _open(args):
    """The backend ``args.db`` opened on question ``args.question`` of ``args.source`` and ``args.scenario``."""
    question = catalog.question(args.source or catalog.default_source(args.scenario), args.scenario, args.question)
    return open_backend(args.db, catalog.database(question))


def cmd_schema(args) -> int:
    """Print the schema of a question's database, as the agents are given it."""
    backend = _open(args)
    try:
        print(backend.schema_text())
    finally:
        backend.close()
    return 0


def cmd_query(args) -> int:
    """Run one read-only query on a question's database (DQA's, the demo's or the scenario's own) and print its
    rows."""
    backend = _open(args)
    try:
        result = backend.query(args.query, timeout_s=args.timeout, row_cap=args.row_cap).capped(args.cell_chars)
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


def add_llm_arguments(p: argparse.ArgumentParser, unattended: bool = False) -> None:
    """The model server's limits, as ``core run`` and ``core bench`` (``unattended``) take them."""
    from core.settings import INTERACTIVE_RETRIES, INTERACTIVE_TIMEOUT_S, UNATTENDED_RETRIES, UNATTENDED_TIMEOUT_S

    timeout, retries = ((UNATTENDED_TIMEOUT_S, UNATTENDED_RETRIES) if unattended else
                        (INTERACTIVE_TIMEOUT_S, INTERACTIVE_RETRIES))
    p.add_argument("--llm-timeout", type=float, metavar="S",
                   help=f"seconds to wait for one model reply, per attempt (default {timeout:g}; a retry after a "
                        "timeout waits longer, up to twice that; env PLANRAG_LLM_TIMEOUT)")
    p.add_argument("--llm-retries", type=int, metavar="N",
                   help="retries of a failed model call: timeouts, server errors, rate limits "
                        f"(default {retries}; env PLANRAG_LLM_RETRIES)")
    p.add_argument("--max-reply-tokens", type=int, metavar="N",
                   help="the reply cap in tokens (default 2048; env PLANRAG_MAX_REPLY_TOKENS)")


def add_fidelity_arguments(p: argparse.ArgumentParser) -> None:
    """The switches between the project's improved settings and the papers' (docs/paper-deviations.md)."""
    p.add_argument("--prompts", choices=("improved", "paper"), default="improved",
                   help="improved (default): the project's prompts; paper: nothing the paper (or its authors' "
                        "code) did not send: the PlanRAG paper's prompts as its original implementation sent them "
                        "(SingleRAG, IterRAG, PlanRAG, PlanRAG w/o RP, AutoPlan), REAPER's prompt in its paper's "
                        "structure (docs/paper-deviations.md)")
    p.add_argument("--reaper-planner", choices=("examples", "zero-shot"), default="examples",
                   help="reaper: the planner prompt with example retrieval plans for the scenario (default), or "
                        "without")


def llm_settings(args, unattended: bool = False):
    """The LLM settings of a command: the environment's, with its --llm-timeout, --llm-retries and
    --max-reply-tokens. ValueError for a bad value."""
    from core.settings import LLMSettings

    base = LLMSettings.unattended() if unattended else LLMSettings()
    return base.with_limits(args.llm_timeout, args.llm_retries, args.max_reply_tokens)


EXIT_FINISHED, EXIT_FAILED, EXIT_PAUSED = 0, 1, 3  # ``core run`` / ``core branch`` exit codes


def _review(args):
    from core.agents import Review

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
    outcome = result.outcome or {}
    usage = [e["llm"] for e in events if e.get("llm")]
    prompt, completion = sum(u["prompt_tokens"] for u in usage), sum(u["completion_tokens"] for u in usage)
    report = {"run_id": result.run_id, "status": result.status, "decision": outcome.get("decision"),
              "correct": outcome.get("correct"), "label": outcome.get("label"), "placement": outcome.get("placement"),
              "grade_status": outcome.get("grade_status"), "grade_reason": outcome.get("grade_reason"),
              "final_answer": outcome.get("final_answer"), "error": outcome.get("error"), "llm_calls": len(usage),
              "cost_usd": outcome.get("cost_usd"), "limit": outcome.get("limit"),
              "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion,
                         "estimated": any(u["estimated"] for u in usage)},
              "pause": result.pause.to_dict() if result.pause else None, "events": events}
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
                    f"{report['tokens']['total']} tokens"))
    else:
        verdict = {True: "correct", False: "wrong", None: "no label"}[report["correct"]]
        rank = placement_text(report["placement"])
        decision = ("the final answer names no decision" if outcome.get("no_decision")
                    else f"decision {report['decision']}")
        said = (f"{outcome['error']}" if result.status in ("stuck", "context_exceeded")
                else f"{decision} ({verdict}{', rank ' + rank if rank else ''})")
        print(f"{result.status}: {said}; {len(usage)} LLM calls, {report['tokens']['total']} tokens")
        if report["grade_reason"] and result.status not in ("stuck", "context_exceeded"):  # those say what ended them
            print(f"  grade: {report['grade_status']}: {report['grade_reason']}")
    if result.pause:
        return EXIT_PAUSED
    return EXIT_FINISHED if result.status == "finished" else EXIT_FAILED


def _fail(e: Exception) -> int:
    print(scrub(error_line(e)), file=sys.stderr)
    return EXIT_FAILED


def cmd_run(args) -> int:
    """Run an agent on a DQA question (or resume a paused, interrupted or stopped run) and print its trace and
    graded decision."""
    from core.agents import AgentRuntime, RunNotPaused, RunSettings
    from core.llm import LLMError

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
            from core import catalog

            source = args.source or catalog.default_source(args.scenario)
            settings = RunSettings(args.scenario, args.question, args.db, args.technique, args.llm or "", source=source,
                                   base_url=args.base_url, hitl=args.hitl, plan_version=args.plan_version,
                                   replan_on_failure=False if args.no_replan else None,
                                   review_queries=args.approve_queries,
                                   limits=limits_from(args), prompts=args.prompts,
                                   reaper_planner=args.reaper_planner)
            result = runtime.start(settings, on_event=show)
    except (LLMError, RunNotPaused, ValueError, KeyError) as e:
        return _fail(e)
    finally:
        runtime.close()
    return _report(runtime, result, args)


def cmd_stop(args) -> int:
    """Stop a run (also one another process drives); close a paused or interrupted one."""
    from core.runs import ENDED, RunStore
    from core.settings import DATA_HOME

    store = RunStore(DATA_HOME / "runs.sqlite")
    try:
        before = store.get(args.run_id, events=False).status
        if before in ENDED:
            print(f"error: run {args.run_id} is already {before}", file=sys.stderr)
            return EXIT_FAILED
        status = store.request_stop(args.run_id)
    except KeyError as e:
        return _fail(e)
    deadline = time.monotonic() + args.wait
    while status == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
        status = store.get(args.run_id, events=False).status
    if status == "running":
        print(f"error: run {args.run_id} was asked to stop but its process has not answered in {args.wait:g} s; "
              "it is marked interrupted once that process is gone", file=sys.stderr)
        return EXIT_FAILED
    print(f"{status}: run {args.run_id}" + (" (closed)" if before in ("paused", "interrupted") else ""))
    return EXIT_FINISHED


def cmd_branch(args) -> int:
    """Start a new run from a run's state just before one of its steps, with an edited plan, query or note."""
    from core.agents import AgentRuntime, RunNotPaused, new_run_id
    from core.llm import LLMError

    try:
        runtime = AgentRuntime(llm_settings=llm_settings(args))
    except ValueError as e:
        print(f"error (settings): {e}", file=sys.stderr)
        return 2
    new_id = new_run_id()
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


def _question_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", required=True, help=SCENARIO_HELP)
    p.add_argument("--question", type=int, required=True, help="question number N (1-based, file order)")
    p.add_argument("--db", choices=list(BACKENDS), required=True, help=DB_HELP)
    p.add_argument("--source", choices=list(catalog.SOURCES), help=SOURCE_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="PlanRAG Workbench command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("dqa", help="count the questions and distinct databases of a DQA directory")
    p.add_argument("dir", nargs="?", help="the DQA data folder (default: DQA_DIR or ../shared/dqa)")
    p.set_defaults(func=cmd_dqa)

    p = sub.add_parser("schema", help="print the schema of a question's database, as the agents are given it")
    _question_arguments(p)
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("query", help="run one read-only query on a question's database")
    _question_arguments(p)
    p.add_argument("--json", action="store_true", help='print {"columns": [...], "rows": [[...]]}')
    add_query_limit_arguments(p, row_cap=1000, observation=False)
    p.add_argument("query", help="SQL (MySQL dialect) or Cypher, by the database")
    p.set_defaults(func=cmd_query)

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
    p.add_argument("--question", type=int, help="question number N (1-based, file order)")
    p.add_argument("--db", choices=list(BACKENDS), help=DB_HELP)
    p.add_argument("--technique", choices=list(TECHNIQUES),
                   help="singlerag, iterrag, planrag, planrag-norp (the paper's); reaper, autoplan")
    p.add_argument("--llm", help="a model name (OpenAI or the --base-url server; default OPENAI_MODEL), "
                                 "or replay:FILE")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default: OPENAI_BASE_URL)")
    p.add_argument("--hitl", choices=HITL_MODES, default="auto", help="when to pause for review (default auto)")
    p.add_argument("--plan-version", type=int, metavar="N",
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
    p.add_argument("--reviewer", help="who reviews (default: the OS user)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("stop", help="stop a run (also one another process drives), or close a paused or "
                                    "interrupted one")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to stop (or to close, when paused or interrupted)")
    p.add_argument("--wait", type=float, default=10.0, help="seconds to wait for the run to stop (default 10)")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("branch", help="start a new run from a run's state just before a step, with an edited plan, "
                                      "query or note; prints the new run's id",
                       description="Branch RUN_ID at step N (the LLM call number shown as [N] in traces): a new "
                                   "run starts from the state just before that step (with --query: just before "
                                   "its query), changed as given; the parent run is left as it was.")
    p.add_argument("run_id", metavar="RUN_ID", help="the run to branch from (it stays as it was)")
    p.add_argument("--step", type=int, required=True, metavar="N",
                   help="the step (LLM call number, as the trace numbers it) the new run starts just before")
    p.add_argument("--plan", action="append", metavar="STEP", help="a step of the plan to follow from there")
    p.add_argument("--query", help="the query step N runs instead")
    p.add_argument("--note", help="a note to the agent before step N")
    p.add_argument("--reviewer", help="who branched it (default: the OS user)")
    p.add_argument("--json", action="store_true", help="print one JSON object, as run --json")
    add_llm_arguments(p)
    p.set_defaults(func=cmd_branch)

    p = sub.add_parser("bench", help="run DQA (or part of it) with techniques and a model; print the accuracy",
                       description=bench_command.DESCRIPTION)
    bench_command.add_arguments(p)
    p.set_defaults(func=bench_command.main)

    p = sub.add_parser("grade", help="grade a final answer: the decision it concludes with, its rank and regret",
                       description=grade_command.DESCRIPTION)
    grade_command.add_arguments(p)
    p.set_defaults(func=grade_command.main)

    p = sub.add_parser("override", help="override a run's grade (who, when, why), or restore it",
                       description=override_command.DESCRIPTION)
    override_command.add_arguments(p)
    p.set_defaults(func=override_command.main)

    p = sub.add_parser("autoplan", help="learn a scenario's plan with AutoPlan (train), or show learned plans (show)",
                       description=autoplan_command.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    autoplan_command.add_arguments(p)

    p = sub.add_parser("scenario", help="write a scenario plugin skeleton (new), validate one (check), list them",
                       description=scenario_command.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    scenario_command.add_arguments(p)

    p = sub.add_parser("graph-server", help="install, start, stop a local Neo4j-protocol server (ArcadeDB)",
                       description=graph_server.DESCRIPTION)
    graph_server.add_arguments(p)
    p.set_defaults(func=graph_server.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    seen, stores_seen = len(notices()), len(store_notices())
    try:
        return args.func(args)
    except (QueryError, DQAError, DumpError, HomeError) as e:
        print(scrub(error_line(e)), file=sys.stderr)
        return 1
    finally:
        for notice in notices(seen):  # damaged store files set aside on the way
            print(f"warning: {notice}", file=sys.stderr)
        for notice in dict.fromkeys(store_notices(stores_seen)):  # a run store emptied or replaced outside the app
            print(f"warning: {notice} (The History page's button acknowledges it.)", file=sys.stderr)
