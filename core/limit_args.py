"""The command-line flags of a run's limits (``core run``, ``core bench``) and of a benchmark's budget
(``core bench``)."""
from __future__ import annotations

import argparse

from core.agents.config import Limits

_DEFAULTS = Limits()


def add_limit_arguments(p: argparse.ArgumentParser) -> None:
    """Per-run limits: at the call, token or cost limit the agent is asked for its final answer; repeats end the run
    as stuck; the context window keeps requests within the model's context."""
    g = p.add_argument_group("limits of each run")
    g.add_argument("--max-llm-calls", type=int, default=_DEFAULTS.max_llm_calls, metavar="N",
                   help=f"LLM calls per run, the last one for the final answer (default {_DEFAULTS.max_llm_calls})")
    g.add_argument("--max-tokens", type=int, default=_DEFAULTS.max_tokens, metavar="N",
                   help=f"prompt + completion tokens per run before the final answer is asked for "
                        f"(default {_DEFAULTS.max_tokens})")
    g.add_argument("--max-cost", type=float, metavar="USD",
                   help="estimated cost per run (price table) before the final answer is asked for (default none)")
    g.add_argument("--max-repeats", type=int, default=_DEFAULTS.max_repeats, metavar="N",
                   help="repeated actions (the same query again) that end a run as stuck "
                        f"(default {_DEFAULTS.max_repeats})")
    g.add_argument("--context-tokens", type=int, metavar="N",
                   help="the model's context window: older observations are shortened to fit (default: what the "
                        "server reports, llama.cpp or vLLM; else nothing shortened)")


def limits_from(args: argparse.Namespace) -> Limits:
    """The Limits the flags give. Raises ValueError naming a bad one."""
    return Limits(max_llm_calls=args.max_llm_calls, max_tokens=args.max_tokens, max_cost_usd=args.max_cost,
                  max_repeats=args.max_repeats, context_tokens=args.context_tokens).validate()


def add_budget_arguments(p: argparse.ArgumentParser) -> None:
    """A benchmark's budget, checked before each LLM call."""
    g = p.add_argument_group("budget of the benchmark (what this command spends on LLM calls; cached replies are free)")
    g.add_argument("--budget-tokens", type=int, metavar="N",
                   help="stop before a call once this many tokens were spent; finished items are kept and a rerun "
                        "goes on")
    g.add_argument("--budget-cost", type=float, metavar="USD",
                   help="stop before a call once this much estimated cost was spent (price table)")
