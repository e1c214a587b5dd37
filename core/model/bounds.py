"""The bounds of every number a person, a command line or a queued job gives (inclusive, by setting name): one
table the pages' inputs, the command line's flags, ``Limits``, ``BenchConfig`` and the job queue's payload all
check against. A whole number's bounds are ints; NaN and infinity are never in bounds."""
from __future__ import annotations

import math

NUMBERS: dict[str, tuple[int | float, int | float]] = {
    # a run's limits (core.model.run_settings.Limits)
    "max_llm_calls": (1, 1000),
    "max_tokens": (1, 100_000_000),
    "max_cost_usd": (0.0, 1000.0),
    "max_repeats": (1, 100),
    "context_tokens": (256, 10_000_000),
    "reply_tokens": (1, 1_000_000),
    "query_timeout_s": (0.1, 3600.0),
    "row_cap": (1, 100_000),
    "observation_rows": (1, 10_000),
    "observation_chars": (100, 1_000_000),
    "cell_chars": (10, 100_000),
    # a benchmark (core.benchmark.config.BenchConfig) and its budget
    "epochs": (1, 50),
    "vote": (0, 50),
    "concurrency": (1, 32),
    "rpm": (0.0, 100_000.0),
    "budget_tokens": (0, 10_000_000_000),
    "budget_cost": (0.0, 100_000.0),
    "budget_calls": (0, 100_000_000),
    # the model's sampling and its server's limits (core.config.settings.LLMSettings)
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "seed": (0, 2**63 - 1),
    "timeout_s": (1.0, 3600.0),
    "max_retries": (0, 10),
    "max_reply_tokens": (1, 1_000_000),
    # a question's number, a run's samples and branches (the Run page), a plan version, a wait
    "question": (1, 1_000_000),
    "samples": (1, 20),
    "step": (0, 100_000),
    "plan_version": (1, 1_000_000),
    "wait_s": (0.0, 3600.0),
}

LABELS = {"max_llm_calls": "LLM call limit", "max_tokens": "token limit", "max_cost_usd": "cost limit (USD)",
          "max_repeats": "repeat limit", "context_tokens": "context window (tokens)", "reply_tokens": "reply cap",
          "query_timeout_s": "query timeout (seconds)", "row_cap": "row cap",
          "observation_rows": "number of rows shown to the model", "observation_chars": "observation size (characters)",
          "cell_chars": "cell size (characters)", "budget_tokens": "token budget", "budget_cost": "cost budget (USD)",
          "budget_calls": "LLM call budget", "rpm": "requests per minute", "top_p": "top-p",
          "timeout_s": "model timeout (seconds)", "max_retries": "model retries",
          "max_reply_tokens": "reply cap (tokens)"}


def whole(name: str) -> bool:
    """Whether setting ``name`` is a whole number."""
    return isinstance(NUMBERS[name][0], int)


def in_bounds(name: str, value, label: str | None = None, given: str | None = None):
    """``value`` (an int for a whole setting) when it is a finite number within setting ``name``'s bounds;
    ValueError naming the setting and its bounds (and ``given``, the text it was read from) otherwise."""
    low, high = NUMBERS[name]
    integral = isinstance(low, int)
    number = None
    if not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value):
        number = value if not integral or value == int(value) else None
    if number is None or not low <= number <= high:
        raise ValueError(f"the {label or LABELS.get(name, name.replace('_', ' '))} must be "
                         f"{'a whole' if integral else 'a'} number from {low:,} to {high:,}, not "
                         f"{_shown(value) if given is None else _shown(given)}")
    return int(number) if integral else float(number)


def parse(name: str, text: str, label: str | None = None):
    """The number ``text`` gives for setting ``name`` (``1e3`` is a whole number), within its bounds; ValueError
    naming the setting otherwise."""
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            value = text
    return in_bounds(name, value, label, given=text)


def no_nul(text: str, what: str = "text") -> str:
    """``text``: any Unicode but NUL, which no store keeps (PostgreSQL refuses it); ValueError naming ``what``."""
    if "\x00" in text:
        raise ValueError(f"the {what} may hold any character but NUL (\\x00): remove it")
    return text


def one_of(value, choices, what: str):
    """``value`` when it is one of ``choices``; ValueError ``unknown WHAT 'value'; choose one of ...`` otherwise."""
    if value not in choices:
        raise ValueError(unknown(what, value, choices))
    return value


def unknown(what: str, value, choices) -> str:
    """The message for a ``value`` of ``what`` that is none of ``choices``."""
    return f"unknown {what} {value!r}; choose one of {', '.join(choices)}"


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
