"""The ``paper`` prompt setting: the PlanRAG paper's prompts (Figures 8-11) in the form its original implementation
sent them, as closely as a chat model allows, and nothing it did not send. The ``improved`` setting (prompts.py, the default) differs from it in
the ways docs/paper-deviations.md lists; this module holds only what the ``paper`` setting does otherwise.

- The graph schema as the figures' template renders it (``schema``): property names, no types, no headings; a
  relational schema stays the MySQL CREATE TABLE statements, as in the original. No note on a Cypher dialect.
- The tools are described as in the figures: ``Graph DB`` (or ``Relational DB``) and ``Self thinking``, their
  ``args`` with the doubled braces the template renders to; the Action line names ``'Self-thinking'``. The
  prompt's parts (prefix, tools, format, suffix) are separated by blank lines.
- The conversation is two messages: the system prompt, and one user message holding the question and the ReAct
  scratchpad (each earlier reply followed by ``Observation:`` and what it observed), as the original agent built it;
  the model stops at ``Observation:``.
- A reply is read as the original parser read it (``read_reply``): an Action with its Action input runs, the tool
  named exactly; else a Final answer ends the run; nothing is corrected, nothing asked again, no repeat noted (see
  graph.py, ``_act_paper``). The run stops, unanswered, after ``MAX_ITERATIONS`` LLM calls, as the original
  agent executor did.
- What a tool returns, as the original tools returned it: a query's rows as a pandas DataFrame printed
  (``result_text``), an error as ``An exception occured: ...``, ``Self thinking`` nothing.
- SingleRAG: one retrieval call (the Figure 8 prompt and ``Question: ...``, no stop sequence), the text after its
  ``Action input:`` run as the query whatever the Action names, and one answer call (Figure 9) whose user message
  holds the question, the query and the data (``single_answer``); its reply is the answer.
- A run given a plan (AutoPlan's) acts as the AutoPlan paper's agent (its equations 2-5): per step a thought call
  ending with the Thought-prompt (``thought_chat``), an action call continuing the thought after ``Action:``, and the
  formalizer's call (its Appendix A.1, Figure 6: ``formalizer``), whose formalized action is acted on.
"""
from __future__ import annotations

import re

import pandas as pd
from langchain_core.messages import HumanMessage, SystemMessage

from core.agents import prompts
from core.model.run_settings import PROMPT_SETTINGS
from core.agents.parsing import render_plan
from core.model.technique import Technique

IMPROVED, PAPER = PROMPT_SETTINGS
#: The original agent's stop sequence.
STOP = ["Observation:"]
SELF_TOOL = "Self thinking"  # the tool's name in the figures' tool descriptions and in the original executor
#: The tools' arguments as the figures' template renders them: it writes each brace four times, and one rendering
#: halves them, so the model read them doubled.
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
_ACTION = re.compile(r"Action *\d* *:(?P<tool>.*?)Action *\d* *input *\d* *:(?P<input>.*)", re.S)
FINAL = "Final answer:"
ACTION = "Action:"
#: AutoPlan's thought call stops where the model would write its action (the action call writes it).
THOUGHT_STOP = ["\nAction:", "Observation:"]
#: AutoPlan's Thought-prompt (Table 2), for a run given a learned plan in the paper setting.
THOUGHT_PROMPT = ("Identify which step of plan you are at. Show your thought about the one next action. Your thought "
                  "should be faithful to the plan step.")
#: PlanRAG w/o RP has no figure; its repeat line is the authors' code's, which names the Plan too.
_NORP_REPEAT = ("... (a process of Plan, Current step, Thought, Action, Action input, and Observation can repeat N "
                "times)")
_IMPROVED_NORP_REPEAT = "... (a process of Current step,"


def check(setting: str) -> str:
    """The setting, or ValueError naming the choices."""
    if setting not in PROMPT_SETTINGS:
        raise ValueError(f"unknown prompt setting {setting!r}; choose one of {', '.join(PROMPT_SETTINGS)}")
    return setting


def _names(props: str | None) -> str:
    return ", ".join(p.split(":")[0].strip() for p in (props or "").split(",") if p.strip())


def schema(language: str, schema_text: str) -> str:
    """The schema as Figures 8-11's template renders it (its doubled braces are the template's escapes): each node
    label as ``(n:Trade_node {name, local_value, ...});`` (the variables n, m, then o, p, ... in order), property
    names only; the first relationship type as ``(Trade_node)-[r:source {flow}]->[Trade_node]`` and the others as
    ``(Country)-[NodeCountry{is_home, ...}]->(Trade_node)``, the figures' two forms. A relational schema unchanged
    (the MySQL CREATE TABLE statements, as in the original)."""
    if language != "cypher":
        return schema_text.strip()
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
    return "\n".join(nodes + rels)


def _tools(language: str, schema_text: str) -> str:
    db = (f"{prompts.TOOL_NAMES[language]}: Useful for when you need to collect the data that follows the following "
          f"schema (You MUST generate a {prompts.LANGUAGE_NAMES[language]} query statement to interact with this "
          f"tool):\n{schema(language, schema_text)}, {ARGS}")
    return f"{db}\n{SELF_TOOL}: Useful for when there is no available tool., {ARGS}"


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
    fmt += [_NORP_REPEAT if line.startswith(_IMPROVED_NORP_REPEAT) else line
            for line in prompts.observation_to_answer_lines(tech)]
    parts = ["\n".join(prefix), _tools(language, schema_text), "\n".join(fmt)]
    if initial_plan:
        parts.append(follow_plan(initial_plan))
    parts.append("Begin! Keep in mind that Your response MUST follow the valid format above.")
    return "\n\n".join(parts)


def follow_plan(steps: list[str]) -> str:
    """The plan a run starts from (AutoPlan's X); the Thought-prompt comes with each step's thought call."""
    return f"A plan for questions of this kind:\n{render_plan(steps)}"


def thought_chat(prompt: str, messages: list[dict]) -> list:
    """AutoPlan's thought call (its equation 2): the history H (the system prompt with the plan, the question and
    the scratchpad of earlier thoughts, formalized actions and observations), then the Thought-prompt."""
    question = messages[0]["content"]
    return [SystemMessage(prompt), HumanMessage(f"{question}\n\n{scratchpad(messages[1:])}{THOUGHT_PROMPT}")]


def action_cue(thought: str) -> dict:
    """The scratchpad entry AutoPlan's action call continues (equation 3: H, the thought, then ``Action:``)."""
    return {"role": "ai", "content": f"{thought}\n{ACTION}"}


def formalizer(language: str, raw_action: str) -> str:
    """The formalizer's prompt (the AutoPlan paper's Appendix A.1, Figure 6), its valid action formats those of
    the run's tools and of a final answer."""
    tool, lang = prompts.TOOL_NAMES[language], prompts.LANGUAGE_NAMES[language]
    return (f"Valid action formats are as follows:\nAction: {tool}\nAction input: a {lang} query statement\n"
            f"Action: {SELF_TOOL}\nAction input: your thought\nFinal answer: the final answer to the question\n\n"
            "Formalize the following action strictly into the above valid action formats. If there are multiple "
            f"actions, formalize the first one.\n\nAction to formalize: {raw_action}\nFormalized action:")


def chat_alone(prompt: str, messages: list[dict]) -> list:
    """The formalizer's call: its prompt as the one user message, no system prompt (``prompt`` is empty)."""
    return [HumanMessage(messages[0]["content"])]


def answer_prompt(language: str, schema_text: str) -> str:
    """Figure 9: answer now from the data collected, its parts separated by blank lines."""
    return "\n\n".join(["You are a decision-making agent answering a given question.\n"
                        "You have already collected the data to answer the question.\n"
                        "Indeed, you should make your Final answer immediately.:",
                        _tools(language, schema_text),
                        "Use the following Strict format:\n\n"
                        "Final answer: the final answer to the question based on the observed data.",
                        "Begin!"])


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


def chat_single(prompt: str, text: str) -> list:
    """The messages of a SingleRAG call: the system prompt and one user message."""
    return [SystemMessage(prompt), HumanMessage(text)]


def single_answer(question: str, query: str, data: str) -> str:
    """The user message of SingleRAG's answer call, as the original filled its ``Question: {input}`` template: the
    question, the query as cut from the reply, and what the database returned."""
    return f"Question: \n{question}\nRetrieving query:{query}\nRetrieved data: {data}        \n"


def single_query(text: str) -> str | None:
    """The query SingleRAG runs: the reply's text after its first ``Action input:``, up to any ``Observation``
    (None when it has no ``Action input:``; the original failed there)."""
    if "Action input:" not in text:
        return None
    return text.split("Action input:")[1].split("Observation")[0]


def read_reply(text: str) -> tuple[str, str, str]:
    """A reply as the original parser read it: (``action``, tool, input) for an Action line followed by an Action
    input line (the input runs to the end of the reply); (``final``, answer, "") for a reply with
    ``Final answer:`` and no action; (``both``, "", "") or (``neither``, "", "") for what it could not parse."""
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
