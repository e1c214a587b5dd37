"""ReAct's system prompt: the ReAct paper's instruction ("Solve a question answering task with interleaving
Thought, Action, Observation steps ...") over the workbench's database tools, in the reply format the loop reads
(Thought, Action, Action input; Final answer)."""
from __future__ import annotations

from core.agents import prompts
from core.model.technique import Technique


def system_prompt(tech: Technique, language: str, schema: str, note: str | None = None,
                  initial_plan: list[str] | None = None) -> str:
    """The instruction, the tools, the format; no plan (ReAct takes none: ``initial_plan`` is refused by its
    settings)."""
    tools = f"['{prompts.TOOL_NAMES[language]}', '{prompts.SELF_THINKING}']"
    return "\n".join([
        "Solve a decision question with interleaving Thought, Action, Observation steps. Thought can reason about "
        "the current situation, and Action can be two types: a query on the database, whose rows come back as the "
        "Observation, or Self-thinking, to note a thought with no query.",
        "Tools:",
        prompts.tool_descriptions(language, schema, note),
        "Use this format:",
        "Question: the input question you must answer.",
        "Thought: reason about the current situation.",
        f"Action: the tool to use, one of {tools}.",
        f"Action input: a {prompts.LANGUAGE_NAMES[language]} query statement only (for Self-thinking: your note).",
        "Observation: the result of the action.",
        "... (Thought, Action, Action input and Observation repeat until you know the answer)",
        "Thought: I now know the answer.",
        "Final answer: the final answer to the question based on the observed data.",
        "Begin!"])
