"""One-line summaries of stored runs: for the History table (settings and outcome) and the Compare table (also
what the trace shows: plan, re-plans, queries)."""
from __future__ import annotations

from core.model.run_settings import RunSettings, setting_label
from core.model.technique import TECHNIQUES, parse_voted
from core.analysis.grading import placement_text
from core.llm.replays import model_label
from core.store.overrides import with_override
from core.store.runs import RunRecord, unanswered
from core.analysis.format import GAP, number, timestamp
from core.analysis.trace import Trace


def technique_label(name: str) -> str:
    """A technique's name as in the paper (as stored, for a technique this version does not know); a vote over its
    samples as ``PlanRAG (vote of 3)``."""
    voted = parse_voted(name)
    if voted:
        return f"{technique_label(voted[0])} (vote of {voted[1]})"
    return TECHNIQUES[name].label if name in TECHNIQUES else name


def question_id(settings: RunSettings) -> str:
    """The run's question as ``source/scenario/number``."""
    return f"{settings.source}/{settings.scenario}/{settings.question}"


#: How a run's review mode reads (``RunSettings.hitl``); "+ every query" when the analyst approves each query too.
HITL_LABELS = {"auto": "None (automatic)", "approve-replans": "Approve re-plans",
               "approve-every-plan": "Approve every plan"}


def review_label(settings: RunSettings) -> str:
    """The run's review mode as it reads: ``Approve every plan + every query``, ``Approve every query``."""
    hitl = settings.hitl
    if settings.review_queries:
        return "Approve every query" if hitl == "auto" else f"{HITL_LABELS.get(hitl, hitl)} + every query"
    return HITL_LABELS.get(hitl, hitl)


def window_note(settings: RunSettings) -> str:
    """`` · context window 4,096 tokens (llama.cpp GET /props (n_ctx))``: the window a run assumed and where it
    came from ("" when it assumed none: nothing was shortened)."""
    limits = settings.limits
    if not limits.context_tokens:
        return ""
    source = f" ({limits.context_source})" if limits.context_source else ""
    return f" · context window {limits.context_tokens:,} tokens{source}"


def answered(record: RunRecord) -> bool:
    """Whether the run has an answer to grade: not one that failed or was stopped before its final answer."""
    return not unanswered(record.status, record.outcome)


def outcome_row(record: RunRecord, override=None) -> dict:
    """The run's settings and outcome (no events needed); ``override`` (a core.model.grade.Override) replaces the
    decision and correctness, marked in the ``grade`` column. Text cells with nothing to show read ``–``; a run
    that ended without an answer (stopped, failed) is neither correct nor wrong (``correct`` None)."""
    s, o = record.settings, with_override(record.outcome, override)
    ended = record.outcome is not None
    grade = "overridden by " + override.by if override else o and o.grade_status
    return {"run": record.id, "started": timestamp(record.created),
            "question": question_id(s), "technique": technique_label(s.technique), "database": s.db,
            "model": model_label(s.llm), "setting": setting_label(s.technique, s.prompts, s.reaper_planner),
            "review": review_label(s), "status": record.status,
            "decision": GAP if o is None or o.decision is None else str(o.decision),
            "correct": o.correct if o and (override or answered(record)) else None,
            "grade": grade or GAP, "rank": (o and placement_text(o.placement)) or GAP,
            "LLM calls": o.llm_calls if ended else None, "tokens": o.tokens.total if ended else None,
            "time (s)": round(o.wall_s, 1) if ended else None}


#: The number columns of the History and Compare tables, with the decimals a number shows in them as text.
NUMBER_DECIMALS = {"LLM calls": 0, "tokens": 0, "time (s)": 1, "plan steps": 0, "re-plans": 0, "queries": 0}


def gaps_as_text(rows: list[dict]) -> list[dict]:
    """``rows`` to show: a number column with gaps (a run with no outcome yet) turns to text, gaps as ``–`` and
    numbers as they read, since a table shows a gap as "None" (one type per column: Arrow needs one)."""
    gapped = {c for c in NUMBER_DECIMALS if any(c in r and r[c] is None for r in rows)}
    return [{k: (GAP if v is None else number(v, decimals=NUMBER_DECIMALS[k])) if k in gapped else v
             for k, v in r.items()}
            for r in rows]


def compare_row(record: RunRecord) -> dict:
    """``outcome_row`` with the plan's length, the re-plans and the queries of its trace (``record`` with events)."""
    trace = Trace.of(record.events)
    return {**outcome_row(record), "plan steps": len(trace.plan), "re-plans": trace.replans,
            "queries": trace.queries}
