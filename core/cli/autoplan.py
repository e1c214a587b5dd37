"""``python -m core autoplan``: ``train`` learns a scenario's plan, ``show`` prints a learned plan."""
from __future__ import annotations

import argparse
import json
import sys

from core.config import settings as core_settings
from core import scenarios
from core.model.technique import DEFAULT, TECHNIQUES
from core.techniques.autoplan.prompts import REFLECTIONS, REWARDS
from core.store.plans import training_setting
from core.backends.registry import BACKENDS
from core.cli.args import add_llm_arguments, error_line, llm_settings
from core.scenarios.catalog import SOURCES
from core.model.numbers import parse_numbers, questions_text, spans
from core.scenarios import catalog
from core.scenarios.dqa.source import DQAError
from core.store.plans import PlanStore
from core.analysis.format import number

DESCRIPTION = """\
AutoPlan (Ouyang & Li, 2023): learn a task-level plan for a scenario from training questions.

train  For I iterations: run the agent (PlanRAG, or IterRAG) with the current plan as its initial plan on a
       random batch of B training questions; reflect on each run with its outcome as the reward (summary, flawed
       plan steps, revision: three LLM calls per run, or one with --reflection one-call); merge the revisions
       into a new plan (one LLM call). As in the paper, the training samples (nucleus sampling, --top-p 0.9,
       --temperature 1) and the reward is success or failure (--reward rich adds the best decision, the rank
       and the regret); runs from a learned plan decode greedily (temperature 0). Each new plan is saved as
       the scenario's next version, PLANRAG_HOME/plans/<scenario>/v<N>.json, with its reflections, its
       training questions and the accuracy of each iteration.
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
    p.add_argument("--scenario", required=True, help="locating, building or a plugin's name: whose plan to learn")
    p.add_argument("--db", choices=list(BACKENDS), required=True,
                   help="the database backend the agent queries: sqlite, mysql (SQL); ladybug, neo4j (Cypher)")
    p.add_argument("--llm", default="", help="a model name (default OPENAI_MODEL), or replay:FILE holding the replies "
                                             "of every call of the training in order")
    p.add_argument("--base-url", help="an OpenAI-compatible server (default: OPENAI_BASE_URL)")
    p.add_argument("--train", required=True, metavar="NUMBERS",
                   help="the training questions, e.g. 1-20 or 1-5,9; the learned plan is never run on them")
    p.add_argument("--batch", type=int, default=4, metavar="B", help="questions per iteration (default 4)")
    p.add_argument("--iterations", type=int, default=3, metavar="I", help="plan updates (default 3)")
    p.add_argument("--technique", choices=[t.name for t in TECHNIQUES.values() if t.trains_plans], default=DEFAULT,
                   help=f"the agent collecting experience (default {DEFAULT})")
    p.add_argument("--source", choices=list(SOURCES), default="dqa", help="question source (default dqa; a plugin: "
                                                                         "scenario)")
    p.add_argument("--seed", type=int, default=0, help="seeds the random batches (default 0)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature of every training call (default 1: the paper states none)")
    p.add_argument("--top-p", type=float, default=0.9, help="nucleus sampling of every training call (default 0.9, "
                                                            "the paper's)")
    p.add_argument("--greedy", action="store_true", help="train with greedy decoding instead (temperature 0, no "
                                                         "top-p): not the paper's exploration")
    p.add_argument("--reflection", choices=REFLECTIONS, default="three-step",
                   help="three-step: summary, flaws and revision as three calls (the paper's, default); one-call: "
                        "all three in one call")
    p.add_argument("--reward", choices=REWARDS, default="success",
                   help="success: the paper's success or failure (default); rich: also the best decision, the rank "
                        "and the regret of the agent's")
    p.add_argument("--prompts", choices=("improved", "paper"), default="improved",
                   help="improved (default), or paper: the PlanRAG paper's prompts for the experience runs and "
                        "AutoPlan's reflection and update inputs (see docs/paper-deviations.md)")
    p.add_argument("--json", action="store_true", help="print the saved versions as JSON (progress to stderr)")
    add_llm_arguments(p, unattended=True)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("show", help="print a learned plan and the accuracy of its training iterations")
    p.add_argument("--scenario", required=True, help="locating, building or a plugin's name: whose plans to show")
    p.add_argument("--version", type=int, metavar="N", help="the version (default the latest)")
    p.add_argument("--json", action="store_true", help="print the plan file's content as JSON")
    p.set_defaults(func=cmd_show)


def _check_questions(source: str, scenario: str, numbers: list[int]) -> None:
    """ValueError for numbers that are not questions of the source."""

    count = len(catalog.questions(source, scenario))
    missing = [n for n in numbers if n > count]
    if missing:
        raise ValueError(f"--train: there is no {source} {scenario} question {missing[0]} "
                         f"(there are {questions_text(count)})")


def cmd_train(args) -> int:
    """Train and print each iteration's accuracy and the versions saved."""
    from core.techniques.autoplan.train import AutoPlanError, TrainSettings, train  # heavy: loads langchain_core, langgraph
    from core.llm.client import LLMError  # heavy: loads langchain_core

    out = sys.stderr if args.json else sys.stdout
    try:
        numbers = parse_numbers(args.train, "--train")
        _check_questions(args.source, args.scenario, numbers)
        if args.top_p is not None and not 0 < args.top_p <= 1:
            raise ValueError(f"--top-p must be above 0 and at most 1, not {args.top_p}")
        sampling = ({"temperature": 0.0, "top_p": None} if args.greedy else
                    {"temperature": args.temperature, "top_p": args.top_p})
        settings = TrainSettings(args.scenario, args.db, args.llm, numbers, args.batch, args.iterations,
                                 args.technique, args.source, args.seed, args.base_url, **sampling,
                                 reflection=args.reflection, reward=args.reward, prompts=args.prompts)
        saved = train(settings, core_settings.DATA_HOME, llm_settings=llm_settings(args, unattended=True),
                      progress=lambda line: print(line, file=out, flush=True))
    except (ValueError, DQAError, LLMError, AutoPlanError) as e:
        print(error_line(e), file=sys.stderr)
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
             training_setting(w),
             *(f"  Step {i}: {s}" for i, s in enumerate(plan.steps, 1)),
             "accuracy by iteration (success rate, the paper's reward; mean regret apart):"]
    for h in plan.history:
        used = f"v{h['plan_version']}" if h["plan_version"] else "the empty plan"
        regret = f"; mean regret {number(h['mean_regret'])}" if h.get("mean_regret") is not None else ""
        lines.append(f"  {h['iteration']}: {h['correct']}/{h['total']} with {used} "
                     f"(questions {spans(h['questions'])}; {h['llm_calls']} LLM calls{regret})")
    return "\n".join(lines)



def cmd_show(args) -> int:
    """Print a learned plan."""

    store = PlanStore(core_settings.DATA_HOME / "plans")
    try:
        scenarios.get(args.scenario)
        plan = store.load(args.scenario, args.version)
    except (KeyError, ValueError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**plan.to_dict(), "versions": store.versions(args.scenario)}, default=str))
    else:
        print(describe(plan))
        print(f"versions: {', '.join(f'v{v}' for v in store.versions(args.scenario))}")
    return 0
