"""Failure categories of the PlanRAG paper (Section 5.2, Figure 6), assigned to a wrong answer where its trace
shows the cause. The paper's categories: CAN (improper candidates considered), MIS (missed data analysis),
DEEP (retrieved data or equations used improperly), QUR (query generation error), OTH (other, e.g. token
limits). DEEP is a reasoning error with no mark in the trace, so it is never assigned here: a failure with
none of the other signs is ``unclassified`` (by the paper's reading, mostly DEEP; review such traces)."""
from __future__ import annotations

from core.benchmark.trace import TraceFacts

CATEGORIES = {
    "OTH": "other: the run failed or hit its step or token limit, or gave no final answer",
    "QUR": "query generation error: no query returned rows, or the last query failed",
    "CAN": "improper candidates: the pick is not a candidate, never appeared in the data, or the agent never "
           "queried where the candidates come from",
    "MIS": "missed data analysis: a value that decides the question (by the simulator) never appeared in the rows "
           "the run got back (heuristic where that is unknown: a critical column name never queried)",
    "DEEP": "retrieved data or equations used improperly (not detectable from the trace; see unclassified)",
}
UNCLASSIFIED = "unclassified"
#: The order in which signs decide the category: a failed run says nothing of its data, a query that never
#: worked explains the missing data, and the paper sees DEEP only where there is no CAN or MIS.
PRECEDENCE = ("OTH", "QUR", "CAN", "MIS")


def signs(facts: TraceFacts, status: str, final_answer: str | None, decision, evidence=None) -> dict[str, str]:
    """Every category the trace shows, with the evidence; ``evidence`` (a core.analysis.evidence.Coverage) makes MIS
    measured, else MIS is the keyword heuristic and says so."""
    found = {}
    if status != "finished" or facts.limit_reached or not final_answer:
        found["OTH"] = (f"run failed ({facts.error_kind})" if status == "failed" else
                        "stuck: the agent repeated itself" if status == "stuck" else
                        "the context window was exceeded" if status == "context_exceeded" else
                        "limit reached" if facts.limit_reached else "no final answer")
    if facts.retrievals and (not facts.retrievals_with_rows or facts.last_query_failed):
        found["QUR"] = ("the last query failed" if facts.last_query_failed else
                        f"none of {facts.retrievals} queries returned rows")
    if final_answer and decision is None:
        found["CAN"] = "the final answer names no candidate"
    elif decision is not None and not facts.pick_seen:
        found["CAN"] = "the pick never appeared in the data retrieved"
    elif not facts.looked_at_candidates:
        found["CAN"] = "never queried where the candidates come from"
    if evidence is not None:
        if evidence.total and not evidence.complete:
            found["MIS"] = (f"saw {evidence.n_seen} of {evidence.total} deciding values; missing "
                            + ", ".join(evidence.missing[:5]) + (" ..." if len(evidence.missing) > 5 else ""))
    elif facts.missed:
        found["MIS"] = "(heuristic) never queried " + ", ".join(facts.missed)
    return found


def classify(correct: bool | None, facts: TraceFacts, status: str, final_answer: str | None,
             decision, evidence=None) -> tuple[str | None, dict[str, str]]:
    """The category of a wrong answer (None for a right or unlabelled one) and all the signs found."""
    if correct is not False:
        return None, {}
    found = signs(facts, status, final_answer, decision, evidence)
    return next((c for c in PRECEDENCE if c in found), UNCLASSIFIED), found
