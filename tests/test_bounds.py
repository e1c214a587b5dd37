"""Every number a person, a command line or a job gives is bounded by one table (core.model.bounds): out of
bounds, NaN and infinity are refused with one clear line, before anything runs (issue 44 section B)."""
from __future__ import annotations

import math

import pytest

from core.benchmark.config import BenchConfig
from core.cli.main import build_parser
from core.model.run_settings import Limits


@pytest.mark.parametrize("flag, value", [("--epochs", "1e9"), ("--epochs", "1000000000"), ("--vote", "1e9"),
                                         ("--budget-calls", "1e23"), ("--budget-calls", "1" + "0" * 23),
                                         ("--budget-cost", "nan"), ("--budget-cost", "inf"),
                                         ("--budget-tokens", "-1"), ("--concurrency", "100000"),
                                         ("--rpm", "nan"), ("--temperature", "inf"), ("--max-cost", "nan"),
                                         ("--max-llm-calls", "1e12"), ("--llm-timeout", "nan"),
                                         ("--llm-retries", "1e9"), ("--seed", "1e30")])
def test_the_bench_command_refuses_a_number_out_of_bounds_in_one_line(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["bench", "--smoke", flag, value])
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"python -m core bench: error: argument {flag}: the ") and " must be " in line
    assert "Traceback" not in line


def test_the_bench_command_takes_numbers_within_bounds():
    args = build_parser().parse_args(["bench", "--smoke", "--epochs", "50", "--vote", "3", "--budget-calls", "1e3",
                                      "--budget-cost", "2.5"])
    assert (args.epochs, args.vote, args.budget_calls, args.budget_cost) == (50, 3, 1000, 2.5)


@pytest.mark.parametrize("field, value", [("epochs", 10**9), ("vote", 10**9), ("budget_calls", 10**23),
                                          ("budget_cost", math.nan), ("rpm", math.inf), ("concurrency", 0),
                                          ("temperature", math.nan)])
def test_a_benchmark_config_refuses_a_number_out_of_bounds(field, value):
    with pytest.raises(ValueError, match="must be"):
        BenchConfig(["iterrag"], "m", **{field: value}).check_numbers()


@pytest.mark.parametrize("field, value", [("max_llm_calls", 10**9), ("max_tokens", 10**12),
                                          ("max_cost_usd", math.nan), ("max_cost_usd", math.inf),
                                          ("context_tokens", 10**12), ("reply_tokens", 10**12),
                                          ("max_repeats", True), ("row_cap", 2.5)])
def test_limits_refuse_a_number_out_of_bounds(field, value):
    with pytest.raises(ValueError, match="must be"):
        Limits(**{field: value}).validate()

