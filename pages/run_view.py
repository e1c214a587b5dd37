"""How a run reads on screen, shared by the Run, Compare and History pages: a header, the plan as a checklist with
the current step highlighted, a timeline of its events (thoughts, syntax-highlighted queries, observations as
tables), and its outcome. ``follow`` shows a live run's events as they arrive."""
from __future__ import annotations

import re
import time
from datetime import datetime

import pandas as pd
import streamlit as st

from core import jobs
from core.agents.prompts import TOOL_NAMES
from core.agents.techniques import TECHNIQUES
from core.jobs import RunJob
from core.replays import model_label
from core.runs import RunRecord
from core.summary import question_id, technique_label
from core.trace import Trace
from pages.run_options import HITL_LABELS

SMALL_TABLE = 12  # rows shown in full; a longer table scrolls in a box
POLL_S = 0.25  # how often a waiting page refreshes its status line (and notices the analyst's clicks)
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>#|~$:])")
_STATE_ICONS = {"done": ":material/check_circle:", "current": ":material/arrow_circle_right:",
                "todo": ":material/radio_button_unchecked:"}


def md(text: str) -> str:
    """Plain text made safe for st.markdown (no markup, no LaTeX), line breaks kept."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", "  \n")


def steps_markdown(steps: list[str]) -> str:
    return "\n".join(f"{i}. {md(step)}" for i, step in enumerate(steps, 1))


def open_run(record: RunRecord, page: str) -> None:
    """Make ``record`` the session's run (and its question the current one), then go to ``page``."""
    s = record.settings
    st.session_state["run_id"] = record.id
    st.session_state["question_ref"] = (s.get("source", "dqa"), s["scenario"], s["question"])
    st.switch_page(page)


def load(run_id: str) -> tuple[RunRecord | None, RunJob | None]:
    """The stored run (None if it never got stored) and its job in this process (None if there is none)."""
    try:
        record = jobs.open_store().get(run_id)
    except KeyError:
        record = None
    return record, jobs.job(run_id)


# ---------------------------------------------------------------------------------------------------- events

def _plan(e: dict, trace: Trace) -> None:
    if e["origin"] == "analyst":
        note = f" Note: {md(e['note'])}" if e["note"] else ""
        if e["status"] == "approved":
            st.success(f"The analyst approved the plan.{note}", icon=":material/how_to_reg:")
        elif e["status"] == "edited":
            st.info(f"The analyst edited the plan.{note}\n\n{steps_markdown(e['steps'])}", icon=":material/edit:")
        else:
            st.warning(f"The analyst rejected the plan.{note}", icon=":material/block:")
        return
    waiting = " — waiting for the analyst's review" if e["status"] == "proposed" else ""
    st.markdown(f"**Plan**{waiting}\n\n{steps_markdown(e['steps'])}")


def _replan(e: dict, trace: Trace) -> None:
    if not e["replan"]:
        st.caption(f"Re-plan: N — the plan is kept. {md(e['note'])}")
        return
    waiting = " — waiting for the analyst's review" if e["status"] == "proposed" else ""
    st.markdown(f"**Re-plan: Y**, a new plan{waiting}\n\n{steps_markdown(e['new_plan'])}")


def _thought(e: dict, trace: Trace) -> None:
    if e.get("current_step"):
        st.markdown(f":blue-background[**Current step:** {md(e['current_step'])}]")
    if e["text"]:
        st.markdown(f"**Thought:** {md(e['text'])}")


def _action(e: dict, trace: Trace) -> None:
    if e["language"] == "self":
        st.markdown(f"**Self-thinking**\n\n> {md(e['query'])}")
        return
    st.markdown(f"**{TOOL_NAMES[e['language']]}**")
    st.code(e["query"], language=e["language"], wrap_lines=True)


def _unique(columns: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    names = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        names.append(c if seen[c] == 1 else f"{c} ({seen[c]})")
    return names


def _observation(e: dict, trace: Trace) -> None:
    action = next((x for x in reversed(trace.events[:-1]) if x["kind"] == "action"), None)
    if e["error_kind"] == "format":
        st.warning(md(e["text"]), icon=":material/rule:")
    elif e["error"]:
        st.error(md(e["text"]), icon=":material/error:")
    elif e["columns"]:
        kept = f", first {len(e['rows'])} kept" if e["total_rows"] > len(e["rows"]) else ""
        table = pd.DataFrame(e["rows"], columns=_unique(e["columns"]))
        # A static table, scrolled when long: the interactive grid's code would load on the first one and hold
        # that step back by about half a second.
        with st.container(height="content" if len(table) <= SMALL_TABLE else 360):
            st.table(table, hide_index=True, border="horizontal")
        st.caption(f"{e['total_rows']} rows{kept} · {e['latency_s'] * 1000:.0f} ms")
        if action and e["executed"] and e["executed"].strip() != action["query"].strip():
            with st.expander("As the database ran it"):
                st.code(e["executed"], language=action["language"], wrap_lines=True)
    elif not (action and action["language"] == "self" and e["text"] == action["query"]):
        st.caption(md(e["text"]))


def _final(e: dict, trace: Trace) -> None:
    st.success(f"**Final answer:** {md(e['answer'])}", icon=":material/flag:")


def _error(e: dict, trace: Trace) -> None:
    if e["fatal"]:
        st.error(f"**{e['error_kind']}**: {md(e['message'])}", icon=":material/error:")
    else:
        st.warning(md(e["message"]), icon=":material/timer:")


_SHOW = {"plan": _plan, "replan": _replan, "thought": _thought, "action": _action, "observation": _observation,
         "final": _final, "error": _error}


def _unknown(e: dict, trace: Trace) -> None:
    st.json(e, expanded=False)


def show_event(event: dict, trace: Trace) -> None:
    """One event (already added to ``trace``), with a line for the LLM call it starts; an event of a kind this
    version does not know is shown as its data."""
    usage = event.get("llm")
    if usage:
        tokens = usage["prompt_tokens"] + usage["completion_tokens"]
        st.caption(f"LLM call {usage['call']} · {'≈' if usage['estimated'] else ''}{tokens:,} tokens · "
                   f"{usage['latency_s']:.2f} s · {datetime.fromtimestamp(event['at']):%H:%M:%S}")
    _SHOW.get(event["kind"], _unknown)(event, trace)


# ---------------------------------------------------------------------------------------------------- a run

def show_checklist(trace: Trace, technique: str) -> None:
    """The plan in force, each step ticked when done and the current one highlighted."""
    if not trace.plan:
        plans = technique not in TECHNIQUES or TECHNIQUES[technique].plans
        st.caption("No plan yet." if plans else f"{technique_label(technique)} makes no plan.")
        return
    lines = []
    for i, (step, state) in enumerate(trace.step_states(), 1):
        text = f"{i}\\. {md(step)}"
        text = {"current": f":blue-background[**{text}**]", "done": f":gray[{text}]"}.get(state, text)
        lines.append(f"{_STATE_ICONS[state]} {text}")
    st.markdown("  \n".join(lines))


class RunPanel:
    """One run laid out on the page: header, plan checklist, status line and timeline. ``add`` shows new events;
    ``compact`` stacks everything in one column (for side by side)."""

    def __init__(self, run_id: str, settings: dict, compact: bool = False):
        self.run_id, self.technique = run_id, settings["technique"]
        self.trace = Trace()
        label = technique_label(settings["technique"])
        details = (f"`{question_id(settings)}` · {settings['db']} · {md(model_label(settings['llm']))} · "
                   f"review: {HITL_LABELS.get(settings['hitl'], settings['hitl']).lower()} · run `{run_id}`")
        if compact:
            st.markdown(f"#### {label}")
            st.caption(details)
            self._plan, self._status = st.empty(), st.empty()
            self._timeline = st.container(height=460, key=f"timeline-{run_id}")
        else:
            st.markdown(f"#### {label}  \n{details}")
            left, right = st.columns([2, 3])
            with left:
                st.markdown("**Plan**")
                self._plan, self._status = st.empty(), st.empty()
            self._timeline = right.container(height=620, autoscroll=True, key=f"timeline-{run_id}")

    def add(self, events: list[dict]) -> None:
        """Show the next events and bring the checklist up to date."""
        for event in events:
            self.trace.add(event)
            with self._timeline.container(key=f"ev-{self.run_id}-{len(self.trace.events)}"):
                show_event(event, self.trace)
        if events:
            with self._plan.container():
                show_checklist(self.trace, self.technique)

    def status(self, text: str = "") -> None:
        """The status line (empty clears it)."""
        if text:
            self._status.caption(text)
        else:
            self._status.empty()

    def waiting(self) -> None:
        """Say what the run is waiting for, and since when."""
        last = self.trace.events[-1] if self.trace.events else None
        what = "the database" if last and last["kind"] == "action" and last["language"] != "self" else "the model"
        since = f" · {time.time() - last['at']:.0f} s" if last else ""
        self.status(f":material/hourglass_top: Running · waiting for {what}{since}")


def follow(panels: list[tuple[RunPanel, RunJob]]) -> None:
    """Show each job's events as they arrive, until every job is done."""
    pending = list(panels)
    while pending:
        for panel, job in list(pending):
            new = job.wait(len(panel.trace.events), timeout=POLL_S / len(pending))
            panel.add(new)
            if job.done and len(panel.trace.events) == len(job.events):
                panel.status()
                pending.remove((panel, job))
            elif not new:
                panel.waiting()


def show_run(run_id: str) -> RunRecord | None:
    """A run as it stands, followed live while a job drives it; the stored record after (None when the run
    never got stored, e.g. no model could be opened, which is then shown)."""
    record, job = load(run_id)
    if record is None and job is None:
        st.info(f"Run `{run_id}` is not in the run store.")
        return None
    settings = job.settings.to_dict() if job else record.settings
    panel = RunPanel(run_id, settings)
    if job:
        follow([(panel, job)])
        record = load(run_id)[0]
    else:
        panel.add(record.events)
    show_state(record, job)
    return record


def show_state(record: RunRecord | None, job: RunJob | None) -> None:
    """What stopped a job, or a run left unfinished by a restart."""
    if job and job.error:
        st.error(f"The run could not go on: {job.error}", icon=":material/error:")
    elif record and record.status == "running" and (job is None or job.done):
        st.warning("This run stopped while it ran (the app was restarted); its events so far are kept.",
                   icon=":material/warning:")


def show_outcome(record: RunRecord, compact: bool = False) -> None:
    """The outcome of an ended run: its decision, whether it is right, its rank, tokens, LLM calls and time."""
    o = record.outcome or {}
    if record.status == "failed":
        st.error(f"The run failed: {md(o.get('error') or 'see its last event')}", icon=":material/error:")
    decision = "none" if o.get("decision") is None else str(o["decision"])
    correct = {True: "correct", False: "wrong", None: "no label"}[o.get("correct")]
    placement = o.get("placement")
    rank = f"{placement['rank']} of {placement['of']}" if placement else "–"
    tokens = o.get("tokens") or {}
    total = f"{'≈' if tokens.get('estimated') else ''}{tokens.get('total', 0):,}"
    seconds = f"{o['wall_s']:.1f} s" if o.get("wall_s") is not None else "–"
    if compact:
        st.markdown(f"**Decision:** {md(decision)} ({correct}) · **rank** {rank}  \n"
                    f"{total} tokens · {o.get('llm_calls', 0)} LLM calls · {seconds}")
        return
    if o.get("final_answer"):
        st.markdown(f"**Final answer:** {md(o['final_answer'])}")
    cols = st.columns(6)
    cols[0].metric("Decision", decision)
    cols[1].metric("Correct", correct, help=f"Labelled best decision: {o.get('label')}")
    cols[2].metric("Rank", rank, help=(f"Regret {placement['regret']:.4g}, gain over doing nothing "
                                       f"{placement['gain']:.4g}") if placement else "Not a candidate decision")
    estimated = " (estimated from characters)" if tokens.get("estimated") else ""
    cols[3].metric("Tokens", total, help=f"prompt {tokens.get('prompt', 0):,}, completion "
                                         f"{tokens.get('completion', 0):,}{estimated}")
    cols[4].metric("LLM calls", o.get("llm_calls", 0))
    cols[5].metric("Time", seconds, help="Time the run worked, without the analyst's reviews")


def run_label(run_id: str, settings: dict, started: float) -> str:
    """A run in one line, for lists."""
    return (f"{technique_label(settings['technique'])} · {question_id(settings)} · {settings['db']} · "
            f"{model_label(settings['llm'])} · {datetime.fromtimestamp(started):%Y-%m-%d %H:%M} · {run_id}")
