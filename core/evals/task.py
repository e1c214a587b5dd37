"""Decision QA as an Inspect task: ``inspect eval core/evals/task.py -T technique=planrag --model ...`` runs the
workbench's technique on each DQA question (DQA_DIR) and scores its final answer by the simulators;
``-T technique=react`` hands Inspect's own ReAct agent the database as a tool instead."""
from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.agent import react
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.solver import Solver, TaskState, chain, solver

from core.evals.scoring import decision_scorer
from core.evals.solvers import workbench_agent
from core.evals.tools import database_query, remember_sample, schema_of
from core.model.numbers import parse_numbers
from core.model.technique import DEFAULT
from core.scenarios import catalog


def samples(scenario: str = "all", questions: str | int | None = None, db: str = "sqlite", source: str = "dqa",
            root=None) -> list[Sample]:
    """One sample per question (``questions``: e.g. "1-10,15"; all when None) of ``scenario`` (or both DQA
    scenarios): its text as input, its label as target, where it lives as metadata."""
    out = []
    for name in (("locating", "building") if scenario == "all" else (scenario,)):
        known = catalog.questions(source, name, root)
        wanted = set(parse_numbers(str(questions))) if questions else None  # -T questions=1 comes as an int
        for q in known:
            if wanted is None or q.number in wanted:
                out.append(Sample(input=q.text, target=str(q.answer), id=f"{name}-{q.number}",
                                  metadata={"scenario": name, "question": q.number, "db": db, "source": source}))
    return out


@solver
def with_database(root: str | None = None) -> Solver:
    """Gives the sample's database to ``database_query`` and its schema to the agent."""

    async def solve(state: TaskState, generate) -> TaskState:
        remember_sample(state)
        state.user_prompt.text = (f"{state.user_prompt.text}\n\nThe database (query it with database_query):\n"
                                  f"{schema_of(state.metadata, root)}\nEnd with 'Final answer: ...'.")
        return state

    return solve


@task
def decision_qa(scenario: str = "all", questions: str | int | None = None, db: str = "sqlite", technique: str = DEFAULT,
                source: str = "dqa", root: str | None = None) -> Task:
    """DQA's decision questions, solved by the workbench's ``technique`` (or Inspect's ``react`` agent with the
    database tool), scored by the simulators."""
    if technique == "react":
        solver_ = chain(with_database(root), react(tools=[database_query(root)]))
    else:
        solver_ = workbench_agent(technique, root)
    return Task(dataset=MemoryDataset(samples(scenario, questions, db, source, root), name="decision_qa"),
                solver=solver_, scorer=decision_scorer(root))
