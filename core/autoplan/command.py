"""``python -m core autoplan``: ``train`` learns a scenario's plan, ``show`` prints a learned plan."""
from __future__ import annotations

import argparse
import json
import sys

from core import settings as core_settings
from core.autoplan import EXPERIENCE_TECHNIQUES
from core.backends.registry import BACKENDS
from core.numbers import parse_numbers, spans
from core.scenario import SCENARIOS

DESCRIPTION = """\
AutoPlan (Ouyang & Li, 2023): learn a task-level plan for a scenario from training questions.

train  For I iterations: run the agent (PlanRAG, or IterRAG) with the current plan as its initial plan on a
       random batch of B training questions; reflect on each run with the simulator's outcome as the reward
       (summary, flawed plan steps, revision: one LLM call per run); merge the revisions into a new plan (one
       LLM call). Each new plan is saved as the scenario's next version, PLANRAG_HOME/plans/<scenario>/v<N>.json,
       with its reflections, its training questions and the accuracy of each iteration.
show   Print a learned plan (default the latest), its training and the accuracy of each iteration.

Use a learned plan with `python -m core run --technique autoplan` (PlanRAG from the latest plan) or
`--plan-version N` (with planrag or iterrag). Runs on a plan's training questions are refused.

examples:
  python -m core autoplan train --scenario locating --db sqlite --llm gpt-4o --train 1-20 --batch 4 --iterations 3
  python -m core autoplan show --scenario locating --version 2"""

def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="autoplan_command", required=True)
    p = sub.add_parser("train", help="learn a plan for a scenario from training questions",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=SCENARIOS, required=True)
    p.add_argument("--db", choices=list(BACKENDS), required=True)
    p.add_argument("--llm", default="", help="a model name (default OPENAI_MODEL), or replay:FILE holding the replies "
                                             "of every call of the training in order")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default: OPENAI_BASE_URL)")
    p.add_argument("--train", required=True, metavar="NUMBERS",
                   help="the training questions, e.g. 1-20 or 1-5,9; the learned plan is never run on them")
    p.add_argument("--batch", type=int, default=4, metavar="B", help="questions per iteration (default 4)")
    p.add_argument("--iterations", type=int, default=3, metavar="I", help="plan updates (default 3)")
    p.add_argument("--technique", choices=EXPERIENCE_TECHNIQUES, default="planrag",
                   help="the agent collecting experience (default planrag)")
    p.add_argument("--source", choices=("dqa", "demo"), default="dqa", help="question source (default dqa)")
    p.add_argument("--seed", type=int, default=0, help="seeds the random batches (default 0)")
    p.add_argument("--json", action="store_true", help="print the saved versions as JSON (progress to stderr)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("show", help="print a learned plan and the accuracy of its training iterations")
    p.add_argument("--scenario", choices=SCENARIOS, required=True)
    p.add_argument("--version", type=int, metavar="N", help="the version (default the latest)")
    p.add_argument("--json", action="store_true", help="print the plan file's content as JSON")
    p.set_defaults(func=cmd_show)


def _check_questions(source: str, scenario: str, numbers: list[int]) -> None:
    """ValueError for numbers that are not questions of the source."""
    from core import catalog

    count = len(catalog.questions(source, scenario))
    missing = [n for n in numbers if n > count]
    if missing:
        raise ValueError(f"--train: there is no {source} {scenario} question {missing[0]} (there are 1-{count})")


def cmd_train(args) -> int:
    """Train and print each iteration's accuracy and the versions saved."""
    from core.autoplan.train import AutoPlanError, TrainSettings, train
    from core.dqa import DQAError
    from core.llm import LLMError

    out = sys.stderr if args.json else sys.stdout
    try:
        numbers = parse_numbers(args.train, "--train")
        _check_questions(args.source, args.scenario, numbers)
        settings = TrainSettings(args.scenario, args.db, args.llm, numbers, args.batch, args.iterations,
                                 args.technique, args.source, args.seed, args.base_url)
        saved = train(settings, core_settings.DATA_HOME, progress=lambda line: print(line, file=out, flush=True))
    except (ValueError, DQAError, LLMError, AutoPlanError) as e:
        print(f"error ({getattr(e, 'kind', 'autoplan')}): {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([p.to_dict() for p in saved], default=str))
    else:
        print(f"saved {args.scenario} plan {', '.join(f'v{p.version}' for p in saved)}; "
              f"show it with: python -m core autoplan show --scenario {args.scenario}")
    return 0


def describe(plan) -> str:
    """A learned plan for a reader: its steps, its training and each iteration's accuracy."""
    w = plan.trained_with
    lines = [f"{plan.scenario} plan v{plan.version} (iteration {plan.iteration} of training {plan.training}; "
             f"revises {f'v{plan.parent}' if plan.parent else 'the empty plan'})",
             f"trained on {plan.source} questions {spans(plan.train)} with {w['technique']} on {w['db']}, "
             f"model {w['llm']}, batch {w['batch_size']}",
             *(f"  Step {i}: {s}" for i, s in enumerate(plan.steps, 1)), "accuracy by iteration:"]
    for h in plan.history:
        used = f"v{h['plan_version']}" if h["plan_version"] else "the empty plan"
        lines.append(f"  {h['iteration']}: {h['correct']}/{h['total']} with {used} "
                     f"(questions {spans(h['questions'])}; {h['llm_calls']} LLM calls)")
    return "\n".join(lines)


def cmd_show(args) -> int:
    """Print a learned plan."""
    from core.autoplan.store import PlanStore

    store = PlanStore(core_settings.DATA_HOME / "plans")
    try:
        plan = store.load(args.scenario, args.version)
    except ValueError as e:
        print(f"error (autoplan): {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**plan.to_dict(), "versions": store.versions(args.scenario)}, default=str))
    else:
        print(describe(plan))
        print(f"versions: {', '.join(f'v{v}' for v in store.versions(args.scenario))}")
    return 0
