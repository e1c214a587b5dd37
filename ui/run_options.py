"""The choices a run starts from, shared by the Run and Compare pages: technique, database (unavailable ones
greyed with the reason), model (this session's, the environment's, or a recorded replay), review mode and a learned
plan to start from."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from core.backends import availability
import core.jobs.runs as jobs
from core.model.run_settings import HITL_MODES, RunSettings
from core.model.technique import TECHNIQUES
from core.store.plans import PlanStore
from core.backends.registry import BACKENDS, language
from core.llm.replays import Replay, model_label, replays
from core.model.question import Question
from core.config import settings as config
from core.analysis.summary import HITL_LABELS, technique_label
from core.auth.gate import Refused
from ui import access
from ui.common import dqa_root, kept, session_db, session_llm

REPLAYS = "replays"  # the model choice "each technique's recorded replay"
NO_MODEL = ("No LLM configured: enter a model on **Settings** (or set OPENAI_MODEL with OPENAI_API_KEY, or "
            "OPENAI_BASE_URL for a local server)")


def choose_database(key: str) -> tuple[str, str | None]:
    """A database backend, and why it cannot be used here (None when it can). Servers are checked in the background
    (core.backends.availability): one still being checked is shown as such, never waited for."""
    checked = {name: availability.status(name, session_db()) for name in BACKENDS}
    reasons = {name: reason for name, (_, reason) in checked.items()}

    def caption(n: str) -> str:
        known, reason = checked[n]
        return language(n).upper() + (f" · unavailable: {reason}" if reason else "" if known else " · checking...")

    name = st.radio("Database", list(BACKENDS), key=kept(key), format_func=lambda n: f":gray[{n}]" if reasons[n] else n,
                    captions=[caption(n) for n in BACKENDS])
    return name, reasons[name]


def configured_model() -> str | None:
    """The model this session runs with, when one is configured."""
    return session_llm().model


def choose_hitl(technique: str, key: str) -> str:
    """The analyst's review mode (only the planning techniques pause)."""
    plans = TECHNIQUES[technique].plans
    mode = st.radio("Analyst review", HITL_MODES, key=kept(key), format_func=HITL_LABELS.get, disabled=not plans,
                    help=None if plans else f"{technique_label(technique)} writes no plan, so it never pauses.")
    return mode if plans else "auto"


def choose_query_review(key: str) -> bool:
    """Whether the analyst approves each query before it runs (with any plan review)."""
    return st.checkbox("Approve every query", key=kept(key),
                       help="Before each query touches the database you see it with the step it serves, and "
                            "approve, edit or reject it (the agent then gets your note).")


def choose_plan_version(scenario: str, technique: str, key: str) -> int | None:
    """For the techniques AutoPlan trains with, a learned plan of the scenario to start from (None: the paper's
    prompt alone). Shown only when the scenario has learned plans."""
    versions = PlanStore(config.DATA_HOME / "plans").versions(scenario) if TECHNIQUES[technique].trains_plans else []
    if not versions:
        return None
    return st.selectbox("Start from a learned plan", [None, *reversed(versions)], key=kept(key),
                        format_func=lambda v: "none (the paper's prompt)" if v is None else f"v{v} (AutoPlan)",
                        help="A plan learned by AutoPlan (see Learned plans); runs on its training questions are "
                             "refused.")


PROMPT_LABELS = {"improved": "Improved (the project's)", "paper": "Paper (as the paper and its code sent)"}
PLANNER_LABELS = {"examples": "With example plans", "zero-shot": "Zero-shot"}


def choose_setting(technique: str, key: str) -> tuple[str, str]:
    """The faithfulness switch of a run (docs/paper-deviations.md): the prompt setting of the loop techniques, or
    REAPER's planner prompt; returns (prompts, reaper_planner). A technique with one prompt setting shows it."""
    tech = TECHNIQUES[technique]
    if len(tech.prompt_settings) == 1:
        st.caption(f"Prompts: {PROMPT_LABELS.get(tech.prompt_settings[0], tech.prompt_settings[0])} "
                   f"({tech.label} has no other setting)")
        return tech.prompt_settings[0], "examples"
    if tech.planner:
        planner = st.radio("REAPER planner", list(PLANNER_LABELS), format_func=PLANNER_LABELS.get, key=kept(f"{key}_planner"),
                           horizontal=True, help="The paper's planner is a fine-tuned model; example retrieval "
                                                 "plans for the scenario are as close as a prompt gets.")
        prompts = st.radio("Prompts", list(PROMPT_LABELS), format_func=PROMPT_LABELS.get,
                           key=kept(f"{key}_reaper_prompts"), horizontal=True,
                           help="Paper: the planner prompt in the structure of REAPER's (role, instruction, the tool "
                                "with signature and example usage, examples as '# Input: ... # Answer:'), one "
                                "planning call, no re-plan.")
        return prompts, planner
    prompts = st.radio("Prompts", list(PROMPT_LABELS), format_func=PROMPT_LABELS.get, key=kept(f"{key}_prompts"),
                       horizontal=True, help="Paper: what the authors' code sent (their prompts, schema texts and "
                                             "parser), the ReAct scratchpad in one message, no correction, no second "
                                             "request for an answer, no server probe, the original's 15-call stop.")
    return prompts, "examples"


def question_replays(question: Question, db: str, technique: str | None = None) -> list[Replay]:
    """The recorded replays of the question for the database's language (and a technique)."""
    return replays(question.source, question.scenario, question.number, language(db), technique)


def choose_model(question: Question, technique: str, db: str, key: str) -> str | None:
    """The model of a run: the configured one or a replay of this question; None (with the reason shown) if
    there is neither."""
    labels = {r.spec: f"Replay · {r.path.name}" for r in question_replays(question, db, technique)}
    options = [m for m in [configured_model()] if m] + list(labels)
    if not options:
        st.warning(f"{NO_MODEL}; no replay of {technique_label(technique)} is recorded for this question on a "
                   f"{language(db).upper()} database.", icon=":material/smart_toy:")
        return None
    return st.selectbox("LLM", options, key=kept(key), format_func=lambda o: labels.get(o) or model_label(o))


def choose_models(question: Question, techniques: list[str], db: str, key: str) -> dict[str, str]:
    """One model for several techniques: the configured one, or each technique's replay of this question (those
    without one are named in a warning). Technique -> model spec."""
    model = st.selectbox("LLM", [m for m in [configured_model()] if m] + [REPLAYS], key=kept(key),
                         format_func=lambda m: "Recorded replays (one per technique)" if m == REPLAYS else m)
    if model != REPLAYS:
        return {t: model for t in techniques}
    specs = {t: found[0].spec for t in techniques if (found := question_replays(question, db, t))}
    missing = [technique_label(t) for t in techniques if t not in specs]
    if missing:
        st.warning(f"No replay of {', '.join(missing)} is recorded for this question on a {language(db).upper()} "
                   "database." + ("" if configured_model() else f" {NO_MODEL}."), icon=":material/smart_toy:")
    return specs


def _with_endpoint(settings: RunSettings) -> RunSettings:
    llm = session_llm()
    return replace(settings, endpoint=llm.endpoint) if llm.endpoint and settings.llm == llm.model else settings


def start_run(settings: RunSettings) -> str | None:
    """Start a run in the background for this session's identity with its settings (see ``runtime_factory``),
    recording the model endpoint it uses; its id, or None with the gate's refusal shown."""
    try:
        return jobs.start(_with_endpoint(settings), runtime_factory(), who=access.current()).run_id
    except Refused as e:
        access.show_refusal(e)
        return None


def start_samples(settings: RunSettings, n: int) -> list[str] | None:
    """Start ``n`` samples of ``settings`` for this session's identity; their ids, or None with the refusal shown."""
    try:
        return jobs.samples(_with_endpoint(settings), n, runtime_factory(), who=access.current())
    except Refused as e:
        access.show_refusal(e)
        return None


def runtime_factory():
    """What a background run opens its runtime with: this session's DQA folder, model and database servers."""
    return jobs.Opener(dqa_root(), session_llm(), session_db())
