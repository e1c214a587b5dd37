"""The prompts, after Figures 8-11 of the PlanRAG paper (Appendix A.6), composed from the technique's flags and
the database's language and schema; and the texts of the observations the agent is given.

The system prompt holds prefix, tool descriptions, format instructions and suffix; the question goes in the
first user message (``Question: ...``), each reply in an assistant message, and each observation in a user
message starting with ``Observation:``.
"""
from __future__ import annotations

from core.agents.parsing import render_plan
from core.backends.cypher_dialect import LADYBUG_DIALECT_NOTE
from core.model.technique import Technique

TOOL_NAMES = {"sql": "Relational DB", "cypher": "Graph DB"}
LANGUAGE_NAMES = {"sql": "MySQL", "cypher": "Cypher"}
SELF_THINKING = "Self-thinking"
ARGS = "args: {'tool_input': {'type': 'string'}}"
#: Stop sequences: the model must stop before writing an observation itself.
STOP = ["\nObservation:", "\nobservation:"]


def dialect_note(backend_name: str) -> str | None:
    """The note on the Cypher dialect of an embedded Ladybug database (None for other backends)."""
    return LADYBUG_DIALECT_NOTE if backend_name == "ladybug" else None


def database_tool(language: str, schema: str, note: str | None = None) -> str:
    """The database tool: ``Relational DB`` with the MySQL schema, or ``Graph DB`` with the Cypher schema."""
    db = (f"{TOOL_NAMES[language]}: Useful for when you need to collect the data that follows the following schema "
          f"(You MUST generate a {LANGUAGE_NAMES[language]} query statement to interact with this tool):\n"
          f"{schema.strip()}, {ARGS}")
    return f"{db}\n{note.strip()}" if note else db


def tool_descriptions(language: str, schema: str, note: str | None = None) -> str:
    """The database tool and ``Self-thinking``."""
    tools = database_tool(language, schema, note)
    return f"{tools}\n{SELF_THINKING}: Useful for when there is no available tool., {ARGS}"


def _action_lines(language: str) -> list[str]:
    return [f"Action: a suitable database name, MUST be one of ['{TOOL_NAMES[language]}', '{SELF_THINKING}'].",
            "Action input: a syntactically correct query statement only, MUST be written by "
            f"{LANGUAGE_NAMES[language]} query language."]


def observation_to_answer_lines(tech: Technique) -> list[str]:
    """The format lines from Observation to Final answer (the same in the improved and the paper prompts)."""
    lines = [f"Observation: {'the data from the database' if tech.plans else 'the result of the action'}."]
    if tech.replans:
        lines += ["Re-plan: respond with 'Y' and change your Plan if you think a current Plan is not helpful, "
                  "otherwise respond with 'N' and continue a process based on the current Plan.",
                  "... (a process of Plan, Current step, Thought, Action, Action input, Observation, and Re-plan can "
                  "repeat N times)"]
    elif tech.plans:
        lines.append("... (a process of Current step, Thought, Action, Action input, and Observation can repeat N "
                     "times)")
    elif tech.max_actions != 1:
        lines.append("... (a process of Thought, Action, Action input, and Observation can repeat together N times)")
    return lines + ["Thought: I now know the answer.",
                    "Final answer: the final answer to the question based on the observed data."]


def agent_prompt(tech: Technique, language: str, schema: str, note: str | None = None,
                 initial_plan: list[str] | None = None) -> str:
    """The system prompt of a technique: Figure 8 (SingleRAG), 10 (IterRAG), 11 (PlanRAG; without its Re-plan
    line for PlanRAG w/o RP); with ``initial_plan``, the plan the agent starts from (e.g. an AutoPlan plan)."""
    prefix = ["You are a decision-making agent answering a given question."]
    if tech.max_actions == 1:
        prefix.append("You should collect the data to answer the question:")
    else:
        prefix.append("You should collect the data to answer the question.")
        if tech.plans:
            prefix.append("To this end, firstly, you need to plan which data would be needed in what order.")
        prefix.append("Keep in mind that the question can require to access following databases multiple times:")
    fmt = ["Use the following Strict format:", "Question: the input question you must answer."]
    if tech.plans:
        fmt += ["Plan: [Step 1: requirement 1, Step 2: requirement 2, ..., Step N: requirement N].",
                "Current step: the current Step in the Plan.",
                "Thought: you should always think about the Current step."]
    else:
        fmt.append("Thought: you should always think about what to do.")
    fmt += _action_lines(language) + observation_to_answer_lines(tech)
    suffix = "Begin! Keep in mind that Your response MUST follow the valid format above."
    start = [start_from_plan(initial_plan, tech)] if initial_plan else []
    return "\n".join(["\n".join(prefix), tool_descriptions(language, schema, note), "\n".join(fmt), *start, suffix])


def start_from_plan(steps: list[str], tech: Technique) -> str:
    """The plan a run starts from, for its system prompt: the planning techniques adapt it into their Plan, the
    others follow it in their Thoughts."""
    how = ("Start from this plan: write it as your Plan, adapting its steps to the question." if tech.plans
           else "Follow this plan in your Thoughts and Actions, adapting its steps to the question.")
    return f"A plan for questions of this kind:\n{render_plan(steps)}\n{how}"


def answer_prompt(language: str, schema: str, note: str | None = None) -> str:
    """Figure 9: answer now from the data collected (SingleRAG's second call; any technique at its limits)."""
    return "\n".join(["You are a decision-making agent answering a given question.",
                      "You have already collected the data to answer the question.",
                      "Indeed, you should make your Final answer immediately.:",
                      tool_descriptions(language, schema, note),
                      "Use the following Strict format:",
                      "Final answer: the final answer to the question based on the observed data.",
                      "Begin!"])


def question_message(question_text: str) -> str:
    return f"Question: {question_text.strip()}"


def observation_message(text: str) -> str:
    return f"Observation: {text}"


def format_hint(tech: Technique, language: str) -> str:
    """How to go on, for a corrective observation."""
    fields = "Current step, Thought, Action and Action input" if tech.plans else "Thought, Action and Action input"
    return (f"Write {fields} (Action MUST be one of ['{TOOL_NAMES[language]}', '{SELF_THINKING}'], Action input a "
            f"{LANGUAGE_NAMES[language]} query), or 'Thought: I now know the answer.' and the Final answer.")


def plan_hint(tech: Technique, language: str) -> str:
    """How to go on when no plan is in force: the plan first (a final answer is not accepted without one)."""
    return (f"Write your Plan: [Step 1: requirement 1, Step 2: requirement 2, ..., Step N: requirement N], then "
            f"Current step, Thought, Action and Action input (Action MUST be one of ['{TOOL_NAMES[language]}', "
            f"'{SELF_THINKING}'], Action input a {LANGUAGE_NAMES[language]} query).")


def correction(problem: str, tech: Technique, language: str, hint: str | None = None) -> str:
    """A corrective observation: what was wrong with the reply and how to go on (``hint``, default the
    format's)."""
    return f"Invalid format: {problem}. {hint or format_hint(tech, language)}"


#: The problem of a reply cut off by the reply length limit.
CUT_OFF = ("your reply was cut off at the reply length limit before it ended; write a shorter reply (one Thought, "
           "then Action and Action input, or the Final answer)")


def cut_off_answer() -> str:
    return "the reply was cut off at the reply length limit; its Final answer is taken as written"


def empty_replies(count: int) -> str:
    return (f"the model gave {count} empty replies in a row; check the model and its server (a reply cap too "
            "small, or a template that ends the reply at once)")


def repeated_action(call: int, earlier: str) -> str:
    """The observation for an action the agent already took (at LLM call ``call``), not run again."""
    return (f"Not run: you already took this action (LLM call {call}), and it gave: {earlier}\nRunning it again "
            "gives the same. Do something different: another query, or the Final answer if the data suffices.")


def same_reply(call: int) -> str:
    return f"Not run: you sent this same reply before (LLM call {call})."


def same_error(call: int) -> str:
    return (f"(The same error as your query at LLM call {call}: change what causes it instead of writing the "
            "query again.)")


def stuck(repeats: int, what: str) -> str:
    """Why the loop guard stopped a run (naming the reply cap when every reply was cut off by it)."""
    if what == CUT_OFF:
        return (f"the model's replies were cut off at the reply length limit {repeats} times in a row (raise the "
                "reply cap: --max-reply-tokens, PLANRAG_MAX_REPLY_TOKENS or the Settings page)")
    return f"the agent repeated itself {repeats} times (last: {what})"


def stuck_end(why: str, answered: bool | None, problem: str = "") -> str:
    """The error of a stuck run: ``why`` it was stopped, and whether the final answer it was then asked for came
    (None: no call was left to ask)."""
    if answered is None:
        return f"{why}; the run ends here"
    if answered:
        return f"{why}; it then gave its final answer from what it had observed"
    return f"{why}; asked once for its final answer, it gave none ({problem})"


def not_queried_yet(language: str) -> str:
    """The note (improved setting, once) on a final answer given before any query of the database."""
    return (f"You have not queried the {TOOL_NAMES[language]} yet: your answer rests on no data. Check it with a "
            f"{LANGUAGE_NAMES[language]} query (Action: {TOOL_NAMES[language]}), or, if you are sure, give your Final "
            "answer again.")


def context_shortened(count: int, context_tokens: int) -> str:
    return (f"{count} older observation{'s' if count != 1 else ''} shortened to fit the model's "
            f"{context_tokens:,}-token context window")


def context_room(need: int, context_tokens: int, reserved: int, source: str | None = None,
                 basis: str | None = None) -> str:
    """The tokens a request needs (estimated on ``basis``: guards.estimate_basis) beside what the window holds for
    it, and what is kept for the reply."""
    where = f"; the window {source}" if source else ""
    by = f" (estimate: {basis})" if basis else ""
    return (f"about {need:,} tokens needed{by}, {context_tokens - reserved:,} available: a {context_tokens:,}-token "
            f"window less {reserved:,} kept for the reply{where}")


def window_learned(tokens: int, source: str) -> str:
    return (f"the request was longer than the model's context window, which the run did not know: {tokens:,} tokens "
            f"(from {source}); older observations are shortened to fit it from now on, and the call is made again")


def context_exceeded(need: int, context_tokens: int, reserved: int, source: str | None = None,
                     basis: str | None = None) -> str:
    return (f"the request needs more than the model's context window allows even with older observations "
            f"shortened ({context_room(need, context_tokens, reserved, source, basis)}); the run ends here")


def unknown_tool(action: str, language: str) -> str:
    return f"'{action}' is not a valid tool; Action MUST be one of ['{TOOL_NAMES[language]}', '{SELF_THINKING}']"


def wrong_database(action: str, language: str) -> str:
    return (f"there is no {action} here: the data is in the {TOOL_NAMES[language]}, queried in "
            f"{LANGUAGE_NAMES[language]}")


def wrong_language(found: str, language: str) -> str:
    return (f"your Action input looks like {LANGUAGE_NAMES[found]}, but the {TOOL_NAMES[language]} only runs "
            f"{LANGUAGE_NAMES[language]} queries")


def query_error(kind: str, message: str) -> str:
    """The observation for a query that gave no rows; the agent may correct it."""
    lead = {"refused": "Query refused (the database is read-only; only read queries run)",
            "timeout": "Query timed out", "syntax": "Query error"}.get(kind, "Query failed")
    return f"{lead}: {message}"


def go_on_with_plan() -> str:
    """The observation after a reply that only gave a plan."""
    return "Go on with the Current step of your Plan."


def _note(note: str) -> str:
    return f" Their note: {note.strip().rstrip('.')}." if note.strip() else ""


def plan_edited(steps: list[str], note: str = "") -> str:
    said = _note(note)
    return (f"The analyst edited your Plan.{said} Follow this Plan from now on:\nPlan:\n{render_plan(steps)}\n"
            "Go on with its Current step.")


def plan_rejected(note: str, plan_format: str = "Plan: [Step 1: ..., Step 2: ..., ...]") -> str:
    said = _note(note)
    return (f"The analyst rejected your Plan.{said} Re-plan: make a new Plan that takes this into account, and "
            f"write it ({plan_format}) before going on.")


def query_rejected(note: str) -> str:
    return f"The analyst did not run your query.{_note(note)} Go on with this in mind."


def analyst_note(note: str) -> str:
    """A note the analyst added where a run was branched, for the agent's next step."""
    return f"Note from the analyst: {note.strip()}"


def limit_reached(what: str) -> str:
    return f"{what}; asking the agent for its final answer now"
