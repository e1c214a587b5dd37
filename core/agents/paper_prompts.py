"""The ``paper`` prompt setting: the PlanRAG paper's prompts (Figures 8-11) in the form its original implementation
sent them, as closely as a chat model allows. The ``improved`` setting (prompts.py, the default) differs from it in
the ways docs/paper-deviations.md lists; this module holds only what the ``paper`` setting does otherwise.

- The schema lists property names (``(:Trade_node {name, local_value, ...});``), without types and without the
  ``Nodes:`` / ``Relationships:`` headings; a relational schema stays the MySQL CREATE TABLE statements, as in the
  original. No note on a database's Cypher dialect.
- The tools are described as in the figures: ``Graph DB`` (or ``Relational DB``) and ``Self thinking``; the Action
  line names ``'Self-thinking'``. The prompt's parts (prefix, tools, format, suffix) are separated by blank lines.
- The conversation is two messages: the system prompt, and one user message holding the question and the ReAct
  scratchpad (each earlier reply followed by ``Observation:`` and what it observed), as the original agent built it;
  the model stops at ``Observation:``.
- A reply is read as the original parser read it: a Final answer ends the run, an Action with its Action input
  runs; nothing else is corrected (see graph.py, ``_act_paper``).
"""
from __future__ import annotations

import re

from langchain_core.messages import HumanMessage, SystemMessage

from core.agents import prompts
from core.model.run_settings import PROMPT_SETTINGS
from core.model.technique import Technique

IMPROVED, PAPER = PROMPT_SETTINGS
#: The original agent's stop sequence.
STOP = ["Observation:"]
SELF_TOOL = "Self thinking"  # the tool's name in the figures' tool descriptions
#: What the original agent put before its scratchpad.
SCRATCHPAD_HEAD = ("This was your previous work (but I haven't seen any of it! I only see what you return as final "
                   "answer):")
_HEADINGS = {"nodes:", "relationships:"}
_PROPS = re.compile(r"\{([^{}]*)\}")


def check(setting: str) -> str:
    """The setting, or ValueError naming the choices."""
    if setting not in PROMPT_SETTINGS:
        raise ValueError(f"unknown prompt setting {setting!r}; choose one of {', '.join(PROMPT_SETTINGS)}")
    return setting


def schema(language: str, schema_text: str) -> str:
    """The schema as the paper gives it: for a graph, each node label and relationship pattern with its property
    names only (no types, no headings), node patterns ending in ``;``; a relational schema unchanged."""
    if language != "cypher":
        return schema_text.strip()
    lines = []
    for line in schema_text.strip().splitlines():
        if not line.strip() or line.strip().lower() in _HEADINGS:
            continue
        names = _PROPS.sub(lambda m: "{" + ", ".join(p.split(":")[0].strip() for p in m.group(1).split(",")
                                                     if p.strip()) + "}", line.strip())
        lines.append(names if "]->" in names or "<-[" in names else f"{names};")
    return "\n".join(lines)


def _tools(language: str, schema_text: str) -> str:
    db = (f"{prompts.TOOL_NAMES[language]}: Useful for when you need to collect the data that follows the following "
          f"schema (You MUST generate a {prompts.LANGUAGE_NAMES[language]} query statement to interact with this "
          f"tool):\n{schema(language, schema_text)}, {prompts.ARGS}")
    return f"{db}\n{SELF_TOOL}: Useful for when there is no available tool., {prompts.ARGS}"


def agent_prompt(tech: Technique, language: str, schema_text: str, initial_plan: list[str] | None = None) -> str:
    """Figure 8 (SingleRAG), 10 (IterRAG) or 11 (PlanRAG; without its Re-plan line for PlanRAG w/o RP), word for
    word, its parts separated by blank lines; with ``initial_plan``, the plan to start from (AutoPlan) before the
    suffix. Written out here, so the ``improved`` prompts can change without moving this one."""
    tool, lang = prompts.TOOL_NAMES[language], prompts.LANGUAGE_NAMES[language]
    prefix = ["You are a decision-making agent answering a given question."]
    if tech.max_actions == 1:
        prefix.append("You should collect the data to answer the question:")
    else:
        prefix.append("You should collect the data to answer the question.")
        if tech.plans:
            prefix.append("To this end, firstly, you need to plan which data would be needed in what order.")
        prefix.append("Keep in mind that the question can require to access following databases multiple times:")
    fmt = ["Use the following Strict format:", "", "Question: the input question you must answer."]
    if tech.plans:
        fmt += ["Plan: [Step 1: requirement 1, Step 2: requirement 2, ..., Step N: requirement N].",
                "Current step: the current Step in the Plan.",
                "Thought: you should always think about the Current step."]
    else:
        fmt.append("Thought: you should always think about what to do.")
    fmt += [f"Action: a suitable database name, MUST be one of ['{tool}', 'Self-thinking'].",
            f"Action input: a syntactically correct query statement only, MUST be written by {lang} query language."]
    fmt += prompts.observation_to_answer_lines(tech)
    parts = ["\n".join(prefix), _tools(language, schema_text), "\n".join(fmt)]
    if initial_plan:
        parts.append(prompts.start_from_plan(initial_plan, tech))
    parts.append("Begin! Keep in mind that Your response MUST follow the valid format above.")
    return "\n\n".join(parts)


def answer_prompt(language: str, schema_text: str) -> str:
    """Figure 9: answer now from the data collected, its parts separated by blank lines."""
    return "\n\n".join(["You are a decision-making agent answering a given question.\n"
                        "You have already collected the data to answer the question.\n"
                        "Indeed, you should make your Final answer immediately.:",
                        _tools(language, schema_text),
                        "Use the following Strict format:\n\n"
                        "Final answer: the final answer to the question based on the observed data.",
                        "Begin!"])


def _observed(content: str) -> str:
    head = "Observation: "
    return content[len(head):] if content.startswith(head) else content


def scratchpad(messages: list[dict]) -> str:
    """The ReAct scratchpad of a transcript (after its question): each reply, then ``Observation:`` and what it
    observed; empty before the first reply."""
    text = ""
    for m in messages:
        if m["role"] == "ai":
            text += m["content"]
        else:
            text += f"\nObservation:{_observed(m['content'])}\n"
    return f"{SCRATCHPAD_HEAD}\n{text}" if text else ""


def chat(prompt: str, messages: list[dict]) -> list:
    """The messages sent: the system prompt, and one user message with the question and the scratchpad."""
    question = messages[0]["content"]
    return [SystemMessage(prompt), HumanMessage(f"{question}\n\n{scratchpad(messages[1:])}")]


def invalid_tool(action: str, language: str) -> str:
    """The observation for an Action naming no tool of the run (as the original agent's executor said it)."""
    return f"{action} is not a valid tool, try one of [{prompts.TOOL_NAMES[language]}, {SELF_TOOL}]."
