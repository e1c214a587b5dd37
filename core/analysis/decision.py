"""The decision check of a question: every candidate ranked by the simulator with its gain over no decision,
the pick of a stored run, and what one decision changes against no decision (to draw it on the network).

Pure functions of the scenario model and the simulators (the run pick reads the run store).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from core import scenarios
from core.analysis.grading import rank_text
from core.store.overrides import OverrideStore, with_override
from core.store.runs import RunStore
from core.model.question import Database, Question
from core.scenarios.base import Effect  # noqa: F401  (what_if's result, kept importable from here)
from core.scenarios.dqa.kinds import MODE_NOTES  # noqa: F401  (the DQA scenarios' modes)
from sims.ranking import Candidate, Ranking

TINY = 1e-12


def _type(question: Question):
    return scenarios.get(question.scenario)


def mode_notes(question: Question) -> dict[str, str]:
    """One line on each simulation mode of the question's scenario (docs/simulators.md has the DQA ones)."""
    return _type(question).mode_notes


def score_name(question: Question) -> str:
    """What a candidate's score is: ``profit of SWE at baltic_sea``, ``price of furniture``, a plugin's own."""
    return _type(question).score_name(question)


def candidate_names(question: Question, database: Database) -> dict[Candidate, str]:
    """A display name per candidate, in table order: the trade node, ``1485 furniture manufactories (level 3)``."""
    return _type(question).candidate_names(question, database)


def ranking_table(ranking: Ranking, names: dict[Candidate, str]) -> pd.DataFrame:
    """Every candidate, best first: rank (shared by a tie group), how many tie, the rank as read ("tied 3rd–9th of
    9"), decision, score, gain over no decision, regret and regret in %."""
    of = len(ranking.entries)
    return pd.DataFrame(
        [(rank, tied, rank_text(rank, of, tied), names.get(e.candidate, str(e.candidate)), e.score,
          ranking.gain(e.candidate), ranking.regret(e.candidate), ranking.relative_regret(e.candidate))
         for e, (rank, tied) in zip(ranking.entries, ranking.groups())],
        columns=["rank", "tied", "place", "decision", "score", "gain", "regret", "regret %"])


@dataclass(frozen=True)
class RunPick:
    """The decision of a stored run, or why there is none to mark."""

    run_id: str
    decision: Candidate | None
    note: str | None = None
    overridden_by: str | None = None  # the analyst whose grade override gave the decision


def run_pick(run_id: str, question: Question, store: RunStore | None = None) -> RunPick:
    """The decision the run ``run_id`` made on ``question`` (from its stored outcome)."""
    try:
        record = (store or RunStore()).get(run_id)
    except KeyError:
        return RunPick(run_id, None, f"run {run_id} is not in the run store")
    settings = record.settings
    ref = (settings.source, settings.scenario, settings.question)
    if ref != (question.source, question.scenario, question.number):
        return RunPick(run_id, None, f"run {run_id} answered {'/'.join(map(str, ref))}, not {question.id}")
    override = OverrideStore(Path((store or RunStore()).path).parent).get(run_id)
    outcome = with_override(record.outcome, override)
    decision = outcome.decision if outcome else None
    by = override.by if override else None
    if decision is None:
        why = ("named no candidate" if record.outcome else f"has no outcome yet (status {record.status})") + (
            f" (grade overridden by {by})" if by else "")
        return RunPick(run_id, None, f"run {run_id} {why}", by)
    return RunPick(run_id, decision, overridden_by=by)


def what_if(question: Question, database: Database, decision: Candidate, mode: str) -> Effect | None:
    """Simulate ``decision`` and no decision (one more merchant at a trade node; 5 levels more for a building; a
    plugin's what-if); None when the scenario cannot say what a decision changes."""
    return _type(question).what_if(question, database, decision, mode)


def run_record(run_id: str, store: RunStore | None = None):
    """A stored run with its events (None when it is not in the run store)."""
    try:
        return (store or RunStore()).get(run_id)
    except KeyError:
        return None
