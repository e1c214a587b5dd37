"""The workbench's techniques (PlanRAG, IterRAG, ...) as Inspect solvers: each sample's question runs through the
workbench's own agent (its prompts, parsing and guards) on the sample's database, every LLM call made with
Inspect's model API; the final answer is the sample's output and the run's steps its messages.

Limits are Inspect's: where the sample has a message, token or cost limit (``--message-limit``,
``--token-limit`` ...), the workbench's own call and token budgets are lifted to their bounds, and a call Inspect
refuses at its limit ends the sample as Inspect reports limits (the sample's ``limit``), scored on what it has."""
from __future__ import annotations

import tempfile

import anyio.to_thread
from anyio.lowlevel import current_token
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sample_limits

from core.agents.runtime import AgentRuntime
from core.agents.workspace import open_catalog_workspace
from core.evals.model import opener
from core.model.bounds import NUMBERS
from core.model.outcome import RunOutcome
from core.model.run_settings import Limits, RunSettings
from core.model.technique import DEFAULT


def inspect_limited() -> bool:
    """Whether the running sample has a message, token or cost limit of Inspect's."""
    limits = sample_limits()
    return any(limit.limit is not None for limit in (limits.message, limits.token, limits.cost))


def run_sample(technique: str, meta: dict, model, loop, root=None, limits: list | None = None,
               inspect_limits: bool = False) -> tuple[dict, list]:
    """Run ``technique`` on the sample's question (``meta``: scenario, question, db, source) with Inspect model
    ``model`` (called on event loop ``loop``) in a fresh project home: (outcome, events). ``inspect_limits``: the
    workbench's call and token budgets lifted to their bounds (Inspect's limits govern; those it stopped a call at
    are added to ``limits``)."""
    budgets = Limits(max_llm_calls=NUMBERS["max_llm_calls"][1], max_tokens=NUMBERS["max_tokens"][1]) \
        if inspect_limits else Limits()
    settings = RunSettings(meta["scenario"], meta["question"], meta.get("db", "sqlite"), technique,
                           f"inspect:{model}", source=meta.get("source", "dqa"), limits=budgets).validate()
    with tempfile.TemporaryDirectory(prefix="planrag-inspect-") as home:
        runtime = AgentRuntime(home, workspace=lambda s: open_catalog_workspace(s, root),
                               llm_opener=opener(model, loop, limits))
        try:
            result = runtime.start(settings)
            return result.outcome or RunOutcome(), runtime.store.get(result.run_id).events
        finally:
            runtime.close()


def messages_of(events) -> list:
    """A run's events as chat messages: the model's replies (as kept) and what came back from the database."""
    out = []
    for event in events:
        if event.llm is not None:
            out.append(ChatMessageAssistant(content=event.llm.reply or "(empty reply)"))
        if event.kind == "observation":
            out.append(ChatMessageUser(content=f"Observation: {event.text}"))
    return out


@solver
def workbench_agent(technique: str = DEFAULT, root: str | None = None) -> Solver:
    """The workbench's ``technique`` (any registered: core.model.technique) on each sample."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model, limits = get_model(), []
        outcome, events = await anyio.to_thread.run_sync(run_sample, technique, state.metadata, model,
                                                         current_token(), root, limits, inspect_limited())
        state.messages.extend(messages_of(events))
        answer = outcome.final_answer or ""
        state.output = ModelOutput.from_content(str(model), answer)
        state.metadata["run"] = {k: getattr(outcome, k) for k in ("decision", "correct", "llm_calls", "error")}
        if limits:
            raise limits[0]  # the sample ends at Inspect's limit, as Inspect reports it
        return state

    return solve
