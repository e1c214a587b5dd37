"""A run's state keeps the fields its checkpoints hold: LangGraph drops a node's update, and a checkpoint's value,
for a field its graph's state does not declare, so a field a part no longer brings would be lost on resume."""
from __future__ import annotations

from typing import get_type_hints

import pytest

from core.agents.engine import engine
from core.agents.state import LoopState, composed
from core.model.technique import TECHNIQUES

#: The fields of the shared loop's state as runs were checkpointed (core.agents.graph's AgentState before its parts).
LOOP_FIELDS = {
    "technique", "hitl", "limits", "language", "prompt", "answer_prompt", "messages", "plan", "reply", "proposal",
    "action", "llm_calls", "prompt_tokens", "completion_tokens", "tokens_estimated", "failed_tokens", "actions",
    "answer_only", "final_answer", "status", "error", "next", "wall_s", "cost_usd", "limit", "seen", "repeats",
    "empty_replies", "answer_from", "answer_tries", "shortened", "chars_per_token", "counted_by", "template_tokens",
    "counted", "prompts", "review_queries", "queries", "stuck", "told_unqueried"}
#: AutoPlan's plan-following part (core/techniques/autoplan/follow.py), which the techniques taking a plan add.
FOLLOWING = {"follows_plan", "iterations"}
REAPER_FIELDS = {
    "hitl", "limits", "language", "replan_on_failure", "replanned", "prompt", "answer_prompt", "messages", "steps",
    "plan", "cursor", "results", "evidence", "failed", "reply", "proposal", "action", "llm_calls", "prompt_tokens",
    "completion_tokens", "failed_tokens", "tokens_estimated", "actions", "final_answer", "status", "error", "next",
    "wall_s", "collected", "cost_usd", "limit", "seen", "repeats", "empty_replies", "answer_from", "answer_tries",
    "shortened", "chars_per_token", "counted_by", "template_tokens", "counted", "review_queries", "prompts",
    "question", "queries", "stuck"}


def test_the_loop_state_has_the_fields_of_its_checkpoints():
    assert set(get_type_hints(LoopState)) == LOOP_FIELDS


@pytest.mark.parametrize("name", [n for n, t in TECHNIQUES.items() if hasattr(engine(t), "parts")])
def test_a_loop_technique_keeps_its_parts_fields(name):
    tech = TECHNIQUES[name]
    fields = set(get_type_hints(composed(engine(tech).parts)))
    paper_with_plan = tech.takes_initial_plan and "paper" in tech.prompt_settings
    assert fields == LOOP_FIELDS | (FOLLOWING if paper_with_plan else set())
    graph = engine(tech).builder("improved")
    assert set(graph.channels) >= fields


def test_reaper_keeps_the_fields_of_its_checkpoints():
    from core.techniques.reaper.graph import ReaperState

    assert set(get_type_hints(ReaperState)) == REAPER_FIELDS


def test_techniques_with_the_same_parts_share_one_builder():
    builders = {n: engine(t).builder for n, t in TECHNIQUES.items() if hasattr(engine(t), "parts")}
    parts = {n: engine(TECHNIQUES[n]).parts for n in builders}
    for a in builders:
        for b in builders:
            assert (builders[a] is builders[b]) == (parts[a] == parts[b])


#: The fields every checkpoint of the loop holds, the oldest too; the others a state may lack (state.completed).
ALWAYS = {"technique", "hitl", "limits", "language", "prompt", "answer_prompt", "messages", "plan", "proposal",
          "action", "llm_calls", "prompt_tokens", "completion_tokens", "tokens_estimated", "actions", "answer_only",
          "final_answer", "status", "error", "next"}


def test_a_state_from_an_older_checkpoint_reads_with_every_field():
    from core.agents.state import completed

    old = {**dict.fromkeys(ALWAYS), "actions": 3}
    state = completed(old)
    assert set(state) == LOOP_FIELDS and old.keys() == ALWAYS  # the checkpoint's own dict is left as it was
    assert (state["queries"], state["prompts"], state["seen"], state["cost_usd"], state["repeats"]) == (
        3, "improved", {}, 0.0, 0)  # every action was a query then; the improved setting; nothing spent or seen
    assert completed(state) is state
    assert completed({**state, "seen": None})["seen"] == {}
    assert completed(old)["seen"] is not completed(old)["seen"]  # each state its own
