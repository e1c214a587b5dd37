"""Statistics for benchmark figures, from their formulas (no statistics package): the Wilson score interval of a
proportion, the exact McNemar test of two techniques run on the same items, and Newcombe's interval for the
difference of two paired proportions.

- Wilson (1927): centre (k + z²/2)/(n + z²), half-width z·sqrt(k(n-k)/n + z²/4)/(n + z²).
- Exact McNemar: under no difference the b discordant pairs won by A among b + c are Binomial(b + c, 1/2); the
  two-sided p-value is min(1, 2·P(X <= min(b, c))).
- Newcombe (1998, method 10): the difference of paired proportions with a hybrid score interval built from
  each proportion's Wilson interval and the correlation phi of the 2x2 table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials, as proportions; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when there are none)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Paired:
    """Two techniques on the same n items: both right, only A right, only B right, neither; the exact McNemar
    p-value; A's accuracy minus B's (proportion) with its 95% interval."""

    both: int
    only_a: int
    only_b: int
    neither: int
    p_value: float
    diff: float
    low: float
    high: float

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither

    @property
    def significant(self) -> bool:
        """Whether the difference is significant at the 5% level (exact McNemar)."""
        return self.p_value < 0.05


def paired(a_right: list[bool], b_right: list[bool], z: float = Z95) -> Paired:
    """The paired comparison of two techniques' right/wrong on the same items (in the same order)."""
    if len(a_right) != len(b_right):
        raise ValueError("paired comparison needs the same items for both techniques")
    e = sum(a and b for a, b in zip(a_right, b_right))
    f = sum(a and not b for a, b in zip(a_right, b_right))
    g = sum(b and not a for a, b in zip(a_right, b_right))
    h = len(a_right) - e - f - g
    n = len(a_right)
    if n == 0:
        return Paired(0, 0, 0, 0, 1.0, 0.0, -1.0, 1.0)
    denominator = math.sqrt((e + f) * (g + h) * (e + g) * (f + h))
    phi = (e * h - f * g) / denominator if denominator else 0.0
    diff, low, high = difference_interval(e + f, n, e + g, n, phi, z)
    return Paired(e, f, g, h, mcnemar_exact(f, g), diff, low, high)


def difference_interval(k1: int, n1: int, k2: int, n2: int, phi: float = 0.0,
                        z: float = Z95) -> tuple[float, float, float]:
    """k1/n1 - k2/n2 with Newcombe's hybrid score interval (method 10): ``phi`` 0 for independent samples, the
    2x2 table's correlation for paired ones."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    diff = p1 - p2
    return diff, max(-1.0, diff - delta), min(1.0, diff + epsilon)
