"""Result types shared by both simulators: a scored candidate, a ranking of all candidates, input errors."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import Union

#: Simulation modes: ``dqa`` reproduces the benchmark's code and labels, ``rules`` follows the paper's text.
MODES = ("dqa", "rules")

Candidate = Union[str, int]
#: Scores this close (relative to the larger magnitude) are equal: their candidates tie.
TIE_TOLERANCE = 1e-9


def same_score(a: float, b: float) -> bool:
    """Whether two scores are equal within ``TIE_TOLERANCE`` relative."""
    return a == b or abs(a - b) <= TIE_TOLERANCE * max(abs(a), abs(b))


class InputError(ValueError):
    """A database or question the simulators cannot work on: unknown country or goods, missing table, ..."""


def required_columns(tables, scenario: str, table: str, *names: str) -> list[list]:
    """The named columns of ``table`` (values in table order), or InputError saying the database is not a
    ``scenario`` database."""
    if table not in tables:
        raise InputError(f"not a {scenario} database: no table {table}")
    try:
        return [tables[table].column(n) for n in names]
    except ValueError as e:
        raise InputError(f"not a {scenario} database: table {table} lacks a column ({e})") from None


def check_mode(mode: str) -> str:
    """Return ``mode`` if it is one of MODES, else raise InputError."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class Scored:
    """One candidate decision and its score (Locating: profit; Building: goods price)."""

    candidate: Candidate
    score: float


@dataclass(frozen=True)
class Ranking:
    """Every candidate of one question with its score, best first (equal scores keep table order).

    ``baseline`` is the score without any decision; ``threshold`` is the score a candidate must beat
    strictly to be picked by the benchmark's selection rule (see ``label``).
    """

    scenario: str  # "locating" or "building"
    mode: str
    entries: tuple[Scored, ...]
    baseline: float
    threshold: float
    higher_is_better: bool

    @property
    def best(self) -> Scored | None:
        """The top entry (None when there are no candidates)."""
        return self.entries[0] if self.entries else None

    def label(self) -> Candidate | None:
        """The pick of the benchmark's rule: the first candidate in table order with the best score,
        provided that score strictly beats ``threshold``; otherwise None."""
        best = self.best
        if best is None or not self._better(best.score, self.threshold):
            return None
        return best.candidate

    def score_of(self, candidate: Candidate) -> float:
        """The candidate's score; KeyError if it is not a candidate."""
        position = self._positions.get(candidate)
        if position is None:
            raise KeyError(f"{candidate!r} is not a candidate of this {self.scenario} question")
        return self.entries[position].score

    def position_of(self, candidate: Candidate) -> int | None:
        """1-based position of the candidate in ``entries`` (ties in table order), None if not a candidate."""
        found = self._positions.get(candidate)
        return None if found is None else found + 1

    def rank_of(self, candidate: Candidate) -> int | None:
        """1-based rank of the candidate: the best position of its tie group (shared by the group), None if not
        a candidate."""
        found = self._positions.get(candidate)
        return None if found is None else self._groups[found][0] + 1

    def tied(self, candidate: Candidate) -> int:
        """How many candidates share the candidate's score (1 when it ties with none); KeyError if not a
        candidate."""
        self.score_of(candidate)
        return self._groups[self._positions[candidate]][1]

    @property
    def all_tied(self) -> bool:
        """Whether every candidate has the same score (then no decision is better than another)."""
        return len(self.entries) > 1 and self._groups[0][1] == len(self.entries)

    def groups(self) -> list[tuple[int, int]]:
        """Per entry, in order: (rank, group size) of its tie group."""
        return [(start + 1, size) for start, size in self._groups]

    def gain(self, candidate: Candidate) -> float:
        """Improvement of the candidate's score over the baseline; positive means better in both scenarios."""
        score = self.score_of(candidate)
        return score - self.baseline if self.higher_is_better else self.baseline - score

    def regret(self, candidate: Candidate) -> float:
        """How much worse than the best entry the candidate scores (>= 0, in score units; 0 for a candidate
        tied with the best)."""
        score, best = self.score_of(candidate), self.entries[0].score
        if same_score(score, best):
            return 0.0
        return best - score if self.higher_is_better else score - best

    def relative_regret(self, candidate: Candidate) -> float:
        """``regret`` as a percentage of the best score's magnitude (0 when the best score is 0)."""
        best = abs(self.entries[0].score)
        return 0.0 if best == 0 else 100.0 * self.regret(candidate) / best

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b

    @cached_property
    def _positions(self) -> dict[Candidate, int]:
        return {e.candidate: i for i, e in enumerate(self.entries)}

    @cached_property
    def _groups(self) -> list[tuple[int, int]]:
        """Per entry: (first position, size) of its tie group; a group holds the entries whose score equals
        the group's first score."""
        starts, start = [], 0
        for i, e in enumerate(self.entries):
            if not same_score(e.score, self.entries[start].score):
                start = i
            starts.append(start)
        sizes = Counter(starts)
        return [(s, sizes[s]) for s in starts]


def make_ranking(scenario: str, mode: str, candidates: list, scores: list[float], baseline: float,
                 threshold: float, higher_is_better: bool) -> Ranking:
    """Build a Ranking from candidates and scores in table order (a stable sort keeps ties in table order)."""
    order = sorted(range(len(candidates)), key=scores.__getitem__, reverse=higher_is_better)  # stable
    entries = tuple(Scored(candidates[i], float(scores[i])) for i in order)
    return Ranking(scenario, mode, entries, float(baseline), float(threshold), higher_is_better)
