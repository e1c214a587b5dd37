"""The ``paper`` prompt setting: what the PlanRAG authors' code (myeon9h/PlanRAG at its head) sent, byte for byte where
the text is theirs, and nothing it did not send. The ``improved`` setting (prompts.py, the default) differs from it in
the ways docs/paper-deviations.md lists; this module holds only what the ``paper`` setting does otherwise.

- The system prompt as their template assembled it (``agent_prompt``): each technique's own prefix (its folder's), the tools (the
  database tool's description ending with the scenario's schema text, ``Self thinking``'s with its line breaks, each
  with its ``args`` as the template rendered them), the technique's format instructions, the suffix, joined by blank
  lines. The schema is the scenario's ``paper_schemas`` text (their fixed text), else rendered from the database
  (``schema``). The question is the scenario's ``paper_question`` text.
- The conversation is two messages: the system prompt, and ``Question: {input}\n\n{agent_scratchpad}`` (each
  earlier reply followed by ``Observation:`` and what it observed); the model stops at ``Observation:``.
- A reply is read as their parser read it (``read_reply``: ``Human: `` removed first); nothing is corrected, nothing
  asked again, no repeat noted (paper_loop.py, ``act``). The run stops, unanswered, after ``MAX_ITERATIONS`` LLM
  calls, as their agent executor did.
- What a tool returns, as their tools returned it: rows as a pandas DataFrame printed (``result_text``), an error as
  ``An exception occured: ...``, ``Self thinking`` nothing.
- SingleRAG: one retrieval call and one answer call (``ANSWER_PROMPT``), as their chains sent them
  (core/techniques/singlerag/paper.py).
- A run given a plan acts as the AutoPlan paper's agent (core/techniques/autoplan/follow.py).
"""
from __future__ import annotations

import re

from langchain_core.messages import HumanMessage, SystemMessage

from core import scenarios
from core.agents import prompts
from core.model.bounds import one_of
from core.model.run_settings import PROMPT_SETTINGS
from core.agents.parsing import render_plan

IMPROVED, PAPER = PROMPT_SETTINGS
#: The original agent's stop sequence.
STOP = ["Observation:"]
SELF_TOOL = "Self thinking"  # the tool's name in the authors' code and in their executor
#: ``Self thinking``'s description as their code wrote it (a triple-quoted string: its line breaks and indents kept).
SELF_DESCRIPTION = "\n            Useful for when there is no available tool.\n            "
#: The database tool's description before its schema, with the query language as their code named it.
DB_DESCRIPTION = ("Useful for when you need to collect the data that follows the following schema (You MUST generate a "
                  "{language} statement to interact with this tool):")
DESCRIPTION_LANGUAGES = {"sql": "MySQL", "cypher": "Cypher query"}
#: The tools' arguments as their template rendered them: it writes each brace four times, and one rendering halves
#: them, so the model read them doubled.
ARGS = "args: {{'tool_input': {{'type': 'string'}}}}"
#: What the original agent put before its scratchpad.
SCRATCHPAD_HEAD = ("This was your previous work (but I haven't seen any of it! I only see what you return as final "
                   "answer):")
#: The original agent executor's iteration limit (LangChain's AgentExecutor default, kept by the authors' code):
#: after this many LLM calls the run stopped with ``STOPPED`` as its output, asking for no final answer.
MAX_ITERATIONS = 15
STOPPED = "Agent stopped due to iteration limit or time limit."
#: The original tools printed a result as a pandas DataFrame with these display options.
_DISPLAY = ("display.max_rows", 200, "display.max_colwidth", 1000)
_NODE = re.compile(r"^\((?::)?(\w+)(?: \{([^{}]*)\})?\)$")
_REL = re.compile(r"^\(:(\w+)\)-\[:(\w+)(?: \{([^{}]*)\})?\]->\(:(\w+)\)$")
#: Their parser's action pattern.
_ACTION = re.compile(r"Action\s*\d*\s*:[\s]*(?P<tool>.*?)[\s]*Action\s*\d*\s*input\s*\d*\s*:[\s]*(?P<input>.*)", re.S)
FINAL = "Final answer:"
ACTION = "Action:"
HEAD = "You are a decision-making agent answering a given question."
COLLECT = "You should collect the data to answer the question."
MULTIPLE = "Keep in mind that the question can require to access following databases multiple times: "
#: The pieces of the authors' format instructions their techniques share (``{tools}``: their tool names); each
#: technique's own prefix and format are its folder's (``prompts.PAPER_PREFIX``, ``prompts.PAPER_FORMAT``).
ACT = ("Action: a suitable database name, MUST be one of [{tools}].\n"
       "Action input: a syntactically correct query statement only, MUST be written by one of [MySQL, Cypher query "
       "language].\n")
THOUGHT = "Question: the input question you must answer.\nThought: you should always think about what to do.\n"
PLANNED = ("Question: the input question you must answer.\nPlan: [Step 1: requirement 1, Step 2: requirement 2, ..., "
           "Step N: requirement N].\nCurrent step: the current Step in the Plan.\nThought: you should always think "
           "about the Current step.\n")
ANSWER = "Thought: I now know the answer.\nFinal answer: the final answer to the question based on the observed data."
REPLAN = ("Re-plan: respond with 'Y' and change your Plan if you think a current Plan is not helpful, otherwise "
          "respond with 'N' and continue a process based on the current Plan.\n")
SUFFIX = "Begin! Keep in mind that Your response MUST follow the valid format above."
#: SingleRAG's answer call's system prompt as the authors' code assembled it (no tools: their answering template left
#: them out).
ANSWER_PROMPT = ("You are a decision-making agent answering a given question. \nYou have already collected the data to "
                 "answer the question.\nIndeed, you should make your Final answer immediately.: \n\n"
                 "Use the following Strict format:\n\nFinal answer: the final answer to the question based on the "
                 "observed data.\n\nBegin!")


def check(setting: str) -> str:
    """The setting, or ValueError naming the choices."""
    return one_of(setting, PROMPT_SETTINGS, "prompt setting")


def _names(props: str | None) -> str:
    return ", ".join(p.split(":")[0].strip() for p in (props or "").split(",") if p.strip())


def schema(language: str, schema_text: str) -> str:
    """A schema read from the database, laid out as the authors' schema texts are, for a scenario that has none of
    its own: a relational schema's CREATE TABLE statements between newlines; a graph's node labels, a blank line and
    its relationship types, in the two forms of their Locating text."""
    # node labels as (n:Trade_node {name, local_value, ...}); (variables n, m, then o, p, ...); the first
    # relationship type as (Trade_node)-[r:source {flow}]->[Trade_node], the others as
    # (Country)-[NodeCountry{is_home, ...}]->(Trade_node)
    if language != "cypher":
        return f"\n{schema_text.strip()}\n"
    nodes, rels, variables = [], [], iter("nmopqstuvwxyzabcdefghijkl")
    for line in schema_text.strip().splitlines():
        rel, node = _REL.match(line.strip()), _NODE.match(line.strip())
        if rel:
            src, kind, props, dst = rel.groups()
            braces = f"{{{_names(props)}}}" if props else ""
            rels.append(f"({src})-[r:{kind}{' ' + braces if braces else ''}]->[{dst}]" if not rels
                        else f"({src})-[{kind}{braces}]->({dst})")
        elif node:
            label, props = node.groups()
            nodes.append(f"({next(variables, 'n')}:{label}" + (f" {{{_names(props)}}}" if props else "") + ");")
    return "\n" + "\n".join(nodes) + "\n\n" + "\n".join(rels) + "\n"


def inputs(question, language: str, schema_text: str) -> tuple[str, str]:
    """The schema text and the question text a run sends in the paper setting: its scenario's (the authors' fixed
    schema, their way of joining the question), else the schema as read from the database, laid out as theirs, and
    the question's text."""
    try:
        kind = scenarios.get(question.scenario)
    except KeyError:
        return schema(language, schema_text), question.text
    fixed = kind.paper_schemas.get(language)
    return fixed if fixed is not None else schema(language, schema_text), kind.paper_question(question)


def _tools(language: str, schema_block: str) -> str:
    db = DB_DESCRIPTION.format(language=DESCRIPTION_LANGUAGES[language]) + schema_block
    return f"{prompts.TOOL_NAMES[language]}: {db}, {ARGS}\n{SELF_TOOL}: {SELF_DESCRIPTION}, {ARGS}"


def agent_prompt(prefix: str, format_text: str, language: str, schema_block: str,
                 initial_plan: list[str] | None = None) -> str:
    """A technique's system prompt as the authors' template assembled it from the technique's ``prefix`` and
    ``format_text`` (its folder's), the tools and the suffix (``schema_block``: the text after the database tool's
    description, ``inputs``); with ``initial_plan``, the plan to start from (AutoPlan) before the suffix."""
    fmt = "Use the following Strict format:\n\n" + format_text.format(
        tools=f"{prompts.TOOL_NAMES[language]}, {SELF_TOOL}")
    parts = [prefix, _tools(language, schema_block), fmt]
    if initial_plan:
        parts.append(follow_plan(initial_plan))
    parts.append(SUFFIX)
    return "\n\n".join(parts)


def follow_plan(steps: list[str]) -> str:
    """The plan a run starts from (AutoPlan's X); the Thought-prompt comes with each step's thought call."""
    return f"A plan for questions of this kind:\n{render_plan(steps)}"


def observed(content: str) -> str:
    """What a transcript's observation message observed (without its ``Observation: ``)."""
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
            text += f"\nObservation:{observed(m['content'])}\n"
    return f"{SCRATCHPAD_HEAD}\n{text}" if text else ""


def chat(prompt: str, messages: list[dict]) -> list:
    """The messages sent: the system prompt, and one user message with the question and the scratchpad."""
    question = messages[0]["content"]
    return [SystemMessage(prompt), HumanMessage(f"{question}\n\n{scratchpad(messages[1:])}")]


def invalid_tool(action: str, language: str) -> str:
    """The observation for an Action naming no tool of the run (as the original agent's executor said it)."""
    return f"{action} is not a valid tool, try one of [{prompts.TOOL_NAMES[language]}, {SELF_TOOL}]."


def received(text: str, stop: list[str] | None) -> str:
    """A reply as the original code received it from the server: cut only where a stop sequence it sent cuts it (at
    the first one met, which is left out, as the server does), nothing stripped."""
    # so a reply's trailing newline stays in the scratchpad, and SingleRAG's query keeps the newline before the
    # reply's Observation (the workbench client's own cut, at a line starting Observation:, and its stripping are the
    # improved setting's)
    cuts = [text.find(s) for s in stop or () if s in text]
    return text[:min(cuts)] if cuts else text


def logged(text: str) -> str:
    """A reply as the authors' parser kept it for the scratchpad: every ``Human: `` removed."""
    return text.replace("Human: ", "")


def read_reply(text: str) -> tuple[str, str, str]:
    """A reply as the authors' parser read it (``Human: `` removed first): (``action``, tool, input) for an Action
    followed by an Action input; (``final``, answer, "") for a reply with ``Final answer:`` and no action;
    (``both``, "", "") or (``neither``, "", "") for what it could not parse."""
    # whitespace around the colons is skipped; the input runs to the end of the reply, spaces and, unless it starts
    # "SELECT ", double quotes stripped
    text = logged(text)
    action, final = _ACTION.search(text), FINAL in text
    if action and final:
        return "both", "", ""
    if action:
        query = action.group("input").strip(" ")
        return "action", action.group("tool").strip(), query if query.startswith("SELECT ") else query.strip('"')
    if final:
        return "final", text.split(FINAL)[-1].strip(), ""
    return "neither", "", ""


def tool_of(action: str, language: str) -> str | None:
    """The tool an Action names, matched exactly as the original executor did: ``sql`` / ``cypher`` for the
    database's tool name, ``self`` for ``Self thinking``, None for anything else."""
    return {prompts.TOOL_NAMES[language]: language, SELF_TOOL: "self"}.get(action)


def result_text(columns: list[str], rows: list[list], language: str) -> str:
    """A query's rows as the original tools returned them: a blank line, then the pandas DataFrame printed (at most
    200 rows shown in full, cells up to 1000 characters). The Graph DB tool built its frame from the records, so
    its columns are numbered."""
    import pandas as pd  # heavy: only the paper setting prints rows as a DataFrame

    frame = pd.DataFrame(rows, columns=columns if language == "sql" else list(range(len(columns))))
    if not rows and language != "sql":
        frame = pd.DataFrame()
    with pd.option_context(*_DISPLAY):
        return f"\n{frame}"


def error_text(message: str, language: str) -> str:
    """A query error as the original tools returned it (the Relational DB tool put a blank line first)."""
    return f"{chr(10) if language == 'sql' else ''}An exception occured: {message}"


def fence_free(query: str, language: str) -> str:
    """The query the original Relational DB tool ran: its lines holding a code fence dropped."""
    if language != "sql":
        return query
    return "\n".join(line for line in query.split("\n") if "```" not in line)
