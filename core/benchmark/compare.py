"""Dataset-level comparison of two benchmark settings: a baseline and a candidate (another technique,
model, prompt setting or plan version, from the same or another result set), per question: improved, regressed or
unchanged, with the paired statistics over the questions both ran (exact McNemar on right/wrong; with repeated
samples the exact sign-flip permutation test on the per-question rates of right samples)."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from core.benchmark.epochs import paired_rates
from core.benchmark.stats import paired

#: What names a setting within a result set: results differing in one of these are different settings.
SETTING_KEYS = ("technique", "db", "model", "prompt", "planner", "plan_version")
CHANGES = ("regressed", "improved", "still right", "still wrong")


def setting_of(result: dict) -> tuple:
    return tuple((k, result[k]) for k in SETTING_KEYS if result.get(k) is not None)


def settings(results: list[dict]) -> list[tuple]:
    """The settings a result set holds, in the order first met."""
    return list(dict.fromkeys(setting_of(r) for r in results))


def setting_label(setting: tuple) -> str:
    return " · ".join(str(v) for _, v in setting)


def _question(r: dict) -> tuple:
    return (r.get("source") or "dqa", r["scenario"], r["question"])


def _rates(results: list[dict], setting: tuple) -> dict[tuple, Fraction]:
    """Per question: the share of its samples (epochs) graded right; an item that could not run counts wrong."""
    right: dict[tuple, list[bool]] = {}
    for r in results:
        if setting_of(r) == setting:
            right.setdefault(_question(r), []).append(bool(r.get("correct")) and r.get("status") != "error")
    return {q: Fraction(sum(v), len(v)) for q, v in right.items()}


@dataclass(frozen=True)
class Change:
    source: str
    scenario: str
    question: int
    baseline: float  # share of samples right
    candidate: float

    @property
    def change(self) -> str:
        if self.candidate > self.baseline:
            return "improved"
        if self.candidate < self.baseline:
            return "regressed"
        return "still right" if self.baseline > 0 else "still wrong"


@dataclass(frozen=True)
class Comparison:
    changes: list[Change]  # the questions both settings ran
    only_baseline: int  # questions only the baseline ran
    only_candidate: int
    method: str
    p_value: float
    diff: float  # candidate's accuracy minus the baseline's, percentage points
    low: float
    high: float

    @property
    def significant(self) -> bool:
        return self.p_value < 0.05

    def count(self, change: str) -> int:
        return sum(c.change == change for c in self.changes)

    def text(self) -> str:
        """The comparison in words."""
        n = len(self.changes)
        if not n:
            return "The two settings ran no question in common."
        verdict = "significant" if self.significant else "not significant: the data cannot tell them apart"
        return (f"Candidate − baseline: {self.diff:+.1f} points [{self.low:+.1f}, {self.high:+.1f}] on {n} paired "
                f"questions; {self.count('improved')} improved, {self.count('regressed')} regressed; {self.method} "
                f"p={self.p_value:.3g}, {verdict}.")


def samples_of(results: list[dict], setting: tuple, change: Change) -> list[dict]:
    """The results of ``setting`` on the question of ``change``: its samples (a vote of them left out), to drill
    down into."""
    return [r for r in results if setting_of(r) == setting and _question(r) == (change.source, change.scenario,
                                                                                change.question)
            and not r.get("samples")]


def compare(baseline: list[dict], base_setting: tuple, candidate: list[dict], cand_setting: tuple) -> Comparison:
    """The candidate setting's results against the baseline's, question by question (see the module doc)."""
    a, b = _rates(baseline, base_setting), _rates(candidate, cand_setting)
    common = sorted(set(a) & set(b), key=lambda q: (q[0], q[1], q[2]))
    changes = [Change(*q, float(a[q]), float(b[q])) for q in common]
    if any(a[q].denominator > 1 or b[q].denominator > 1 for q in common):
        p = paired_rates([b[q] for q in common], [a[q] for q in common])
        method = "exact sign-flip permutation test"
    else:
        p = paired([b[q] == 1 for q in common], [a[q] == 1 for q in common])
        method = "exact McNemar"
    return Comparison(changes, len(set(a) - set(b)), len(set(b) - set(a)), method, p.p_value,
                      round(100 * p.diff, 1), round(100 * p.low, 1), round(100 * p.high, 1))
