"""The ``python -m core`` command line: one module per subcommand (or group of subcommands) adds its parser
here; nothing else imports this package."""
from __future__ import annotations

import argparse
import sys

import core.cli.autoplan as autoplan_command
import core.cli.bench as bench_command
import core.cli.db as db_commands
import core.cli.grade as grade_command
import core.cli.override as override_command
import core.cli.scenario as scenario_command
import core.cli.worker as worker_command
from core.config import interpreter
from core.backends import graph_server
from core.backends.base import QueryError
import core.cli.data as data_commands
import core.cli.run as run_commands
from core.cli.args import error_line
from core.config.home import HomeError, notices
from core.config.secrets import scrub
from core.scenarios.dqa.source import DQAError
from core.store import database
from core.store.runs import store_notices
from sims.files import FileRefused
from sims.sqldump import DumpError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core", description="PlanRAG Workbench command line")
    sub = parser.add_subparsers(dest="command", required=True)
    data_commands.add_parsers(sub)
    run_commands.add_parsers(sub)
    db_commands.add_parsers(sub)
    worker_command.add_parser(sub)

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

    p = sub.add_parser("local-runs", help="drive the app's runs in a process of their own (the app starts it)",
                       description="Started by the app (PLANRAG_JOBS=process, the embedded default): it reads the "
                       "runs to drive on its standard input and ends when that closes. Not meant to be run by hand.")
    p.set_defaults(func=_local_runs)
    p = sub.add_parser("graph-server", help="install, start, stop a local Neo4j-protocol server (ArcadeDB)",
                       description=graph_server.DESCRIPTION)
    graph_server.add_arguments(p)
    p.set_defaults(func=graph_server.main)
    return parser


def _local_runs(args) -> int:
    from core.jobs import local_host  # heavy: the agent runtime, which no other command here needs at its start

    return local_host.main(args)


def main(argv: list[str] | None = None) -> int:
    interpreter.install()  # runs, benchmarks and workers import and build LangGraph graphs on threads
    args = build_parser().parse_args(argv)
    seen, stores_seen = len(notices()), len(store_notices())
    try:
        if args.command != "db":  # a team store whose schema is behind: say so before anything runs
            database.check()
        return args.func(args)
    except (QueryError, DQAError, DumpError, HomeError, FileRefused) as e:
        print(scrub(error_line(e)), file=sys.stderr)
        return 1
    finally:
        for notice in notices(seen):  # damaged store files set aside on the way
            print(f"warning: {notice}", file=sys.stderr)
        for notice in dict.fromkeys(store_notices(stores_seen)):  # a run store emptied or replaced outside the app
            print(f"warning: {notice} (The History page's button acknowledges it.)", file=sys.stderr)
