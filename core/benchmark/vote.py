"""Self-consistency: a technique's decision by majority over N independent samples (benchmark epochs 1..N, or N
runs on the Run page), and the spread of decisions over samples.

The vote: each sample whose answer was graded ``decided`` votes for its decision; undecided samples (ambiguous,
no decision, failed runs) do not vote. The decision with the most votes wins; a tie goes to the tied decision
voted for first (lowest epoch), a rule that never looks at the ground truth. No vote at all: no decision.

A voted result is stored as one result of technique ``{technique}+vote{N}`` (``voted_name``), linking its
samples' runs (``samples``), with the sum of their cost (calls, tokens, time, USD).
"""
from __future__ import annotations

from collections import Counter

from core.model.outcome import RunOutcome
from core.model.technique import voted_name
from core.analysis.grading import placement_text

#: What a voted result without a decision clears of the sample it is described by.
_GRADE = ("decision", "rank", "candidates", "regret", "tied", "relative_regret")
#: The cost fields a voted result sums over its samples.
_SUMMED = ("llm_calls", "cached_calls", "prompt_tokens", "completion_tokens", "llm_latency_s", "cached_latency_s",
           "llm_attempts", "wall_s", "overhead_s")
def votes_for(sample: dict):
    """The decision a sample votes for, None when it does not vote (not graded ``decided``, or failed)."""
    if sample.get("status") == "failed" or sample.get("decision") is None:
        return None
    if sample.get("grade_status") not in (None, "decided"):
        return None
    return sample["decision"]


def majority(decisions: list) -> tuple[object | None, Counter]:
    """The winning decision of votes in sample order (None entries do not vote) and the count of each; a tie goes to
    the decision voted for first."""
    counts = Counter(d for d in decisions if d is not None)
    if not counts:
        return None, counts
    top = max(counts.values())
    return next(d for d in decisions if d is not None and counts[d] == top), counts


def vote(samples: list[dict]) -> dict:
    """The voted result of one item's samples (stored results, in epoch order): the winner's grade, the samples'
    summed cost, and the links to them (``samples``: run ids; ``sample_decisions``; ``votes``: decision -> count)."""
    samples = sorted(samples, key=lambda r: r.get("epoch", 1))
    first = samples[0]
    decisions = [votes_for(s) for s in samples]
    winner, counts = majority(decisions)
    chosen = next((s for s, d in zip(samples, decisions) if d is not None and d == winner), None)
    voters = sum(counts.values())
    result = dict(chosen or first)  # its grade, trace facts and evidence: the first sample that voted for the winner
    if chosen is None:
        result.update(dict.fromkeys(_GRADE), correct=False, optimal=False)
    result["finished"] = max(s.get("finished") or 0 for s in samples)
    result.update({k: sum(s.get(k) or 0 for s in samples) for k in _SUMMED})
    costs = [s.get("cost_usd") for s in samples]
    result.update(
        technique=voted_name(first["technique"], len(samples)), vote_of=first["technique"], vote_n=len(samples),
        run_id=None, status="finished", epoch=1,
        samples=[s.get("run_id") for s in samples], sample_decisions=[s.get("decision") for s in samples],
        votes={str(d): c for d, c in counts.most_common()}, voters=voters,
        grade_status="decided" if chosen else "none",
        grade_reason=(f"majority of {voters} deciding samples of {len(samples)}: "
                      + ", ".join(f"{d} {c}" for d, c in counts.most_common()) if chosen
                      else f"none of the {len(samples)} samples decided"),
        final_answer=result.get("final_answer") if chosen else None,
        tokens_estimated=any(s.get("tokens_estimated") for s in samples),
        cost_usd=None if any(c is None for c in costs) else sum(costs))
    return result


def outcome_spread(outcomes: list[RunOutcome]) -> list[dict]:
    """The spread of the decisions of ended runs (their stored outcomes): each decision with the samples that
    picked it, its share, the simulator's rank (``tied 3rd–79th of 79``) and whether it is the label; undecided
    runs as decision None. The first decided row is the vote's pick (``majority``: a tie to the first picked)."""
    decisions = [votes_for({"decision": o.decision, "grade_status": o.grade_status}) for o in outcomes]
    first = {}
    for decision, outcome in zip(decisions, outcomes):
        first.setdefault(decision, outcome)
    rows = spread(decisions, lambda d: placement_text(first[d].placement))
    for row in rows:
        row["correct"] = first[row["decision"]].correct if row["decision"] is not None else None
    return rows


def spread(decisions: list, place) -> list[dict]:
    """How many samples picked each decision, most first (ties in order of first pick), each with ``place``'s
    answer (e.g. the simulator's rank text, None for no decision); undecided samples as decision None."""
    counts = Counter(decisions)
    order = sorted(counts, key=lambda d: (-counts[d], decisions.index(d)))
    return [{"decision": d, "samples": counts[d], "share %": round(100 * counts[d] / len(decisions), 1),
             "rank": place(d) if d is not None else None} for d in order]
