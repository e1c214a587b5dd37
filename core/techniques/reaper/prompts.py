"""REAPER's prompts (after its prompt design, section 4.1: role, the tool with its schema, the task's
instructions and format; the plan format of Figure 2) and the texts of what its steps observed. The final
answer is asked for with PlanRAG's answer prompt (the improved one; in the paper setting the authors')."""
from __future__ import annotations

import re

from core.agents import prompts
from core.agents.parsing import render_plan
from core.agents.prompts import LANGUAGE_NAMES, TOOL_NAMES
from core.techniques.reaper.plan import Step, parse_plan

#: The note on a plan cut off by the reply length limit.
CUT_OFF = "the plan was cut off at the reply length limit: its last step may be incomplete and is not run if so"
#: How a step is written, for corrections.
STEP_FORMAT = "one step per line: Step N: what it retrieves - #EN = {tool}[a {lang} query]"


def planner_prompt(language: str, schema: str, note: str | None = None, examples: str = "") -> str:
    """The system prompt of the call that writes the whole retrieval plan; ``examples``, example plans in its
    format, come after the format (none: zero-shot)."""
    tool, lang = TOOL_NAMES[language], LANGUAGE_NAMES[language]
    in_list = "IN (#E1)" if language == "sql" else "IN [#E1]"
    return "\n".join([
        "You are a decision-making agent answering a given question.",
        "Your goal is to write a step by step plan that retrieves all the data needed to answer the question. "
        "The plan runs without you: each step runs one query, the result of step N is called #EN, and a later "
        "step can use it in its query. When every step has run, you will answer from the results alone, so "
        "retrieve everything the answer depends on.",
        "The tool:",
        prompts.database_tool(language, schema, note),
        "A result in a later query: #EN stands for the value of a result with one row and one column, or for the "
        f"comma-separated values of a result with one column (write {in_list}). Values are given as {lang} "
        "literals, so do not put quotes around #EN. A result with several columns can only be read for the answer.",
        "Use the following Strict format, one step per line:",
        f"Step 1: what the step retrieves - #E1 = {tool}[a {lang} query]",
        f"Step 2: what the step retrieves - #E2 = {tool}[a {lang} query, which may use #E1]",
        "... (as many steps as needed, each with one query)",
        *([examples.strip()] if examples.strip() else []),
        "Write only the plan: no results and no answer. Begin!"])


#: The paper setting's tool names: identifiers, like the paper's (``prod_qna``, ``customer_support``).
PAPER_TOOLS = {"sql": "relational_db", "cypher": "graph_db"}
_FIRST = {"sql": re.compile(r"CREATE TABLE\s+`?(\w+)", re.I), "cypher": re.compile(r"\(\w*:(\w+)")}


def _usage(language: str, schema: str) -> str:
    """An example query over the schema's first table or node label."""
    found = _FIRST[language].search(schema)
    name = found.group(1) if found else "x"
    return f"SELECT * FROM {name} LIMIT 3" if language == "sql" else f"MATCH (n:{name}) RETURN n LIMIT 3"


def paper_plan(plan: str, language: str) -> str:
    """An example plan (written ``Step N: what - #EN = Tool[query]``) in the paper's form, Figure 2's
    ``Step N: what - #EN = tool("query")``."""
    lines = []
    for i, step in enumerate(parse_plan(plan, language), 1):
        call = f'#E{step.label} = {PAPER_TOOLS[language]}("{step.query}")'
        lines.append(f"Step {i}: {step.purpose} - {call}" if step.purpose else f"Step {i}: {call}")
    return "\n".join(lines)


def paper_input(question: str) -> str:
    """An input x = {q, c} as the paper's prompt gives it (Figure 2): the page context (none here) and the
    question; the model writes the plan after ``# Answer:``."""
    return f'# Input:\nContext: {{}}\nQuestion: "{question.strip()}"\n# Answer:'


def paper_planner_prompt(language: str, schema: str, examples: list[tuple[str, str]]) -> str:
    """The planner prompt in the structure of REAPER's section 4.1: the role, the system instruction, each tool with
    its name, signature, description and an example usage, the task's constraints, then the m in-context examples
    in Figure 2's ``# Input: ... # Answer:`` form (none for a zero-shot planner)."""
    # worded for this project: the paper gives the structure and its retail wording, not a prompt for databases
    tool, lang = PAPER_TOOLS[language], LANGUAGE_NAMES[language]
    in_list = "IN (#E1)" if language == "sql" else "IN [#E1]"
    parts = [
        "### Role:\nYou are an AI assistant to a decision-maker. Your goal is to find the right information in a "
        "database to help the decision-maker answer their question.",
        "### System Instruction:\nYour goal is to generate a step by step plan using the tools listed below to get "
        "the information needed to answer a question. The output of one tool can be fed to another in a sequential "
        "manner. Each step may use only one tool.",
        "The set of the candidate tools, their definitions, example usages are:\n"
        f"1. {tool} - Tool: Runs one {lang} query on the database and returns its rows. It needs a {lang} query as "
        f"input. The database follows this schema:\n{schema.strip()}\n"
        f"Signature: {tool}(query: str)\n"
        f'Example usage: #E1 = {tool}("{_usage(language, schema)}")',
        f"The result of step N is #EN. A later step's query can use it: as a value when it has one row and one "
        f"column, or as a list of values when it has one column ({in_list}); do not put quotes around #EN. Use only "
        "the tools listed above. Write one step per line, as: Step N: what the step retrieves - "
        f'#EN = {tool}("query"). Write only the plan.',
        *[f"{paper_input(q)}\n{paper_plan(plan, language)}" for q, plan in examples]]
    return "\n\n".join(parts)


def evidence(step: Step, position: int, text: str) -> str:
    """What a step observed, as the next call reads it."""
    head = step.name(position) + (f" ({step.purpose})" if step.purpose else "")
    return f"{head}:\n{text}" if "\n" in text else f"{head}: {text}"


def unreadable(problem: str) -> str:
    return f"not run: this step cannot be read: {problem}."


def skipped(failed: list[int]) -> str:
    names = ", ".join(f"#E{n}" for n in failed)
    return f"not run: it uses {names}, which failed."


def repeated(earlier: str, text: str) -> str:
    """A step whose query is the same as an earlier step's: not run again (the loop guard)."""
    return (f"not run: the same query as {earlier}, which gave: {text}\nRunning it again gives the same; its result "
            f"stands for this step.")


def unusable(problem: str) -> str:
    return f"not run: {problem}."


def no_steps(language: str) -> str:
    return (f"Your plan has no steps. Write each step as 'Step N: what it retrieves - #EN = "
            f"{TOOL_NAMES[language]}[{LANGUAGE_NAMES[language]} query]'.")


def observations(texts: list[str]) -> str:
    """The user message with what a plan's steps observed."""
    return prompts.observation_message("\n\n".join(texts))


def replan_request(failed: list[str], next_step: int, next_label: int) -> str:
    """The request for the one re-plan, after failed steps (or a plan with none)."""
    if next_step == 1:
        return "Re-plan: write the whole plan in that format, from Step 1 with #E1."
    return (f"{', '.join(failed)} gave no result. Re-plan: write only the steps to run instead, in the same format, "
            f"numbered on from Step {next_step} with #E{next_label}; they may use the results of the steps that "
            "succeeded.")


def plan_edited(steps: list[str], note: str = "") -> str:
    return f"The analyst edited your plan.{prompts._note(note)} It ran as:\n{render_plan(steps)}"
