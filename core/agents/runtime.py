"""Running agents: start a run, stream its events as they happen, pause at a plan for the analyst, resume with
a review, also from another process after a restart (the graph's state is checkpointed in SQLite).

    runtime = AgentRuntime()                      # checkpoints and run store under DATA_HOME
    result = runtime.start(settings, on_event=show)
    while result.status == "paused":              # result.pause.plan: the proposed steps
        result = runtime.resume(result.run_id, Review.approve(), on_event=show)
    result.outcome                                # a RunOutcome: decision, correct, tokens, ...

``iter_start`` / ``iter_resume`` are the same as generators of events; ``stop``, ``iter_continue`` (from the last
checkpoint) and ``iter_branch`` (a new run from before a step of another) control runs.
"""
from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from langgraph.types import Command

from core.agents import guards, paper_prompts, prompts
from core.agents.engine import engine
from core.model.bounds import no_nul
from core.model.outcome import RunOutcome, RunStatus, Tokens
from core.model.run_settings import Pause, Review, RunSettings, default_reviewer
from core.agents.control import RunControl, RunInterrupted, RunStopped
from core.model.events import ActionEvent, BranchEvent, ErrorEvent, Event
from core.agents.nodes import AgentContext
from core.model.technique import Technique, technique
from core.agents.workspace import Workspace, open_catalog_workspace
from core.store.plans import PlanStore
from core.store import database
from core.store.checkpoints import open_checkpointer
from core.analysis.grading import judge
from core.analysis.trace import Trace
from core.auth import endpoints
from core.llm.client import REPLAY_PREFIX, ChatLLM, LLMSettings, bound_key, open_llm, replay_path
from core.store.runs import PauseTaken, RunStore, new_run_id
from core.config.secrets import scrub
from core.telemetry.runs import traced
from core.config import home as project_home
from core.llm.server_info import detect_window
from core.llm.prices import DEFAULT_PRICES, load_prices, price_of


#: Where a context window given with the run (--context-tokens, the Settings page's limits) came from.
SET_FOR_THE_RUN = "set for the run"


class RunNotPaused(PauseTaken):
    """A review was given for a run that is not waiting for one, or for a pause that is no longer current (the
    message says the run's state now)."""


@dataclass
class RunResult:
    """Where a run stands after ``start`` or ``resume``: ``paused`` (see ``pause``), or ended (see ``outcome``) as
    ``finished``, ``failed``, ``stuck`` (the loop guard ended it) or ``context_exceeded`` (a request could not fit
    the context window)."""

    run_id: str
    status: RunStatus
    pause: Pause | None = None
    outcome: RunOutcome | None = None


def native_panic(e: BaseException) -> bool:
    """Whether ``e`` is a native library's panic (pyo3's PanicException, from the ``tokenizers`` library for one):
    a BaseException that is the run's failure, not a request to stop the process."""
    return (not isinstance(e, (Exception, KeyboardInterrupt, SystemExit, GeneratorExit))
            and type(e).__name__ == "PanicException")


class AgentRuntime:
    """Runs agents on their engines' graphs (compiled once) with a checkpointer, a run store and the learned plans
    (``plans``) under ``home`` (default DATA_HOME). ``workspace`` opens a run's question and database;
    ``llm_settings``: the key and defaults; ``llm_opener``: opens the model (open_llm's signature)."""

    def __init__(self, home: str | Path | None = None, *, store: RunStore | None = None,
                 workspace: Callable[[RunSettings], Workspace] = open_catalog_workspace,
                 llm_settings: LLMSettings | None = None, llm_opener: Callable[..., ChatLLM] | None = None):
        home = project_home.check(home or project_home.data_home())  # HomeError when it cannot be used
        self.store = store or RunStore(home / "runs.sqlite")
        saver, self._close_checkpoints = open_checkpointer(home / "checkpoints.sqlite")
        self._saver = saver
        self._graphs: dict = {}  # compiled graphs by their builder (core.agents.engine.Engine.builder)
        self.plans = PlanStore(home / "plans")  # AutoPlan's learned plans, the runs' initial plans
        self._workspace = workspace
        self._llm_settings = llm_settings or LLMSettings()
        self._llm_opener = llm_opener
        self._home = home
        self._prices: dict | None = None
        self._controls: dict[str, RunControl] = {}  # the runs this runtime drives now
        self._stop_asked: set[str] = set()  # runs asked to stop before they were driven
        self._interrupting = ""  # why every run this runtime drives is interrupted (its process stops), once so
        self._controls_lock = threading.Lock()
        #: who follows the reply in flight as the model writes it (``core.jobs.runs.RunJob``; None: nobody)
        self.on_text: Callable[[str], None] | None = None
        self.on_attempt: Callable[[dict], None] | None = None  # and each LLM attempt as it starts

    def close(self) -> None:
        self._close_checkpoints()

    def stop(self, run_id: str, starting: bool = False, by: str = "") -> str:
        """Stop a run: at once when this runtime drives it, else through the run store (its owner stops it within
        a poll; a paused or interrupted run is closed). ``starting``: a run this runtime is about to start, maybe
        not stored yet, stops as soon as it is driven. ``by``: who stopped it. Returns its status after the request;
        KeyError for a run not stored and not ``starting``."""
        with self._controls_lock:
            control = self._controls.get(run_id)
            if control is None and starting:
                self._stop_asked.add(run_id)
        try:
            status = self.store.request_stop(run_id, by)
        except KeyError:
            if not starting:
                raise
            status = "running"
        if control:
            control.stop()
        return status

    def interrupt_all(self, reason: str) -> list[str]:
        """Interrupt every run this runtime drives, and any it would drive from now on (its process is stopping):
        each ends at once, kept ``interrupted`` with an event saying ``reason``, to be resumed from its last
        checkpoint. The ids of the runs it drove."""
        with self._controls_lock:
            self._interrupting = reason
            controls = list(self._controls.values())
        for control in controls:
            control.interrupt(reason)
        return [c.run_id for c in controls]

    def _resolve(self, settings: RunSettings, tech: Technique) -> RunSettings:
        """The settings as they will be stored: model and base URL from the defaults when not given, a replay
        file as an absolute path; for a model, the context window (what its server reports; not asked in the paper
        prompt setting) and the reply cap (the LLM settings') when not given."""
        settings = settings.validate(tech)
        if settings.endpoint:  # the server's named endpoint: its model and URL, recorded with its name
            endpoint = endpoints.get(settings.endpoint)
            settings = dataclasses.replace(settings, llm=endpoint.model, base_url=endpoint.base_url)
        llm_settings = self._llm_settings_of(settings)
        llm = settings.llm or llm_settings.model or ""
        if llm.startswith(REPLAY_PREFIX):
            return dataclasses.replace(settings, llm=f"{REPLAY_PREFIX}{replay_path(llm)}", base_url=None)
        base_url = settings.base_url or llm_settings.base_url
        limits = settings.limits
        # what the server reports, when it says; the paper setting sends no request but the model's (the window can
        # be given, or found on the Settings page)
        if limits.context_tokens is None and base_url and settings.prompts != paper_prompts.PAPER:
            reported = detect_window(base_url, llm, bound_key(llm_settings, base_url))
            if reported:
                limits = dataclasses.replace(limits, context_tokens=reported.tokens, context_source=reported.source)
        elif limits.context_tokens is not None and not limits.context_source:
            limits = dataclasses.replace(limits, context_source=SET_FOR_THE_RUN)
        if limits.reply_tokens is None:
            limits = dataclasses.replace(limits, reply_tokens=self._llm_settings.max_reply_tokens)
        return dataclasses.replace(settings, llm=llm, base_url=base_url, limits=limits)

    def _llm_settings_of(self, settings: RunSettings) -> LLMSettings:
        """The model settings a run's calls use: its endpoint's (that endpoint's own key, whoever starts or resumes
        it; UnknownEndpoint when the server no longer has it), else this runtime's, whose key goes only to the
        server it was given for (core.llm.client.bound_key)."""
        if settings.endpoint:
            return endpoints.get(settings.endpoint).llm_settings(self._llm_settings)
        return self._llm_settings

    def _open_llm(self, settings: RunSettings, skip: int) -> ChatLLM:
        """The run's model, sending the reply cap its context window leaves room for (``guards.reply_cap``); in the paper
        setting without the server's tokenizer (no request but the model's)."""
        llm_settings = self._llm_settings_of(settings)
        cap = guards.reply_cap(settings.limits) or llm_settings.max_reply_tokens
        llm_settings = dataclasses.replace(llm_settings, base_url=settings.base_url,
                                           temperature=settings.temperature, top_p=settings.top_p,
                                           seed=settings.seed,
                                           max_reply_tokens=cap, server_tokenizer=settings.prompts != paper_prompts.PAPER)
        return (self._llm_opener or open_llm)(settings.llm, llm_settings, skip=skip)

    def price(self, llm: str) -> list[float] | None:
        """USD per 1M prompt and completion tokens of a model, from the price table under ``home``/bench (None:
        not in the table)."""

        if self._prices is None:
            path = self._home / "bench" / "prices.json"
            self._prices = load_prices(path) if path.exists() else DEFAULT_PRICES  # written only by benchmarks
        return price_of(llm, self._prices)

    def _price_for(self, settings: RunSettings) -> list[float] | None:
        """The model's price; ValueError when a cost limit is set and the model has no price."""
        price = self.price(settings.llm)
        if price is None and settings.limits.max_cost_usd is not None:
            raise ValueError(f"a cost limit needs the model's price, and {settings.llm!r} is not in the price table "
                             f"({self._home / 'bench' / 'prices.json'}): add it there, or drop the cost limit")
        return price

    def _graph_of(self, tech: Technique, prompt_setting: str):
        """The compiled graph that runs the technique (its engine's) in a prompt setting, compiled on first use."""
        key = (engine(tech).builder, prompt_setting)
        if key not in self._graphs:
            self._graphs.setdefault(key, key[0](prompt_setting).compile(checkpointer=self._saver))
        return self._graphs[key]

    def _config(self, run_id: str) -> dict:
        return {"configurable": {"thread_id": run_id}, "recursion_limit": 10_000}

    def iter_start(self, settings: RunSettings, run_id: str | None = None) -> Iterator[Event]:
        """Start a run and yield its events until it pauses or ends (``result(run_id)`` then tells which).
        Raises LLMError (no model configured), ValueError (bad settings, no learned plan, a plan's training
        question) or the workspace's errors before any event."""
        tech = technique(settings.technique)
        settings = self.plans.resolve(self._resolve(settings, tech), tech)
        run_id = run_id or new_run_id()
        price = self._price_for(settings)
        llm = self._open_llm(settings, skip=0)
        ws = self._workspace(settings)
        try:
            hitl, note = settings.hitl if tech.plans else "auto", prompts.dialect_note(ws.backend.name)
            state = engine(tech).initial_state(tech, settings, ws, hitl, note)
            self.store.create(run_id, settings)
            yield from self._drive(run_id, tech, self._graph_of(tech, settings.prompts), state, ws, llm, price)
        finally:
            ws.backend.close()

    def iter_resume(self, run_id: str, review: Review, pause_id: str | None = None) -> Iterator[Event]:
        """Resume a paused run with the analyst's review of pause ``pause_id`` (None: the current one) and yield its
        events until it pauses again or ends; the review is claimed atomically in the run store, when called.
        Raises RunNotPaused (a pause no longer current, or claimed by another review), KeyError (unknown run),
        ValueError (a review that does not fit the pause)."""
        record = self.store.get(run_id, events=False)
        review.validate((record.pause or {}).get("kind") or ("query" if review.query else "plan"))
        if record.status != "paused" or not record.pause:
            raise RunNotPaused(self.store.describe_state(run_id, pause_id))
        settings = record.settings
        tech = technique(settings.technique)
        graph = self._graph_of(tech, settings.prompts)
        snapshot = graph.get_state(self._config(run_id))
        if not snapshot.interrupts:
            raise RunNotPaused(f"run {run_id} is not waiting for a review")
        pause = record.pause if record.pause.get("id") else self.store.set_pause(  # paused before pauses had ids
            run_id, record.pause, snapshot.interrupts[0].id)
        review.validate(pause["kind"])
        engine(tech).check_review(review, snapshot.values)
        pause_id = pause_id or pause["id"]
        review = dataclasses.replace(review, reviewer=review.reviewer or default_reviewer())
        try:
            at = self.store.claim_pause(run_id, pause_id, review.to_dict(), review.reviewer, pause["kind"])
        except PauseTaken as e:
            raise RunNotPaused(str(e)) from None
        review = dataclasses.replace(review, at=at)
        return self._opened(run_id, settings, tech, graph, Command(resume=review.to_dict()), snapshot.values["llm_calls"],
                            undo=lambda: self.store.release_pause(run_id, pause_id))

    def _opened(self, run_id: str, settings: RunSettings, tech: Technique, graph, graph_input, llm_calls: int,
                undo: Callable[[], None]) -> Iterator[Event]:
        """Open the run's model and workspace, then drive it; ``undo()`` gives back what was claimed when they
        cannot be opened."""
        try:
            price = self._price_for(settings)
            llm = self._open_llm(settings, skip=llm_calls)
            ws = self._workspace(settings)
        except BaseException:
            undo()
            raise
        try:
            yield from self._drive(run_id, tech, graph, graph_input, ws, llm, price)
        finally:
            ws.backend.close()

    def iter_continue(self, run_id: str, statuses: tuple[str, ...] = ("interrupted", "stopped")) -> Iterator[Event]:
        """Resume a run in one of ``statuses`` (its process died, it was stopped; a worker takes a ``queued`` one)
        from its last checkpoint, and yield its events until it pauses or ends; one waiting at a pause waits there
        again. Raises RunNotPaused when the run is in none of them (or another process took it first), KeyError for
        an unknown run, when called."""
        record = self.store.get(run_id, events=False)
        settings = record.settings
        tech = technique(settings.technique)
        graph = self._graph_of(tech, settings.prompts)
        try:
            was = self.store.claim_run(run_id, statuses)
        except PauseTaken as e:
            raise RunNotPaused(str(e)) from None
        snapshot = graph.get_state(self._config(run_id))
        pause = record.pause or {}
        if not snapshot.values:
            self.store.update(run_id, "failed", outcome=RunOutcome(error="the run was interrupted before its first "
                                                                         "step; start it again"))
            return iter(())
        if snapshot.interrupts:  # a run killed just after a review was claimed goes on with that review
            taken = (self.store.review_of(run_id, pause["id"])
                     if pause.get("interrupt") == snapshot.interrupts[0].id and pause.get("id") else None)
            if taken is None:  # no review was applied: the run waits at its pause again
                value = snapshot.interrupts[0].value
                self.store.set_pause(run_id, Pause(run_id=run_id, **value).to_dict(), snapshot.interrupts[0].id)
                return iter(())
            graph_input = Command(resume={**taken["review"], "at": taken["at"]})
        elif not snapshot.next and not snapshot.tasks:  # it ended in the checkpoint, but the store never heard
            # (a process killed after a step's writes were saved, before its checkpoint, leaves no next node
            # but that step as a task with its result: driven on below, the writes are applied, not run again)
            ws = self._workspace(settings)
            try:
                self.store.update(run_id, snapshot.values["status"],
                                  outcome=self._outcome(run_id, snapshot.values, ws, self.price(settings.llm)))
            finally:
                ws.backend.close()
            return iter(())
        else:
            graph_input = None
        return self._opened(run_id, settings, tech, graph, graph_input, snapshot.values["llm_calls"],
                            undo=lambda: self.store.update(run_id, was))

    def checkpointed(self, run_id: str) -> bool:
        """Whether the run has a checkpoint (it got past its start: resuming it goes on from there)."""
        settings = self.store.get(run_id, events=False).settings
        graph = self._graph_of(technique(settings.technique), settings.prompts)
        return bool(graph.get_state(self._config(run_id)).values)

    def branch_point(self, run_id: str, step: int, at_query: bool = False, *, settings: RunSettings | None = None,
                     tech: Technique | None = None):
        """The checkpoint (a LangGraph StateSnapshot) of ``run_id`` just before its step ``step`` (LLM call number,
        as in ``Event.step``), or with ``at_query`` just before that step's query runs (``settings``, ``tech``: the
        run's, when read already). ValueError if the run has no such point."""
        settings = settings or self.store.get(run_id, events=False).settings
        tech = tech or technique(settings.technique)
        nodes = engine(tech)
        for snapshot in self._graph_of(tech, settings.prompts).get_state_history(self._config(run_id)):
            values, nxt = snapshot.values, snapshot.next
            if not values or not nxt:
                continue
            if at_query and nxt[0] in nodes.query_nodes and values["llm_calls"] == step:
                return snapshot
            if not at_query and nxt[0] in nodes.llm_nodes and values["llm_calls"] == step - 1:
                return snapshot
        where = f"query at step {step}" if at_query else f"step {step}"
        raise ValueError(f"run {run_id} has no {where} to branch from")

    def iter_branch(self, run_id: str, step: int, *, plan: list[str] | None = None, query: str | None = None,
                    note: str = "", reviewer: str = "", new_id: str | None = None) -> Iterator[Event]:
        """Start a new run (``new_id``) from the state of ``run_id`` just before its step ``step``, with the plan
        replaced by ``plan`` and/or a ``note`` for the agent; or, with ``query``, just before that step's query,
        running ``query`` instead; driven until it pauses or ends. Raises ValueError (no such step, an edit the
        technique cannot take), KeyError for an unknown run, when called."""
        # the parent is left as it was; the branch keeps its events up to that point, then a branch event
        for what, text in (("note", note), ("query", query or ""), ("reviewer's name", reviewer),
                           *(("plan", step_text) for step_text in plan or ())):
            no_nul(text, what)
        parent = self.store.get(run_id)
        settings = parent.settings
        tech = technique(settings.technique)
        if not (plan or query or note.strip()):
            raise ValueError("a branch changes something: give a plan, a query or a note")
        if query is not None and (plan or note.strip()):
            raise ValueError("a branch at a query changes the query only (branch before the step for a plan or "
                             "a note)")
        if (plan or query) and not tech.branch_edits:
            raise ValueError(f"{tech.label} runs its written plan: a branch of it takes a note only")
        if plan is not None and not [s for s in plan if s.strip()]:
            raise ValueError("an edited plan needs at least one step")
        snapshot = self.branch_point(run_id, step, at_query=query is not None, settings=settings, tech=tech)
        values = dict(snapshot.values)
        if query is not None:
            if not query.strip():
                raise ValueError("an edited query cannot be empty")
            values["action"] = {**values["action"], "query": query.strip()}
            values["next"] = "run_action"  # the analyst wrote it: no second review
        else:
            added = []
            if plan:
                values["plan"] = [s.strip() for s in plan if s.strip()]
                added.append(prompts.plan_edited(values["plan"]))
            if note.strip():
                added.append(prompts.analyst_note(note))
            messages = list(values["messages"])
            messages[-1] = {**messages[-1], "content": "\n\n".join([messages[-1]["content"], *added])}
            values["messages"] = messages
        return self._branched(parent, tech, snapshot, values, step, plan=plan, query=query, note=note.strip(),
                              reviewer=reviewer or default_reviewer(), new_id=new_id or new_run_id())

    def _branched(self, parent, tech: Technique, snapshot, values: dict, step: int, *, plan, query, note: str,
                  reviewer: str, new_id: str) -> Iterator[Event]:
        run_id, settings = parent.id, parent.settings
        graph = self._graph_of(tech, settings.prompts)
        price = self._price_for(settings)
        llm = self._open_llm(settings, skip=values["llm_calls"])
        ws = self._workspace(settings)
        try:
            llm_nodes = engine(tech).llm_nodes
            graph.update_state(self._config(new_id), values, as_node=snapshot.next[0] if snapshot.next[0] in
                               llm_nodes else llm_nodes[0])
            self.store.create(new_id, settings, parent_id=run_id, branch_step=step)
            for event in _events_before(parent.events, step, at_query=query is not None):
                self.store.add_event(new_id, event)
                yield event
            mark = BranchEvent(parent=run_id, at_step=step, plan=values["plan"] if plan else None, query=query,
                               note=note, reviewer=reviewer)
            mark.step = step  # shown with the step it changes
            self.store.add_event(new_id, mark)
            yield mark
            yield from self._drive(new_id, tech, graph, None, ws, llm, price)
        finally:
            ws.backend.close()

    def _drive(self, run_id: str, tech: Technique, graph, graph_input, ws: Workspace, llm: ChatLLM,
               price: list[float] | None = None) -> Iterator[Event]:
        self.store.update(run_id, "running")
        control = RunControl(self.store, run_id)
        with self._controls_lock:
            self._controls[run_id] = control
            if run_id in self._stop_asked:
                self._stop_asked.discard(run_id)
                control.stop()
            if self._interrupting:
                control.interrupt(self._interrupting)
        try:
            yield from traced(run_id, self.store, ws.question.text,
                              self._stream(run_id, tech, graph, graph_input, ws, llm, control, price))
        finally:
            control.close()
            with self._controls_lock:
                self._controls.pop(run_id, None)

    def _stream(self, run_id: str, tech: Technique, graph, graph_input, ws: Workspace, llm: ChatLLM, control: RunControl,
                price: list[float] | None) -> Iterator[Event]:
        try:
            for event in graph.stream(graph_input, self._config(run_id),
                                      context=AgentContext(llm, ws.backend, price, control, self.on_text,
                                                           self.on_attempt, tech),
                                      stream_mode="custom", durability="sync"):
                self.store.add_event(run_id, event)
                yield event
        except RunInterrupted as e:  # this process is stopping: kept interrupted, resumed from its last checkpoint
            event = ErrorEvent(message=str(e), error_kind="interrupted")
            event.step = graph.get_state(self._config(run_id)).values.get("llm_calls", 0)
            self.store.add_event(run_id, event)
            yield event
            self.store.interrupt(run_id)
            return
        except RunStopped:  # the analyst's Stop: keep the trace and the last checkpoint (it can be resumed)
            event = ErrorEvent(message="stopped by the analyst", error_kind="stopped")
            event.step = graph.get_state(self._config(run_id)).values.get("llm_calls", 0)
            self.store.add_event(run_id, event)
            yield event
            values = graph.get_state(self._config(run_id)).values
            self.store.update(run_id, "stopped",
                              outcome=self._outcome(run_id, {**values, "error": "stopped by the analyst"}, ws, price))
            return
        except BaseException as e:  # a defect, an unexpected failure, a native library's panic: keep the trace, end
            if database.is_lost(e):  # the store away: not the run's failure; it goes on from its checkpoint
                raise
            if not (isinstance(e, Exception) or native_panic(e)):  # the run (Ctrl-C, exit, close: not the run's)
                raise
            event = ErrorEvent(message=scrub(f"internal error: {e!r}"), error_kind="internal")
            self.store.add_event(run_id, event)
            yield event
            values = graph.get_state(self._config(run_id)).values
            self.store.update(run_id, "failed", outcome=self._outcome(run_id, {**values, "error": scrub(str(e))}, ws, price))
            return
        snapshot = graph.get_state(self._config(run_id))
        if snapshot.interrupts:
            found = snapshot.interrupts[0]
            self.store.set_pause(run_id, Pause(run_id=run_id, **found.value).to_dict(), found.id)
        else:
            self.store.update(run_id, snapshot.values["status"], outcome=self._outcome(run_id, snapshot.values, ws, price))

    def _outcome(self, run_id: str, values: dict, ws: Workspace, price: list[float] | None) -> RunOutcome:
        """The graded outcome of an ended run (``values``: its last checkpoint's), its LLM calls, tokens and cost
        counted from its stored events by the one fold every view reads them with (core.analysis.trace.Trace): a
        call whose reply was stored but not checkpointed (its process stopped) is counted once, as the trace
        shows it. ``price``: the model's."""
        trace = Trace.of(self.store.events(run_id))
        return dataclasses.replace(
            _outcome(values, ws), llm_calls=trace.llm_calls,
            cost_usd=guards.call_cost(price, trace.prompt_tokens, trace.completion_tokens),
            tokens=Tokens(trace.prompt_tokens, trace.completion_tokens, trace.prompt_tokens + trace.completion_tokens,
                          trace.tokens_estimated, trace.failed_tokens))

    def start(self, settings: RunSettings, on_event: Callable[[Event], None] | None = None,
              run_id: str | None = None) -> RunResult:
        """Start a run; ``on_event`` gets each event as it happens. Returns when the run pauses or ends."""
        run_id = run_id or new_run_id()
        for event in self.iter_start(settings, run_id):
            if on_event:
                on_event(event)
        return self.result(run_id)

    def resume(self, run_id: str, review: Review, on_event: Callable[[Event], None] | None = None,
               pause_id: str | None = None) -> RunResult:
        """Resume a paused run with ``Review.approve()``, ``Review.edit(steps)`` or ``Review.reject(note)`` (at a
        query: ``Review.edit_query(query)``) of pause ``pause_id`` (None: the current one)."""
        for event in self.iter_resume(run_id, review, pause_id):
            if on_event:
                on_event(event)
        return self.result(run_id)

    def proceed(self, run_id: str, on_event: Callable[[Event], None] | None = None) -> RunResult:
        """``iter_continue`` to its end: resume an interrupted or stopped run from its last checkpoint."""
        for event in self.iter_continue(run_id):
            if on_event:
                on_event(event)
        return self.result(run_id)

    def branch(self, run_id: str, step: int, on_event: Callable[[Event], None] | None = None, **changes) -> RunResult:
        """``iter_branch`` to its end (``changes``: plan, query, note, reviewer, new_id); the branch's result."""
        new_id = changes.pop("new_id", None) or new_run_id()
        for event in self.iter_branch(run_id, step, new_id=new_id, **changes):
            if on_event:
                on_event(event)
        return self.result(new_id)

    def transcript(self, run_id: str) -> list[dict]:
        """The conversation as the LLM sees it: the system prompt, the question, each reply and observation."""
        settings = self.store.get(run_id, events=False).settings
        graph = self._graph_of(technique(settings.technique), settings.prompts)
        values = graph.get_state(self._config(run_id)).values
        return [{"role": "system", "content": values["prompt"]}] + values["messages"]

    def result(self, run_id: str) -> RunResult:
        """The stored state of a run (KeyError if unknown)."""
        record = self.store.get(run_id, events=False)
        pause = Pause(**record.pause) if record.pause and record.status == "paused" else None
        return RunResult(run_id, record.status, pause, record.outcome)


def _events_before(events: list[Event], step: int, at_query: bool) -> list[Event]:
    """A run's events before its step ``step`` (with ``at_query``: up to and including that step's action)."""
    kept = [e for e in events if e.step < step]
    if at_query:
        for e in events[len(kept):]:
            if e.step != step:
                break
            kept.append(e)
            if isinstance(e, ActionEvent):
                break
    return kept


def unconsulted(values: dict) -> bool:
    """Whether a run gave its final answer without a single query of the database ("answered without consulting
    the database")."""
    return bool(values.get("final_answer")) and not values.get("queries", values.get("actions", 0))


def _outcome(values: dict, ws: Workspace) -> RunOutcome:
    """The graded outcome of an ended run, with the decision's place in the simulator's ranking when the
    workspace has the database."""
    v = judge(ws.question, ws.database, values.get("final_answer"), candidates=ws.candidates)
    prompt, completion = values.get("prompt_tokens", 0), values.get("completion_tokens", 0)
    return RunOutcome(v.decision, list(v.mentions), v.correct, v.label, v.status, v.reason, v.best_group,
                      dataclasses.asdict(v.placement) if v.placement else None, values.get("final_answer"),
                      values.get("error"), values.get("llm_calls", 0), values.get("actions", 0),
                      list(values.get("plan", [])), round(values.get("wall_s", 0.0), 3),
                      bool(values.get("final_answer")) and v.decision is None, unconsulted(values),
                      values.get("cost_usd"), values.get("limit"), values.get("repeats", 0),
                      Tokens(prompt, completion, prompt + completion, values.get("tokens_estimated", False),
                             values.get("failed_tokens", 0)))
