"""The workbench's verdict on a final answer, as an Inspect scorer: the decision it reads, whether it is the label,
its rank among all N candidates and its regret by the question's simulator, and the paper's lenient rule (the
label named anywhere in the answer) as a second score."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, mean, scorer
from inspect_ai.solver import TaskState

from core.analysis.grading import judge, paper_rule
from core.scenarios import catalog


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
    v = judge(question, database, answer)
    p = v.placement
    return Verdict(v.decision, False if not answer and v.label is not None else v.correct,
                   paper_rule(answer, question.answer) if answer else False,
                   p.rank if p else None, p.of if p else None, p.regret if p else None, v.optimal, v.status, v.reason)


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
