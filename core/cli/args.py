"""What several subcommands share: the flags of a run's limits (``core run``, ``core bench``), of a benchmark's
budget (``core bench``), of the model server's limits and the papers' settings, of a question; and how an error
reads on one line."""
from __future__ import annotations

import argparse
from dataclasses import replace

from core.backends.registry import BACKENDS
from core.model import bounds
from core.model.run_settings import Limits
from core.scenarios import catalog
from core.config.settings import (
    INTERACTIVE_RETRIES, INTERACTIVE_TIMEOUT_S, UNATTENDED_RETRIES, UNATTENDED_TIMEOUT_S
)
from core.config.settings import LLMSettings
from core.llm.tokenizer_file import open_tokenizer
from core.analysis.format import number

_DEFAULTS = Limits()


def add_limit_arguments(p: argparse.ArgumentParser) -> None:
    """Per-run limits: at the call, token or cost limit the agent is asked for its final answer; repeats end the run
    as stuck; the context window keeps requests within the model's context."""
    g = p.add_argument_group("limits of each run")
    g.add_argument("--max-llm-calls", type=bounded("max_llm_calls"), default=_DEFAULTS.max_llm_calls, metavar="N",
                   help=f"LLM calls per run, the last one for the final answer (default {_DEFAULTS.max_llm_calls})")
    g.add_argument("--max-tokens", type=bounded("max_tokens"), default=_DEFAULTS.max_tokens, metavar="N",
                   help=f"prompt + completion tokens per run before the final answer is asked for "
                        f"(default {_DEFAULTS.max_tokens})")
    g.add_argument("--max-cost", type=bounded("max_cost_usd"), metavar="USD",
                   help="estimated cost per run (price table) before the final answer is asked for (default none)")
    g.add_argument("--max-repeats", type=bounded("max_repeats"), default=_DEFAULTS.max_repeats, metavar="N",
                   help="repeated actions (the same query again) that end a run as stuck "
                        f"(default {_DEFAULTS.max_repeats})")
    g.add_argument("--context-tokens", type=bounded("context_tokens"), metavar="N",
                   help="the model's context window: older observations are shortened to fit, with room for "
                        "the reply cap (at most half the window; a larger cap is cut to that) (default: what the "
                        "server reports, llama.cpp or vLLM; else nothing shortened)")


    add_query_limit_arguments(g)


def bounded(name: str):
    """An argparse type for the setting ``name`` (core.model.bounds.NUMBERS): its value within its bounds, or a
    clear one-line error (NaN and infinity refused)."""

    def parse(text: str):
        try:
            return bounds.parse(name, text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def add_query_limit_arguments(g, timeout: float = _DEFAULTS.query_timeout_s, row_cap: int = _DEFAULTS.row_cap,
                              observation: bool = True) -> None:
    """The limits of each database query: time, rows kept, characters of a cell (and of what the model sees)."""
    g.add_argument("--timeout", type=bounded("query_timeout_s"), default=timeout, metavar="S",
                   help=f"seconds each database query may run (default {number(timeout)}); on the local Neo4j-protocol "
                        "server (ArcadeDB) the client stops waiting then, but the server may go on until its own "
                        "command timeout (graph-server --command-timeout, default 60 s)")
    g.add_argument("--row-cap", type=bounded("row_cap"), default=row_cap, metavar="N",
                   help=f"rows of a query's result kept (default {row_cap})")
    g.add_argument("--cell-chars", type=bounded("cell_chars"), default=_DEFAULTS.cell_chars, metavar="N",
                   help="characters of one cell kept; longer ones are cut and marked "
                        f"(default {_DEFAULTS.cell_chars})")
    if observation:
        g.add_argument("--observation-chars", type=bounded("observation_chars"),
                       default=_DEFAULTS.observation_chars, metavar="N",
                       help="characters of a query's result the model sees; the rest is summarised "
                            f"(default {_DEFAULTS.observation_chars})")


def limits_from(args: argparse.Namespace) -> Limits:
    """The Limits the flags give. Raises ValueError naming a bad one."""
    return Limits(max_llm_calls=args.max_llm_calls, max_tokens=args.max_tokens, max_cost_usd=args.max_cost,
                  max_repeats=args.max_repeats, context_tokens=args.context_tokens, query_timeout_s=args.timeout,
                  row_cap=args.row_cap, cell_chars=args.cell_chars,
                  observation_chars=args.observation_chars).validate()


def add_budget_arguments(p: argparse.ArgumentParser) -> None:
    """A benchmark's budget, each LLM call reserved in it before it is made."""
    g = p.add_argument_group("budget of the benchmark (what this command spends on LLM calls; cached replies are free)")
    g.add_argument("--budget-tokens", type=bounded("budget_tokens"), metavar="N",
                   help="stop before a call once this many tokens were spent; finished items are kept and a rerun "
                        "goes on")
    g.add_argument("--budget-cost", type=bounded("budget_cost"), metavar="USD",
                   help="stop before a call once this much estimated cost was spent (price table)")
    g.add_argument("--budget-calls", type=bounded("budget_calls"), metavar="N",
                   help="make at most this many LLM calls (those in flight counted, so never more)")


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


def add_llm_arguments(p: argparse.ArgumentParser, unattended: bool = False) -> None:
    """The model server's limits, as ``core run`` and ``core bench`` (``unattended``) take them."""

    timeout, retries = ((UNATTENDED_TIMEOUT_S, UNATTENDED_RETRIES) if unattended else
                        (INTERACTIVE_TIMEOUT_S, INTERACTIVE_RETRIES))
    p.add_argument("--llm-timeout", type=bounded("timeout_s"), metavar="S",
                   help=f"an attempt's time limit T (default {number(timeout)}): a streamed reply's first words within 3 "
                        "T, then cut only after T of silence; any reply within 10 T; a retry after a timeout waits "
                        "longer, up to twice that; env PLANRAG_LLM_TIMEOUT")
    p.add_argument("--llm-retries", type=bounded("max_retries"), metavar="N",
                   help="retries of a failed model call: timeouts, server errors, rate limits "
                        f"(default {retries}; env PLANRAG_LLM_RETRIES)")
    p.add_argument("--max-reply-tokens", type=bounded("max_reply_tokens"), metavar="N",
                   help="the reply cap in tokens (default 2048; env PLANRAG_MAX_REPLY_TOKENS)")
    p.add_argument("--tokenizer", metavar="PATH",
                   help="the model's Hugging Face tokenizer.json, to count a request's tokens for the context "
                        "window offline (default: the server's tokenizer where it has one, else an estimate from "
                        "characters; env PLANRAG_TOKENIZER)")


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
    """The LLM settings of a command: the environment's, with its --llm-timeout, --llm-retries,
    --max-reply-tokens and --tokenizer. ValueError for a bad value (a tokenizer file that cannot be used
    included)."""

    base = LLMSettings.unattended() if unattended else LLMSettings()
    settings = base.with_limits(args.llm_timeout, args.llm_retries, args.max_reply_tokens)
    if args.tokenizer:
        settings = replace(settings, tokenizer=args.tokenizer)
    if settings.tokenizer:
        open_tokenizer(settings.tokenizer)  # TokenizerFileError (a ValueError) before anything runs
    return settings


def add_question_arguments(p: argparse.ArgumentParser) -> None:
    """--scenario, --question, --db and --source: which question's database a command works on."""
    p.add_argument("--scenario", required=True, help=SCENARIO_HELP)
    p.add_argument("--question", type=bounded("question"), required=True, help="question number N (1-based, file order)")
    p.add_argument("--db", choices=list(BACKENDS), required=True, help=DB_HELP)
    p.add_argument("--source", choices=list(catalog.SOURCES), help=SOURCE_HELP)
