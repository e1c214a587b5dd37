"""The workbench's verdict on a final answer, as an Inspect scorer: the decision it reads, whether it is the label,
its rank among all N candidates and its regret by the question's simulator, and the paper's lenient rule (the
label named anywhere in the answer) as a second score."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, mean, scorer
from inspect_ai.solver import TaskState

from core.analysis.grading import grade, paper_rule, place
from core.scenarios import candidates, catalog, ranking


@dataclass
class Verdict:
    """What the workbench makes of one final answer (``rank`` of ``of`` and ``regret`` None when it names no single
    candidate)."""

    decision: str | int | None
    correct: bool | None
    lenient: bool | None
    rank: int | None
    of: int | None
    regret: float | None
    optimal: bool | None
    grade_status: str
    grade_reason: str


def verdict(answer: str | None, scenario: str, number: int, source: str = "dqa", root=None) -> Verdict:
    """The verdict on ``answer`` to question ``number`` of ``scenario`` (DQA under ``root``, default DQA_DIR)."""
    question = catalog.question(source, scenario, number, root)
    database = catalog.database(question, root)
    g = grade(answer, question.scenario, candidates(question, database), question.answer)
    placement = None
    if g.decision is not None:
        try:
            placement = place(g.decision, ranking(question, database))
        except ValueError:  # sims.ranking.InputError: a question the simulators cannot rank
            placement = None
    answered = bool(answer)
    return Verdict(g.decision, g.correct if answered else (None if question.answer is None else False),
                   paper_rule(answer, question.answer) if answered else False,
                   placement.rank if placement else None, placement.of if placement else None,
                   placement.regret if placement else None, placement.optimal if placement else None,
                   g.status, g.reason)


def _mark(value: bool | None) -> str:
    return CORRECT if value else INCORRECT


@scorer(metrics={"decision": [mean()], "lenient": [mean()], "optimal": [mean()]})
def decision_scorer(root: str | None = None):
    """Scores a sample's final answer (its output's completion) by the simulators: ``decision`` (the workbench's
    grade), ``lenient`` (the paper's rule) and ``optimal`` (regret 0 by the simulator); the verdict (decision, rank
    of N, regret) in the score's metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata
        found = verdict(state.output.completion, meta["scenario"], meta["question"], meta.get("source", "dqa"), root)
        return Score(value={"decision": _mark(found.correct), "lenient": _mark(found.lenient),
                            "optimal": _mark(found.optimal)},
                     answer=None if found.decision is None else str(found.decision),
                     explanation=found.grade_reason, metadata=asdict(found))

    return score
