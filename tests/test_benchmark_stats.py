"""The benchmark's statistics against published worked examples and exact values."""
from __future__ import annotations

import math

import pytest

from core.benchmark.stats import difference_interval, mcnemar_exact, paired, wilson


def test_wilson_matches_newcombe_1998_examples():
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I (method 3)
    assert wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=5e-5)
    assert wilson(15, 148) == pytest.approx((0.0624, 0.1605), abs=5e-5)
    assert wilson(0, 20) == pytest.approx((0.0, 0.1611), abs=5e-5)
    assert wilson(1, 29) == pytest.approx((0.0061, 0.1718), abs=5e-5)
    assert wilson(0, 0) == (0.0, 1.0)


def test_exact_mcnemar_is_the_two_sided_binomial_on_discordant_pairs():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(1, 9) == pytest.approx(2 * (1 + 10) / 1024)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)


def test_difference_interval_matches_newcombe_1998_independent_example():
    # Newcombe (1998), "Interval estimation for the difference between independent proportions": 56/70 - 48/80
    # = 0.2000, method 10 interval (0.0524, 0.3339)
    diff, low, high = difference_interval(56, 70, 48, 80)
    assert diff == pytest.approx(0.2) and (low, high) == pytest.approx((0.0524, 0.3339), abs=5e-5)


def test_paired_comparison_counts_p_value_and_interval():
    a = [True] * 12 + [True] * 9 + [False] * 2 + [False] * 21
    b = [True] * 12 + [False] * 9 + [True] * 2 + [False] * 21
    p = paired(a, b)
    assert (p.both, p.only_a, p.only_b, p.neither, p.n) == (12, 9, 2, 21, 44)
    assert p.diff == pytest.approx(7 / 44) and p.low < p.diff < p.high
    assert p.p_value == pytest.approx(2 * sum(math.comb(11, i) for i in range(3)) / 2 ** 11)
    assert not p.significant  # p = 0.065
    swapped = paired(b, a)  # the interval mirrors when A and B swap
    assert (swapped.low, swapped.high) == pytest.approx((-p.high, -p.low))
    same = paired(a, a)
    assert same.diff == 0 and same.p_value == 1.0 and same.low <= 0 <= same.high
    clear = paired([True] * 30, [False] * 30)
    assert clear.significant and clear.low > 0.8


def test_paired_needs_the_same_items():
    with pytest.raises(ValueError):
        paired([True], [True, False])
