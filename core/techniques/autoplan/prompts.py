"""AutoPlan's reflection and plan-update prompts (its Table 2: Summary-, Flaw-, Rev- and Upd-prompt), adapted to
decision questions answered from a database, with the run's outcome as its reward: the paper's success or failure
(``success``, the default), or the richer ``rich`` reward (the best decision, the rank and regret of the agent's).

The reflection is the paper's three calls (section 3.2.2, equations 6-8: summary; flaws; revision, after the flaws)
by default (``three-step``), or one call writing all three parts (``one-call``)."""
from __future__ import annotations

import re

from core.agents.parsing import render_plan
from core.analysis.grading import placement_text
from core.model.outcome import RunOutcome

SYSTEM = ("You review the work of a decision-making agent that answers questions by querying a database, following "
          "a plan written for every question of the same kind.")
SECTIONS = ("summary", "flaws", "revision")
#: The rewards: the paper's success/failure, or the label, rank and regret too.
REWARDS = ("success", "rich")
#: The reflections: the paper's three calls, or one call.
REFLECTIONS = ("three-step", "one-call")
#: Table 2's prompts, with "the game" read as the database and the outcome.
SUMMARY_PROMPT = "Summarize the interaction history in steps."
FLAW_PROMPT = ("Identify all flawed parts of the plan (not flawed actions). Remember that the database and the outcome "
               "are always correct; the plan may have flaws.")
REVISION_PROMPT = "Suggest revision to the current flawed part of the plan. Only the flawed part."
#: The paper setting's Flaw- and Upd-prompts: Table 2's, word for word (its "game" and "plan plan/action" kept).
PAPER_FLAW_PROMPT = ("Identify all flawed parts of the plan/action. Remember in this game, things are not like real "
                     "world. The system message in observation is always correct and the plan plan/action may have "
                     "flaws.")
PAPER_UPDATE_PROMPT = ("Based on the above experiences of the game, rewrite the current game plan. Pay attention to "
                       "summary of successful jobs, and flawed actions and suggested revision of all jobs. The plan "
                       "should be generalizable to all job objectives. The actions in the plan should also be in the "
                       "form as in game description.")
PLAN_FORMAT = "Use the following Strict format:\nPlan: [Step 1: ..., Step 2: ..., ..., Step N: ...]"
_SECTION = re.compile(r"^[ \t>*#-]*\**[ \t]*(summary|flaws?|revision)[ \t]*\**[ \t]*:[ \t]*\**", re.I | re.M)


def _plan(steps: list[str]) -> str:
    return render_plan(steps) if steps else "(none yet: the agent made its own plan)"


def success_text(outcome: RunOutcome) -> str:
    """The paper's reward: 1 when the agent's decision is the best one, else 0 (no label: unknown)."""
    if outcome.correct is None and outcome.label is None:
        return "Outcome: unknown (the question has no labelled best decision)."
    if outcome.correct:
        return "Outcome: success (reward 1): the agent's decision is the best one."
    return "Outcome: failure (reward 0): the agent did not find the best decision."


def outcome_text(outcome: RunOutcome, reward: str = "rich") -> str:
    """A run's reward as the reflection reads it: ``success`` (the paper's success or failure), or ``rich``: right
    or wrong, the best decision, and where the agent's decision ranks."""
    if reward == "success":
        return success_text(outcome)
    decision, label, placement = outcome.decision, outcome.label, outcome.placement
    best = f"The best decision is {label}." if label is not None else "The question has no labelled best decision."
    if decision is None:
        failed = f" (the run failed: {outcome.error})" if outcome.error else ""
        return f"Outcome: wrong. The agent named no candidate decision{failed}. {best}"
    where = (f" (rank {placement_text(placement)} in the simulator's ranking, regret "
             f"{placement['regret']:.4g})" if placement else "")
    if outcome.correct:
        return f"Outcome: correct. The agent chose {decision}, the best decision{where}."
    verdict = "wrong" if outcome.correct is False else "unknown"
    return f"Outcome: {verdict}. The agent chose {decision}{where}. {best}"


def experience(plan: list[str], run: str, outcome: RunOutcome, reward: str = "rich", task: str | None = None) -> str:
    """H and R of equations 6-8: the plan, the agent's run and its reward. With ``task`` (the paper setting), H ⊕ R
    as the paper has it, with no headings: the task description the agent was given (its system prompt: the schema,
    the valid actions and the plan), the interaction history, the reward."""
    if task is not None:
        return "\n\n".join([task, run, outcome_text(outcome, reward)])
    return "\n\n".join([f"The plan the agent was given:\n{_plan(plan)}", f"The agent's run:\n{run}",
                        outcome_text(outcome, reward)])


def reflection_steps(plan: list[str], run: str, outcome: RunOutcome, reward: str = "success",
                     task: str | None = None) -> dict[str, str]:
    """The three-step SIR reflection's user messages: the summary and the flaws each on the experience; the
    revision follows the flaws' call and its reply (equation 8). With ``task``: the paper setting's H and
    Flaw-prompt."""
    h = experience(plan, run, outcome, reward, task)
    flaw = FLAW_PROMPT if task is None else PAPER_FLAW_PROMPT
    return {"summary": f"{h}\n\n{SUMMARY_PROMPT}", "flaws": f"{h}\n\n{flaw}", "revision": REVISION_PROMPT}


def reflection_message(plan: list[str], run: str, outcome: RunOutcome, reward: str = "rich",
                       task: str | None = None) -> str:
    """SIR reflection on one run, in one call: summary, flaws of the plan, revision (``task``: as
    ``reflection_steps``)."""
    flaw = FLAW_PROMPT if task is None else PAPER_FLAW_PROMPT
    return "\n\n".join([
        experience(plan, run, outcome, reward, task),
        "Reflect on the run in three parts:\n"
        f"Summary: {SUMMARY_PROMPT}\nFlaws: {flaw}\nRevision: {REVISION_PROMPT}"])


def parse_reflection(text: str) -> dict[str, str]:
    """The ``summary``, ``flaws`` and ``revision`` of a reflection ("" for a part it does not write)."""
    parts = {name: "" for name in SECTIONS}
    matches = list(_SECTION.finditer(text))
    for m, nxt in zip(matches, matches[1:] + [None], strict=False):
        name = m.group(1).lower()
        name = "flaws" if name.startswith("flaw") else name
        if not parts[name]:
            parts[name] = text[m.end():nxt.start() if nxt else len(text)].strip()
    return parts


def update_message(plan: list[str], experiences: list[dict], reward: str = "rich", task: str | None = None) -> str:
    """The plan update: the current plan and each run's question, outcome and reflection (``experiences``). With
    ``task`` (the paper setting), equation 9's inputs alone: the current plan X_i (none for X_0), each task
    instance P_j with its summary, flaws and revision, and Table 2's Upd-prompt; then the plan's format."""
    if task is not None:
        jobs = [part for e in experiences for part in (e["text"], e["summary"], e["flaws"], e["revision"]) if part]
        return "\n\n".join(([render_plan(plan)] if plan else []) + jobs + [PAPER_UPDATE_PROMPT, PLAN_FORMAT])
    runs = "\n---\n".join(
        f"Question {e['question']}:\n{e['text']}\n{outcome_text(e['outcome'], reward)}\n"
        + "\n".join(f"{name.title()}: {e[name] or '(none)'}" for name in SECTIONS) for e in experiences)
    return "\n\n".join([
        f"The current plan:\n{_plan(plan)}", f"The agent's experiences with it:\n{runs}",
        "Based on the above experiences, rewrite the current plan. Pay attention to the summaries of the correct "
        "runs, and to the flaws and suggested revisions of all runs. The plan should be generalizable to all "
        "questions of this kind: name nothing particular to one question. Each step says which data to collect "
        "from the database, or how to decide from it.",
        PLAN_FORMAT])
