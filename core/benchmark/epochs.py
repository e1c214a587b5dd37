"""Statistics of repeated samples (benchmark epochs), from their formulas (no statistics package). The K samples of
a question are not K independent questions: they are a cluster, and the figures treat them so.

- Clustered interval of the accuracy over all samples: the Wilson interval at the effective sample size. With y_q
  right of m_q samples on question q, N = sum m_q and p = sum y_q / N, the cluster-robust variance (questions as
  clusters) is V_c = sum (y_q - p m_q)^2 / N^2 and the binomial one V_b = p(1 - p)/N; the design effect is
  deff = V_c / V_b, kept within [1, max m_q] (never narrower than independent samples, never wider than one sample
  per question), and max m_q when p is 0 or 1 (V_b is 0: the worst case is assumed). The interval is Wilson's for
  p at n_eff = N / deff. With one sample per question deff is exactly 1: Wilson's interval as before.
- Paired comparison of two techniques on the same questions, from the per-question accuracy rates r_q (right / K):
  the differences d_q = rA_q - rB_q; the exact two-sided sign-flip permutation test (under no difference every
  d_q is as likely to have either sign; p = the share of the 2^n sign patterns whose |sum| is at least the
  observed one, counted exactly over the sums); the mean difference with its 95% t interval (n - 1 degrees of
  freedom). With K = 1 the sign-flip test is the exact McNemar test; reports keep McNemar (and Newcombe's
  interval) for K = 1.
- Agreement of a question's samples: the share of the K(K-1)/2 pairs of samples that made the same decision (no
  decision counts as a decision of its own).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from core.benchmark.stats import Z95


def wilson_at(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson's interval of a proportion p observed on (effective) n trials; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Clustered:
    """Accuracy over all samples: ``right`` of ``samples`` on ``questions``; the design effect, the effective sample
    size and the 95% interval (proportions)."""

    right: int
    samples: int
    questions: int
    deff: float
    n_eff: float
    low: float
    high: float

    @property
    def p(self) -> float:
        return self.right / self.samples if self.samples else 0.0


def clustered(right: list[int], samples: list[int]) -> Clustered:
    """The clustered accuracy of questions with ``right[q]`` right of ``samples[q]`` samples each."""
    n, k, q = sum(samples), sum(right), len(samples)
    if not n:
        return Clustered(0, 0, q, 1.0, 0.0, 0.0, 1.0)
    p, most = k / n, max(samples)
    binomial = p * (1 - p) / n
    if binomial == 0:
        deff = float(most)
    else:
        robust = sum((y - p * m) ** 2 for y, m in zip(right, samples)) / n ** 2
        deff = min(float(most), max(1.0, robust / binomial))
    low, high = wilson_at(p, n / deff)
    return Clustered(k, n, q, deff, n / deff, low, high)


def agreement(decisions: list) -> float | None:
    """The share of pairs of samples that made the same decision (None with fewer than 2 samples)."""
    k = len(decisions)
    if k < 2:
        return None
    same = sum(c * (c - 1) // 2 for c in Counter(decisions).values())
    return same / (k * (k - 1) // 2)


def sign_flip_p(differences: list[Fraction]) -> float:
    """The exact two-sided sign-flip permutation p-value of paired differences (1.0 when all are 0)."""
    scale = math.lcm(*(d.denominator for d in differences)) if differences else 1
    values = [abs(int(d * scale)) for d in differences if d]
    observed = abs(sum(int(d * scale) for d in differences))
    if not values:
        return 1.0
    counts = {0: 1}  # sum -> number of sign patterns
    for v in values:
        following: dict[int, int] = {}
        for total, ways in counts.items():
            for signed in (total + v, total - v):
                following[signed] = following.get(signed, 0) + ways
        counts = following
    return min(1.0, sum(w for total, w in counts.items() if abs(total) >= observed) / 2 ** len(values))


def _t_density(x: float, df: int) -> float:
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(x * x / df))


def _t_cdf_above_half(x: float, df: int, steps: int = 2000) -> float:
    """P(0 <= T <= x) by Simpson's rule (x >= 0)."""
    h = x / steps
    total = _t_density(0, df) + _t_density(x, df)
    total += sum((4 if i % 2 else 2) * _t_density(i * h, df) for i in range(1, steps))
    return total * h / 3


@lru_cache(maxsize=256)
def t_quantile(df: int, level: float = 0.975) -> float:
    """The ``level`` quantile of Student's t with ``df`` degrees of freedom (bisection on its CDF)."""
    if df <= 0:
        return math.inf
    target, low, high = level - 0.5, 0.0, 1.0
    while _t_cdf_above_half(high, df) < target:
        high *= 2
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_cdf_above_half(mid, df) < target else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class PairedRates:
    """Two techniques' per-question accuracy rates on the same n questions: the questions where A's rate is higher,
    B's is, or they are equal; the sign-flip p-value; the mean difference A - B (proportion) with its 95% t
    interval."""

    n: int
    a_higher: int
    b_higher: int
    equal: int
    p_value: float
    diff: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05


def paired_rates(a: list[Fraction], b: list[Fraction]) -> PairedRates:
    """The paired comparison of per-question rates (same questions, same order)."""
    if len(a) != len(b):
        raise ValueError("paired comparison needs the same questions for both techniques")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    if not n:
        return PairedRates(0, 0, 0, 0, 1.0, 0.0, -1.0, 1.0)
    mean = float(sum(d)) / n
    if n > 1:
        sd = math.sqrt(sum((float(x) - mean) ** 2 for x in d) / (n - 1))
        half = t_quantile(n - 1) * sd / math.sqrt(n)
    else:
        half = math.inf
    return PairedRates(n, sum(x > 0 for x in d), sum(x < 0 for x in d), sum(x == 0 for x in d), sign_flip_p(d),
                       mean, max(-1.0, mean - half), min(1.0, mean + half))
