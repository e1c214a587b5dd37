"""Grading a final answer: the decision it names (a trade node, or a building id, among the question's
candidates), whether that is the labelled best decision, and where it falls in a simulator's ranking."""
from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")  # decimals whole, so "0.75" never yields 0 or 75
_ID_CUE = re.compile(r"(?:\bid\b|\bbuilding\b|#)\W{0,3}(?:\w+\W{1,3}){0,2}?(\d+)(?!\d|\.\d)", re.I)


def normalize_name(name: str) -> str:
    """A trade node name without case, spaces, underscores or hyphens: ``Baltic Sea`` -> ``balticsea``."""
    return "".join(_WORD.findall(str(name).lower()))


@dataclass(frozen=True)
class Grade:
    """The decision read from a final answer (None when it names no candidate), every candidate it names in
    order of appearance, and whether the decision is the label (None when the question has no label)."""

    decision: str | int | None
    mentions: tuple
    correct: bool | None


def _name_mentions(answer: str, candidates: list[str]) -> list[str]:
    """Candidates named in the answer, in order, a longer name winning where names overlap (``north_sea`` over
    a hypothetical ``sea``)."""
    words = _WORD.findall(answer.lower())
    keys = {normalize_name(c): c for c in candidates}
    longest = max((len(_WORD.findall(c.lower())) for c in candidates), default=0) + 1
    found, i = [], 0
    while i < len(words):
        for j in range(min(len(words), i + longest), i, -1):  # longest window first
            candidate = keys.get("".join(words[i:j]))
            if candidate is not None:
                found.append(candidate)
                i = j
                break
        else:
            i += 1
    return found


def _id_mentions(answer: str, candidates: list[int]) -> list[int]:
    """Building ids in the answer, in order: first those cued by ``id``, ``building`` or ``#``, then any other
    whole number that is a candidate (so "raise building 1485 by 5 levels" gives 1485 before 5)."""
    ids = set(candidates)
    cued = [int(m.group(1)) for m in _ID_CUE.finditer(answer)]
    bare = [int(n) for n in _NUMBER.findall(answer) if "." not in n]
    return [n for n in cued + bare if n in ids]


def extract_decision(answer: str, scenario: str, candidates: list) -> tuple[str | int | None, tuple]:
    """The decision a final answer names, and all candidates it names (duplicates removed, in order)."""
    found = _name_mentions(answer, candidates) if scenario == "locating" else _id_mentions(answer, candidates)
    mentions = tuple(dict.fromkeys(found))
    return (mentions[0] if mentions else None), mentions


def same_decision(decision, label) -> bool:
    """Whether a decision equals a label: names compared normalised, ids as integers."""
    if isinstance(label, int) or isinstance(decision, int):
        try:
            return int(decision) == int(label)
        except (TypeError, ValueError):
            return False
    return normalize_name(decision) == normalize_name(label)


def grade(answer: str | None, scenario: str, candidates: list, label) -> Grade:
    """Grade a final answer against the label (``correct`` None when there is no label)."""
    decision, mentions = extract_decision(answer or "", scenario, candidates)
    correct = None if label is None else (decision is not None and same_decision(decision, label))
    return Grade(decision, mentions, correct)


@dataclass(frozen=True)
class Placement:
    """Where a decision falls in a simulator's ranking: 1-based rank among ``of`` candidates, regret against the
    best (>= 0) and gain over doing nothing (> 0 is an improvement), in the ranking's score units."""

    rank: int
    of: int
    regret: float
    gain: float


def place(decision, ranking) -> Placement | None:
    """The decision's place in a ``sims`` Ranking, e.g. ``core.scenario.ranking(question, database)`` (None when
    there is no decision or it is not a candidate)."""
    rank = None if decision is None else ranking.rank_of(decision)
    if rank is None:
        return None
    return Placement(rank, len(ranking.entries), ranking.regret(decision), ranking.gain(decision))
