"""How a run reads on screen, shared by the Run, Compare and History pages: a header, the plan as a checklist with
the current step highlighted, a timeline of its events (thoughts, syntax-highlighted queries, observations as
tables), and its outcome. ``show_run`` follows a live run's events as they arrive (ui.live)."""
from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import pandas as pd
import streamlit as st

import core.jobs.runs as jobs
from core.agents.guards import call_cost
from core.agents.prompts import TOOL_NAMES
from core.llm.prices import model_price
from core.benchmark.vote import outcome_spread
from core.model.events import (ActionEvent, BranchEvent, ErrorEvent, Event, FinalEvent, LLMUsage, ObservationEvent,
                               PlanEvent, QueryReviewEvent, ReplanEvent, ThoughtEvent, UnknownEvent)
from core.model.outcome import RunOutcome
from core.model.run_settings import RunSettings
from core.model.technique import TECHNIQUES
from core.analysis.grading import placement_text
from core.jobs.runs import RunFollower, RunJob
from core.store.overrides import OverrideStore, with_override
from core.llm.replays import model_label
from core.store.runs import DRIVEN, PauseTaken, RunRecord
from core.analysis.summary import answered, question_id, review_label, technique_label, window_note
from core.analysis.trace import Trace, row_count, step_summary
from core.analysis.format import GAP, clock, duration, number, timestamp, usd
from core.auth.gate import Refused
from ui import access
from ui.run_options import runtime_factory
from core.analysis.evidence import of_run
from ui.common import answers_hidden, dqa_root, land_at_top, shown_columns
from ui.grading_view import override_form, override_note
from ui.live import closely, live, meanwhile
from ui.untrusted import md, md_code, md_table

#: Ended runs that did not end well: status -> what the outcome box leads with, and its icon.
ENDED_BADLY = {"failed": ("The run failed", ":material/error:"),
               "stuck": ("The run was stuck", ":material/repeat:"),
               "context_exceeded": ("The run outgrew the model's context window", ":material/data_array:")}
SMALL_TABLE = 12  # rows shown in full; a longer table scrolls in a box
_STATE_ICONS = {"done": ":material/check_circle:", "current": ":material/arrow_circle_right:",
                "todo": ":material/radio_button_unchecked:", "unreported": ":material/help:"}


def steps_markdown(steps: list[str]) -> str:
    return "\n".join(f"{i}. {md(step)}" for i, step in enumerate(steps, 1))


def open_run(record: RunRecord, page: str) -> None:
    """Make ``record`` the session's run (and its question the current one), then go to ``page``."""
    s = record.settings
    st.session_state["run_id"] = record.id
    st.session_state["question_ref"] = (s.source, s.scenario, s.question)
    land_at_top()  # at its top: a run's outcome ("Check the decision") lies at the end of a long page
    st.switch_page(page)


def decision_spread(records: list[RunRecord]) -> None:
    """The ended runs' decisions: each with the runs that picked it, its share and the simulator's rank; undecided
    runs as "no decision"."""
    spread = pd.DataFrame(outcome_spread([r.outcome or RunOutcome() for r in records]))
    spread["decision"] = [f"{GAP} no decision" if d is None else str(d) for d in spread["decision"]]
    spread["rank"] = spread["rank"].fillna(GAP)
    spread["correct"] = spread["correct"].map({True: "right", False: "wrong"}).fillna(GAP)
    st.dataframe(spread, hide_index=True, column_order=shown_columns(list(spread.columns)), column_config={"samples": "runs", "rank": "simulator's rank",
                                                         "correct": "by the label"})


def load(run_id: str) -> tuple[RunRecord | None, RunJob | None]:
    """The stored run (None if it never got stored) and its job in this process (None if there is none)."""
    try:
        record = jobs.open_store().get(run_id)
    except KeyError:
        record = None
    return record, jobs.job(run_id)


# ---------------------------------------------------------------------------------------------------- events

def _by(e: PlanEvent | QueryReviewEvent | BranchEvent) -> str:
    """Who reviewed, and when."""
    who = md(e.reviewer or "The analyst")
    return f"{who} ({clock(e.at)})"


def _plan(e: PlanEvent, trace: Trace) -> None:
    if e.origin == "analyst":
        note = f" Note: {md(e.note)}" if e.note else ""
        if e.status == "approved":
            st.success(f"{_by(e)} approved the plan.{note}", icon=":material/how_to_reg:")
        elif e.status == "edited":
            st.info(f"{_by(e)} edited the plan.{note}\n\n{steps_markdown(e.steps)}", icon=":material/edit:")
        else:
            st.warning(f"{_by(e)} rejected the plan.{note}", icon=":material/block:")
        return
    waiting = " — waiting for the analyst's review" if e.status == "proposed" else ""
    st.markdown(f"**Plan**{waiting}\n\n{steps_markdown(e.steps)}")


def _replan(e: ReplanEvent, trace: Trace) -> None:
    if not e.replan:
        st.caption(f"Re-plan: N — the plan is kept. {md(e.note)}")
        return
    waiting = " — waiting for the analyst's review" if e.status == "proposed" else ""
    st.markdown(f"**Re-plan: Y**, a new plan{waiting}\n\n{steps_markdown(e.new_plan)}")


def _thought(e: ThoughtEvent, trace: Trace) -> None:
    if e.current_step:
        st.markdown(f":blue-background[**Current step:** {md(e.current_step)}]")
    if e.text:
        st.markdown(f"**Thought:** {md(e.text)}")


def _action(e: ActionEvent, trace: Trace) -> None:
    if e.language == "self":
        st.markdown(f"**Self-thinking**\n\n> {md(e.query)}")
        return
    st.markdown(f"**{TOOL_NAMES[e.language]}**")
    st.code(e.query, language=e.language, wrap_lines=True)


def _unique(columns: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    names = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        names.append(c if seen[c] == 1 else f"{c} ({seen[c]})")
    return names


def _observation(e: ObservationEvent, trace: Trace) -> None:
    action = next((x for x in reversed(trace.events[:-1]) if isinstance(x, ActionEvent)), None)
    if e.error_kind in ("format", "repeat"):
        st.warning(md(e.text), icon=":material/rule:" if e.error_kind == "format" else ":material/repeat:")
    elif e.error_kind == "rejected":  # the analyst's note, as the agent was told it: no failure
        st.info(md(e.text), icon=":material/forum:")
    elif e.error:
        st.error(md(e.text), icon=":material/error:")
        _as_run(e, action)
    elif e.columns:
        kept = f", first {len(e.rows)} kept" if e.total_rows > len(e.rows) else ""
        table = md_table(pd.DataFrame(e.rows, columns=_unique(e.columns)))
        # A static table, scrolled when long: the interactive grid's code would load on the first one and hold
        # that step back by about half a second.
        numbers = [c for c in table.columns if pd.api.types.is_float_dtype(table[c])]
        with st.container(height="content" if len(table) <= SMALL_TABLE else 360):  # scrolls sideways when wide
            # Numbers as short as they read (24, not 24.0000): a wide result keeps its columns in view.
            st.table(table.style.format(partial(number, digits=6), subset=numbers, na_rep=GAP), hide_index=True,
                     border="horizontal")
        st.caption(f"{row_count(e.total_rows)}{kept} · {number(e.latency_s * 1000, decimals=0)} ms")
        _as_run(e, action)
    elif not (action and action.language == "self" and e.text == action.query):
        st.caption(md(e.text))


def _as_run(e: ObservationEvent, action: ActionEvent | None) -> None:
    """The query as the database ran it (after dialect translation), for the analyst only: the agent's own query
    is what its notes show it."""
    if action and e.executed and e.executed.strip() != action.query.strip():
        with st.expander("As the database ran it"):
            st.code(e.executed, language=action.language, wrap_lines=True)


def _final(e: FinalEvent, trace: Trace) -> None:
    st.success(f"**Final answer:** {md(e.answer)}", icon=":material/flag:")


def _query_review(e: QueryReviewEvent, trace: Trace) -> None:
    note = f" Note: {md(e.note)}" if e.note else ""
    if e.status == "approved":
        st.success(f"{_by(e)} approved the query.{note}", icon=":material/how_to_reg:")
    elif e.status == "edited":
        st.info(f"{_by(e)} edited the query{f' ({note.strip()})' if note else ''}. It ran as below.",
                icon=":material/edit:")
        st.code(e.query, language="sql" if "SELECT" in e.query.upper() else "cypher", wrap_lines=True)
    else:
        st.warning(f"{_by(e)} rejected the query; it did not run.{note}", icon=":material/block:")


def _branch(e: BranchEvent, trace: Trace) -> None:
    changes = [f"the plan:\n\n{steps_markdown(e.plan)}" if e.plan else "",
               "the query below" if e.query else "",
               f"a note: {md(e.note)}" if e.note else ""]
    st.info(f"**Branched** from run {md_code(e.parent)} at step {e.at_step} by {_by(e)}, with "
            + "; ".join(c for c in changes if c), icon=":material/call_split:")
    if e.query:  # as code: Markdown escapes would show inside an inline code span
        st.code(e.query, language="sql" if "SELECT" in e.query.upper() else "cypher", wrap_lines=True)


def _error(e: ErrorEvent, trace: Trace) -> None:
    if e.error_kind == "stopped":
        st.warning("**Stopped by the analyst** here: the trace and the last checkpoint are kept (resume or branch it "
                   "from History).", icon=":material/stop_circle:")
    elif e.fatal:
        st.error(f"**{e.error_kind}**: {md(e.message)}", icon=":material/error:")
    else:
        st.warning(md(e.message), icon=":material/timer:")


_SHOW = {"plan": _plan, "replan": _replan, "thought": _thought, "action": _action, "observation": _observation,
         "final": _final, "error": _error, "query_review": _query_review, "branch": _branch}


def _unknown(e: UnknownEvent, trace: Trace) -> None:
    st.json(e.to_dict(), expanded=False)


def llm_wait(usage: LLMUsage) -> str:
    """How long an LLM call took: the answering attempt, and the whole wait when retries made it longer; a
    cached reply says so (its time is the original call's)."""
    if usage.cached:
        return f"cached reply (took {number(usage.latency_s, decimals=2)} s when made)"
    attempts, wait = len(usage.attempts or []), usage.wait_s
    if attempts > 1 and wait is not None:
        return f"{number(usage.latency_s, decimals=2)} s · waited {number(wait, decimals=1)} s over {attempts} attempts"
    return f"{number(usage.latency_s, decimals=2)} s"


def show_event(event: Event, trace: Trace) -> None:
    """One event (already added to ``trace``), with a line for the LLM call it starts; an event of a kind this
    version does not know is shown as its data."""
    usage = event.llm
    if usage:
        tokens = usage.prompt_tokens + usage.completion_tokens
        basis = f" ({usage.counted_by})" if usage.estimated and usage.counted_by else ""
        st.caption(f"LLM call {usage.call} · {'≈' if usage.estimated else ''}{number(tokens)} tokens{basis} · "
                   f"{llm_wait(usage)} · {clock(event.at)}")
    _SHOW.get(event.kind, _unknown)(event, trace)


# ---------------------------------------------------------------------------------------------------- a run

def show_checklist(trace: Trace, technique: str) -> None:
    """The plan in force, each step ticked when done and the current one highlighted; a plan waiting for the
    analyst's review first."""
    if trace.proposed is not None:
        st.markdown(":orange-background[**Proposed plan** — waiting for your review]\n\n"
                    + steps_markdown(trace.proposed))
        if trace.plan:
            st.caption("The plan in force until then:")
    if not trace.plan:
        if trace.proposed is not None:
            return
        plans = technique not in TECHNIQUES or TECHNIQUES[technique].plans
        st.caption("No plan yet." if plans else f"{technique_label(technique)} makes no plan.")
        return
    lines = []
    for i, (step, state) in enumerate(trace.step_states(), 1):
        text = f"{i}\\. {md(step)}"
        text = {"current": f":blue-background[**{text}**]", "done": f":gray[{text}]",
                "unreported": f"{text} :gray[(its state was not reported: the agent never named it)]"}.get(state, text)
        lines.append(f"{_STATE_ICONS[state]} {text}")
    st.markdown("  \n".join(lines))


class RunPanel:
    """One run laid out on the page: header, plan checklist, status line and timeline. ``add`` shows new events;
    ``compact`` stacks everything in one column (for side by side)."""

    def __init__(self, run_id: str, settings: RunSettings, compact: bool = False):
        self.run_id, self.technique = run_id, settings.technique
        self.trace = Trace()
        self._more = None  # where the events that come while the panel is followed go (``follow``)
        self._price = model_price(settings.llm)
        label = technique_label(settings.technique)
        details = (f"{md_code(question_id(settings))} · {md(settings.db)} · {md(model_label(settings.llm))} · "
                   f"review: {review_label(settings).lower()} · run {md_code(run_id)}{md(window_note(settings))}")
        if compact:
            st.markdown(f"#### {label}")
            st.caption(details)
            self._plan, self._status, self._counter = st.empty(), st.empty(), st.empty()
            self._timeline = st.container(height=460, key=f"timeline-{run_id}")
        elif settings.technique in TECHNIQUES and not TECHNIQUES[settings.technique].plans:
            # No plan to show: the timeline takes the width (and says once that the technique makes no plan).
            st.markdown(f"#### {label}  \n{details}")
            self._plan, self._status, self._counter = st.empty(), st.empty(), st.empty()
            self._timeline = st.container(height=620, autoscroll=True, key=f"timeline-{run_id}")
        else:
            st.markdown(f"#### {label}  \n{details}")
            left, right = st.columns([1, 2])  # the timeline, with its result tables, the wider
            with left:
                st.markdown("**Plan**")
                self._plan, self._status, self._counter = st.empty(), st.empty(), st.empty()
            self._timeline = right.container(height=620, autoscroll=True, key=f"timeline-{run_id}")

    def add(self, events: list[Event]) -> None:
        """Show the next events and bring the checklist up to date."""
        for event in events:
            self.trace.add(event)
            with (self._more or self._timeline).container(key=f"ev-{self.run_id}-{len(self.trace.events)}"):
                show_event(event, self.trace)
        if events:
            with self._plan.container():
                show_checklist(self.trace, self.technique)
            self.count()

    def follow(self, newer: Callable[[], list[Event]]) -> None:
        """While the run goes on, until the panel is drawn again: the events ``newer()`` gives (those stored since),
        added as they come, below those shown and above the reply in flight (ui.live.meanwhile)."""
        self._more = self._timeline.container()
        meanwhile(lambda: self.add(newer()))

    def writing(self, reply: Callable[[], str]) -> None:
        """The model's reply in flight as far as it has come, ``reply()``, below the events so far: drawn again
        about every CLOSELY_S seconds until the panel is (ui.live.closely)."""
        with self._timeline:
            closely(partial(_show_reply, reply, {}))

    def count(self) -> None:
        """The live counter: LLM calls, tokens and estimated cost so far."""
        t = self.trace
        cost = call_cost(self._price, t.prompt_tokens, t.completion_tokens)
        tokens = f"{'≈' if t.tokens_estimated else ''}{number(t.prompt_tokens + t.completion_tokens)}"
        failed = f" ({number(t.failed_tokens)} on abandoned attempts)" if t.failed_tokens else ""
        self._counter.caption(f":material/toll: {t.llm_calls} LLM calls · {tokens} tokens{failed} · "
                              f"{cost_text(cost)}")

    def status(self, text: str = "") -> None:
        """The status line (empty clears it)."""
        if text:
            self._status.caption(text)
        else:
            self._status.empty()

    def waiting(self, started: float | None = None, driven: float | None = None, calling: dict | None = None,
                opening: bool = False) -> None:
        """Say how long the run has gone on (since ``started``, its first event) and what it is waiting for, since
        its last event or since it was resumed (``driven``), whichever is later: its runtime while ``opening``; for
        the model, which call and attempt and its time limit (``calling``, when known)."""
        last = self.trace.events[-1] if self.trace.events else None
        what = "the database" if isinstance(last, ActionEvent) and last.language != "self" else "the model"
        if opening:
            what = "the agent to open (the first run after the server starts loads its libraries: a few seconds)"
        elif what == "the model" and calling:
            what += f" (LLM call {calling['call']}, attempt {calling['attempt']} of {calling['of']}{_limits(calling)})"
        since = f": {duration(time.time() - max(last.at, driven or 0))}" if last else ""
        running = f" {duration(time.time() - started)}" if started else ""
        self.status(f":material/hourglass_top: Running{running} (since it started) · waiting for {what}{since}")


def _limits(calling: dict) -> str:
    """An attempt's time limits as they bind (core.llm.client.AttemptLimits): a stream's first-token and idle
    limits, and the whole reply's ceiling."""
    if not calling.get("ceiling_s"):
        return f", time limit {duration(calling['timeout_s'])}" if calling.get("timeout_s") else ""
    if calling.get("streams"):
        return (f", first words within {duration(calling['first_token_s'])}, then cut only after "
                f"{duration(calling['idle_s'])} of silence, whole reply within {duration(calling['ceiling_s'])}")
    return f", whole reply within {duration(calling['ceiling_s'])}"


#: The most characters of a reply in flight drawn (its end): each redraw sends at most this much to the browser,
#: however long the reply grows (the whole reply comes as the run's events once it ends).
LIVE_REPLY_CHARS = 2_000


def _show_reply(reply: Callable[[], str], shown: dict) -> None:
    """The reply so far (its last LIVE_REPLY_CHARS characters); once it ends (``reply()`` empty again) the text last
    shown, until the panel shows the reply as its events (``shown`` keeps it between draws)."""
    text = shown["text"] = reply() or shown.get("text", "")
    if len(text) > LIVE_REPLY_CHARS:
        text = f"… ({number(len(text))} characters so far) {text[-LIVE_REPLY_CHARS:]}"
    if text:
        st.caption(f":material/edit: {md(text)}")


def stop_run(run_id: str) -> None:
    """Stop a run, recorded under this session's identity, if the gate lets it."""
    try:
        jobs.stop(run_id, who=access.current())
    except Refused as e:
        access.show_refusal(e)


def stop_button(run_id: str, key: str) -> None:
    """Stop for a running run (this process's or another's): it ends within a second or two, kept as stopped."""
    st.button("Stop", icon=":material/stop_circle:", key=key, on_click=stop_run, args=(run_id,),
              **access.disabled("stop"), help="End the run now (a model call or query in flight is abandoned); its "
                                             "trace is kept and it can be resumed or branched later.")


def tracker(record: RunRecord | None, job: RunJob | None) -> RunJob | RunFollower | None:
    """What a page follows a run by: this process's job of it, or (a run driven by another process) its events in
    the run store; None for a run that does not go on."""
    if job is not None:
        return job
    return jobs.follower(record.id) if record is not None and record.status in DRIVEN else None


def events_so_far(run: RunJob | RunFollower) -> list[Event]:
    """The run's events: those this session read before, with those after them (its cursor)."""
    newer_events(run)
    return st.session_state[f"_live-events-{run.run_id}"]


def newer_events(run: RunJob | RunFollower) -> list[Event]:
    """The run's events after those this session read (its cursor), read from now on."""
    key = f"_live-events-{run.run_id}"
    seen = st.session_state.get(key, [])
    new = run.events(len(seen))
    st.session_state[key] = seen + new
    return new


def show_live(run_id: str, settings: RunSettings, run: RunJob | RunFollower, key: str, compact: bool = False) -> RunPanel:
    """A run followed as it goes (ui.live draws this again every few tenths of a second): Stop while it runs, its
    panel with every event so far, the reply the model is writing (``partial``), what it waits for."""
    status = run.status()  # as stored, read once
    going = status in DRIVEN
    if going and (note := run.note(status)):  # another process's run: where it goes on
        st.info(note, icon=":material/sync:")
    if going:
        stop_button(run_id, key=f"{key}-stop-{run_id}")
    panel = RunPanel(run_id, settings, compact=compact)
    events = events_so_far(run)
    panel.add(events)
    if going:  # the events that come before the next draw, added as they come
        panel.follow(partial(newer_events, run))
    if going and run.streams is not False:  # a model that streams, or no call yet to say: its reply drawn closely
        panel.writing(lambda: run.partial)
    if going and status != "queued":  # a queued run waits for a worker, said above
        panel.waiting(min(events[0].at, run.started) if events else run.started, run.started,
                      run.calling, run.opening)
    return panel


def show_run(run_id: str, key: str = "run") -> RunRecord | None:
    """A run as it stands, followed live while a job (or another process) drives it, with Stop; the stored record
    after (None when the run never got stored, e.g. no model could be opened, which is then shown)."""
    record, job = load(run_id)
    if record is None and job is None:
        st.info(f"Run {md_code(run_id)} is not in the run store.")
        return None
    settings = job.settings if job else record.settings
    run = tracker(record, job)
    if run is None:
        RunPanel(run_id, settings).add(record.events)
    else:
        live(partial(show_live, run_id, settings, run, key), going=lambda: not run.done)
    record = load(run_id)[0]
    show_state(record, job, key=key)
    return record


def show_state(record: RunRecord | None, job: RunJob | None, key: str = "state") -> None:
    """What stopped a job; a run interrupted (its process died: resume it from its last checkpoint, or close it)
    or stopped (resume it)."""
    if job and job.error:
        st.error(f"The run could not go on: {md(job.error)}", icon=":material/error:")
    if record is None or (job is not None and not job.done):
        return
    if record.status in ("interrupted", "stopped"):
        stops = [r for r in jobs.open_store().reviews(record.id) if r["action"] == "stop"]
        if record.status == "stopped" and stops:
            st.caption(f"Stopped by **{md(stops[-1]['reviewer'])}** at "
                       f"{timestamp(stops[-1]['at'])}.")
        if record.status == "interrupted":
            last = record.events[-1] if record.events else None
            why = (f"{md(last.message)}" if isinstance(last, ErrorEvent) and last.error_kind == "interrupted"
                   else "its process ended while it ran (killed, crashed or restarted)")
            st.warning(f"This run is interrupted: {why}. Its events so far are kept; resume it from its last "
                       "checkpoint, or close it.", icon=":material/warning:")
        resume, close = st.columns(2)
        resume.button("Resume from the last checkpoint", icon=":material/play_arrow:", key=f"{key}-go-{record.id}",
                      on_click=_proceed, args=(record,), **access.disabled("resume"))
        if record.status == "interrupted":
            close.button("Close the run", icon=":material/close:", key=f"{key}-close-{record.id}",
                         on_click=stop_run, args=(record.id,), **access.disabled("stop"))
        if error := st.session_state.get(f"proceed-error-{record.id}"):
            st.error(md(error), icon=":material/error:")


def _proceed(record: RunRecord) -> None:
    st.session_state.pop(f"proceed-error-{record.id}", None)
    try:
        jobs.proceed(record, runtime_factory(), who=access.current())
    except Refused as e:
        access.show_refusal(e)
    except (PauseTaken, ValueError, jobs.RunBusy) as e:
        st.session_state[f"proceed-error-{record.id}"] = str(e)


def branch_form(record: RunRecord, key: str) -> None:
    """Start a new run from the state just before a step of this one, with a changed plan, query or note; the new
    run opens in the Run view. The run itself is left as it was."""
    steps = sorted({e.step for e in record.events if e.step >= 1})
    if not steps or record.status == "running":
        return
    loop = record.settings.technique not in TECHNIQUES or TECHNIQUES[record.settings.technique].branch_edits
    with st.expander(":material/call_split: Branch from a step"):
        st.caption("A new run starts from the state just before the step you pick, with your change; this run stays "
                   "as it is. History shows branches under their run; Compare lines them up by step.")
        by_step = {s: [e for e in record.events if e.step == s] for s in steps}
        step = st.selectbox("Step", steps, key=f"{key}-branch-step-{record.id}",
                            format_func=lambda s: f"Step {s} · {step_summary(by_step[s])[:90]}")
        queries = [e.query for e in by_step[step] if isinstance(e, ActionEvent) and e.language != "self"]
        changes = {"note": "A note to the agent"}
        if loop:
            changes = {"plan": "The plan", **changes, **({"query": "The step's query"} if queries else {})}
        change = st.radio("Change", list(changes), format_func=changes.get, horizontal=True,
                          key=f"{key}-branch-change-{record.id}")
        fields: dict = {}
        if change == "plan":
            # the plan in force at the step: made before it, or at it (a first plan or a re-plan), else the last one
            before = (Trace.of([e for e in record.events if e.step < step or (e.step == step and e.kind in
                                                                                ("plan", "replan"))]).plan
                      or Trace.of(record.events).plan)
            text = st.text_area("Plan from there (one step per line)", "\n".join(before),
                                key=f"{key}-branch-plan-{record.id}-{step}")
            fields["plan"] = [line for line in text.splitlines() if line.strip()]
            fields["note"] = st.text_input("Note (optional)", key=f"{key}-branch-plan-note-{record.id}")
        elif change == "query":
            fields["query"] = st.text_area("Query to run instead", queries[0], key=f"{key}-branch-q-{record.id}-{step}")
        else:
            fields["note"] = st.text_input("Note to the agent", key=f"{key}-branch-note-{record.id}")
        named = access.ask_name(f"{key}-branch-name-{record.id}")
        if st.button("Start the branch", icon=":material/call_split:", type="primary",
                     key=f"{key}-branch-go-{record.id}", disabled=not (named and access.allowed("branch"))):
            try:
                job = jobs.branch(record, step, runtime_factory(), who=access.current(), **fields)
            except Refused as e:
                access.show_refusal(e)
                return
            except (KeyError, ValueError, LookupError) as e:
                st.error(md(e), icon=":material/error:")
            else:
                st.session_state["run_id"] = job.run_id
                st.switch_page("pages/run.py")


def show_outcome(record: RunRecord, compact: bool = False) -> None:
    """The outcome of an ended run: its decision, whether it is right, its rank, tokens, LLM calls and time."""
    o = record.outcome or RunOutcome()
    if record.status in ENDED_BADLY:
        lead, icon = ENDED_BADLY[record.status]
        st.error(f"{lead}: {md(o.error or 'see its last event')}", icon=icon)
    if o.no_decision:
        st.warning("The final answer names no decision.", icon=":material/help:")
    if o.unconsulted:
        st.warning("Answered without consulting the database: no query ran before the final answer.",
                   icon=":material/database_off:")
    decision = "none" if o.decision is None else str(o.decision)
    correct = {True: "correct", False: "wrong", None: "no label"}[o.correct]
    if not answered(record):  # ended without a final answer (any status): not a wrong answer, no answer at all
        correct = "not answered"
    if o.grade_status in ("ambiguous", "none") and o.decision is None:
        decision = "ambiguous" if o.grade_status == "ambiguous" else "none"
    override = OverrideStore().get(record.id)
    if override is not None:  # the analyst's grade, and the rank and regret of the decision they read
        o = with_override(o, override)
        decision = "none" if override.decision is None else str(override.decision)
        correct = {True: "correct", False: "wrong", None: "no label"}[override.correct]
    placement = o.placement
    rank = placement_text(placement) or "–"
    mark = " (overridden)" if override is not None else ""  # in the metrics' labels: their values stay whole
    if answers_hidden():  # for demos and blind review (the sidebar's switch)
        correct = rank = "hidden"
    tokens = o.tokens
    total = f"{'≈' if tokens.estimated else ''}{number(tokens.total)}"
    seconds = duration(o.wall_s)
    if compact:
        st.markdown(f"**Decision{mark}:** {md(decision)} ({correct}) · **rank** {rank}  \n"
                    f"{total} tokens · {o.llm_calls} LLM calls · {seconds}")
        return
    if o.answered and not any(isinstance(e, FinalEvent) for e in record.events):  # else the timeline has it
        st.markdown(f"**Final answer:** {md(o.final_answer)}")
    # weights: "not answered" and "wrong (overridden)" fit their column in a 1600 px window (issue 29)
    cols = st.columns([1.2, 1.7, 1.1, 1.1, 0.8, 0.9])
    cols[0].metric(f"Decision{mark}", decision)
    cols[1].metric(f"Correct{mark}", correct, help="Answers are hidden (sidebar)" if answers_hidden() else
                   f"Labelled best decision: {o.label or 'none'}")
    rank_help = (f"Regret {number(placement['regret'])}, gain over doing nothing {number(placement['gain'])}"
                 if placement else "Not a candidate decision")
    cols[2].metric(f"Rank{mark if placement else ''}", rank, help="Answers are hidden (sidebar)" if answers_hidden() else rank_help)
    estimated = " (estimated from characters)" if tokens.estimated else ""
    failed = (f", of them {number(tokens.failed_attempts)} spent on attempts abandoned at a time limit"
              if tokens.failed_attempts else "")
    cols[3].metric("Tokens", total, help=f"prompt {number(tokens.prompt)}, completion "
                                         f"{number(tokens.completion)}{estimated}{failed}; "
                                         f"{cost_text(o.cost_usd)}")
    cols[4].metric("LLM calls", o.llm_calls)
    cols[5].metric("Time", seconds, help="Time the run worked, without the analyst's reviews")
    show_verdict_details(record, o)


def reading(status: str | None, reason: str) -> str:
    """How the grader read the final answer, in words (``reason``: ``krakow: named``, ``... the others negated``)."""
    decision, _, how = reason.partition(": ")
    if status == "decided":
        return f"The answer decides {decision}" + ("" if how in ("", "named") else f" ({how})")
    if status == "ambiguous":
        return f"The answer names more than one candidate ({reason})"
    return "The answer names no candidate" + (f" ({reason})" if reason else "")


def show_verdict_details(record: RunRecord, o: RunOutcome) -> None:
    """How the grade was read (and any override), whether the pick ties, and the evidence coverage."""

    notes = []
    override = override_note(record.id)
    if o.grade_reason:
        notes.append(("Read automatically before the override: " if override else "")
                     + reading(o.grade_status, o.grade_reason) + ".")
    placement = o.placement or {}
    if placement and placement.get("tied", 1) == placement["of"] > 1:
        notes.append("Every candidate ties in the simulator: no decision is better than another here.")
    elif placement.get("tied", 1) > 1:
        pick = o.decision  # the override's, when there is one
        notes.append(f"{pick if pick is not None else 'The pick'} ties with {placement['tied'] - 1} other candidates"
                     + (" for the best score: a best decision (regret 0)." if placement.get("regret") == 0 else "."))
    if override:
        notes.append(override + ".")
    if notes:
        st.caption(" ".join(md(n) for n in notes))
    coverage = of_run(record.settings, record.events, dqa_root())
    if coverage is not None and coverage.total:
        text = coverage.text().capitalize()
        if coverage.complete:
            st.success(f"{text}.", icon=":material/fact_check:")
        else:
            st.warning(f"{text}; missing: {', '.join(md(m) for m in coverage.missing)}.", icon=":material/search_off:")
        st.caption("Deciding values: those whose change moves the simulator's score of the best decision or its "
                   "rival; seen: a row the run got back holds the value with its keys (docs/evidence.md).")
    override_form(record.id, record.settings, key=f"run-{record.id}", decision=o.decision)


def cost_text(cost: float | None) -> str:
    """An estimated cost in US dollars, or that it is unknown."""
    if cost is None:
        return "cost unknown (the model is not in the price table)"
    return "no cost (recorded replies, or cached)" if cost == 0 else f"≈ {usd(cost)}"


def run_label(run_id: str, settings: RunSettings, started: float) -> str:
    """A run in one line, for lists."""
    return (f"{technique_label(settings.technique)} · {question_id(settings)} · {settings.db} · "
            f"{model_label(settings.llm)} · {timestamp(started)} · {run_id}")

