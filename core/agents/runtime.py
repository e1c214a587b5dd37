"""Running agents: start a run, stream its events as they happen, pause at a plan for the analyst, resume with
a review, also from another process after a restart (the graph's state is checkpointed in SQLite).

    runtime = AgentRuntime()                      # checkpoints and run store under DATA_HOME
    result = runtime.start(settings, on_event=show)
    while result.status == "paused":              # result.pause.plan: the proposed steps
        result = runtime.resume(result.run_id, Review.approve(), on_event=show)
    result.outcome                                # decision, correct, tokens, ...

``iter_start`` / ``iter_resume`` are the same as generators of events.
"""
from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from core.agents import prompts, reaper
from core.agents.config import Pause, Review, RunSettings
from core.agents.events import ErrorEvent, Event
from core.agents.graph import AgentContext, build_graph, initial_state
from core.agents.techniques import technique
from core.agents.workspace import Workspace, open_catalog_workspace
from core.autoplan.store import PlanStore
from core.grading import grade, place
from core.llm import REPLAY_PREFIX, ChatLLM, LLMSettings, open_llm, replay_path
from core.runs import RunStore
from core.scenario import ranking
from core.settings import DATA_HOME


class RunNotPaused(Exception):
    """A review was given for a run that is not waiting for one."""


@dataclass
class RunResult:
    """Where a run stands after ``start`` or ``resume``: ``paused`` (see ``pause``), ``finished`` or ``failed``
    (see ``outcome``: decision, correct, final_answer, error, llm_calls, tokens, ...)."""

    run_id: str
    status: str
    pause: Pause | None = None
    outcome: dict | None = None


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class AgentRuntime:
    """Runs agents with a SQLite checkpointer, a run store and the learned plans (``plans``), all under ``home``
    (default DATA_HOME). Each technique runs on its engine's graph (the loop, or REAPER's).
    ``workspace`` opens a run's question and database (default: from the question catalog); ``llm_settings``
    holds the API key and the defaults (default: from the environment); ``llm_opener`` opens the model, with
    core.llm.open_llm's signature (default open_llm; the benchmark passes one adding a reply cache)."""

    def __init__(self, home: str | Path | None = None, *, store: RunStore | None = None,
                 workspace: Callable[[RunSettings], Workspace] = open_catalog_workspace,
                 llm_settings: LLMSettings | None = None, llm_opener: Callable[..., ChatLLM] | None = None):
        home = Path(home) if home else DATA_HOME
        home.mkdir(parents=True, exist_ok=True)
        self.store = store or RunStore(home / "runs.sqlite")
        self._conn = sqlite3.connect(home / "checkpoints.sqlite", check_same_thread=False)
        self._conn.execute("PRAGMA synchronous = NORMAL")  # in WAL mode (SqliteSaver's): no fsync per step
        saver = SqliteSaver(self._conn)
        self._graphs = {"loop": build_graph().compile(checkpointer=saver),
                        "reaper": reaper.build_graph().compile(checkpointer=saver)}
        self.plans = PlanStore(home / "plans")  # AutoPlan's learned plans, the runs' initial plans
        self._workspace = workspace
        self._llm_settings = llm_settings or LLMSettings()
        self._llm_opener = llm_opener

    def close(self) -> None:
        self._conn.close()

    def _resolve(self, settings: RunSettings) -> RunSettings:
        """The settings as they will be stored: model and base URL from the defaults when not given, a replay
        file as an absolute path."""
        settings = settings.validate()
        llm = settings.llm or self._llm_settings.model or ""
        if llm.startswith(REPLAY_PREFIX):
            return dataclasses.replace(settings, llm=f"{REPLAY_PREFIX}{replay_path(llm)}", base_url=None)
        return dataclasses.replace(settings, llm=llm, base_url=settings.base_url or self._llm_settings.base_url)

    def _open_llm(self, settings: RunSettings, skip: int) -> ChatLLM:
        llm_settings = dataclasses.replace(self._llm_settings, base_url=settings.base_url,
                                           temperature=settings.temperature)
        return (self._llm_opener or open_llm)(settings.llm, llm_settings, skip=skip)

    def _graph_of(self, technique_name: str):
        """The compiled graph that runs the technique (its ``engine``)."""
        return self._graphs[technique(technique_name).engine]

    def _config(self, run_id: str) -> dict:
        return {"configurable": {"thread_id": run_id}, "recursion_limit": 10_000}

    def iter_start(self, settings: RunSettings, run_id: str | None = None) -> Iterator[Event]:
        """Start a run and yield its events until it pauses or ends (``result(run_id)`` then tells which).
        Raises LLMError (no model configured), ValueError (bad settings, no learned plan, a plan's training
        question) or the workspace's errors before any event."""
        settings = self.plans.resolve(self._resolve(settings))
        run_id = run_id or new_run_id()
        llm = self._open_llm(settings, skip=0)
        ws = self._workspace(settings)
        try:
            tech, backend = technique(settings.technique), ws.backend
            hitl, note = settings.hitl if tech.plans else "auto", prompts.dialect_note(backend.name)
            if tech.engine == "reaper":
                state = reaper.initial_state(hitl, settings.limits, backend.language, backend.schema_text(),
                                             ws.question.text, note, settings.replan_on_failure)
            else:
                state = initial_state(tech, hitl, settings.limits, backend.language, backend.schema_text(),
                                      ws.question.text, note, settings.initial_plan)
            self.store.create(run_id, settings.to_dict())
            yield from self._drive(run_id, self._graph_of(tech.name), state, ws, llm)
        finally:
            ws.backend.close()

    def iter_resume(self, run_id: str, review: Review) -> Iterator[Event]:
        """Resume a paused run with the analyst's review and yield its events until it pauses again or ends.
        Works from a fresh runtime on the same home (after a restart). Raises RunNotPaused (KeyError for an
        unknown run; ValueError for a REAPER plan edited into steps that cannot run)."""
        review.validate()
        settings = RunSettings.from_dict(self.store.get(run_id, events=False).settings)
        graph = self._graph_of(settings.technique)
        snapshot = graph.get_state(self._config(run_id))
        if not snapshot.interrupts:
            raise RunNotPaused(f"run {run_id} is not waiting for a review")
        if technique(settings.technique).engine == "reaper":
            reaper.check_review(review, snapshot.values)
        llm = self._open_llm(settings, skip=snapshot.values["llm_calls"])
        ws = self._workspace(settings)
        try:
            yield from self._drive(run_id, graph, Command(resume=review.to_dict()), ws, llm)
        finally:
            ws.backend.close()

    def _drive(self, run_id: str, graph, graph_input, ws: Workspace, llm: ChatLLM) -> Iterator[Event]:
        self.store.update(run_id, "running")
        try:
            for event in graph.stream(graph_input, self._config(run_id), context=AgentContext(llm, ws.backend),
                                      stream_mode="custom", durability="sync"):
                self.store.add_event(run_id, event.to_dict())
                yield event
        except Exception as e:  # a defect or an unexpected failure: keep the trace, end the run
            event = ErrorEvent(message=f"internal error: {e!r}", error_kind="internal")
            self.store.add_event(run_id, event.to_dict())
            yield event
            values = graph.get_state(self._config(run_id)).values
            self.store.update(run_id, "failed", outcome=_outcome({**values, "error": str(e)}, ws))
            return
        snapshot = graph.get_state(self._config(run_id))
        if snapshot.interrupts:
            self.store.update(run_id, "paused", pause=Pause(run_id=run_id, **snapshot.interrupts[0].value).to_dict())
        else:
            self.store.update(run_id, snapshot.values["status"], outcome=_outcome(snapshot.values, ws))

    def start(self, settings: RunSettings, on_event: Callable[[Event], None] | None = None,
              run_id: str | None = None) -> RunResult:
        """Start a run; ``on_event`` gets each event as it happens. Returns when the run pauses or ends."""
        run_id = run_id or new_run_id()
        for event in self.iter_start(settings, run_id):
            if on_event:
                on_event(event)
        return self.result(run_id)

    def resume(self, run_id: str, review: Review, on_event: Callable[[Event], None] | None = None) -> RunResult:
        """Resume a paused run with ``Review.approve()``, ``Review.edit(steps)`` or ``Review.reject(note)``."""
        for event in self.iter_resume(run_id, review):
            if on_event:
                on_event(event)
        return self.result(run_id)

    def transcript(self, run_id: str) -> list[dict]:
        """The conversation as the LLM sees it: the system prompt, the question, each reply and observation."""
        graph = self._graph_of(self.store.get(run_id, events=False).settings["technique"])
        values = graph.get_state(self._config(run_id)).values
        return [{"role": "system", "content": values["prompt"]}] + values["messages"]

    def result(self, run_id: str) -> RunResult:
        """The stored state of a run (KeyError if unknown)."""
        record = self.store.get(run_id, events=False)
        pause = Pause(**record.pause) if record.pause else None
        return RunResult(run_id, record.status, pause, record.outcome)


def _outcome(values: dict, ws: Workspace) -> dict:
    """The graded outcome of an ended run, with the decision's place in the simulator's ranking when the
    workspace has the database."""
    question = ws.question
    g = grade(values.get("final_answer"), question.scenario, ws.candidates, question.answer)
    placement = None
    if ws.database is not None and g.decision is not None:
        try:
            placement = place(g.decision, ranking(question, ws.database))
        except ValueError:  # sims.ranking.InputError: a question the simulators cannot rank
            placement = None
    prompt, completion = values.get("prompt_tokens", 0), values.get("completion_tokens", 0)
    return {"decision": g.decision, "mentions": list(g.mentions), "correct": g.correct, "label": question.answer,
            "placement": dataclasses.asdict(placement) if placement else None,
            "final_answer": values.get("final_answer"), "error": values.get("error"),
            "llm_calls": values.get("llm_calls", 0), "actions": values.get("actions", 0),
            "plan": values.get("plan", []), "wall_s": round(values.get("wall_s", 0.0), 3),
            "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion,
                       "estimated": values.get("tokens_estimated", False)}}
