"""Reading the model's replies in the paper's format: labelled fields (``Plan:``, ``Current step:``, ``Thought:``,
``Action:``, ``Action input:``, ``Re-plan:``, ``Final answer:``), a plan's steps, a query's language, a tool name.

The parser is lenient about form (case, markdown bullets and bold, ``Action Input``, code fences) and reports
what it cannot accept as ``problems``, which the agent loop turns into corrective observations.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

#: label text -> field name; longer labels first so ``Action input`` is not read as ``Action``.
_FIELDS = {"plan": "plan", "current step": "current_step", "thought": "thought", "action input": "action_input",
           "action": "action", "observation": "observation", "re-plan": "replan", "replan": "replan",
           "final answer": "final_answer", "question": "question"}
_LABEL = re.compile(r"^[ \t>*#-]*\**[ \t]*(plan|current[ _]step|thought|action[ _]input|action|observation|"
                    r"re-?plan|final[ _]answer|question)[ \t]*\**[ \t]*:[ \t]*\**", re.I | re.M)
_FENCE = re.compile(r"^```[\w-]*[ \t]*\n?|\n?```[ \t]*$")
_STEP = re.compile(r"(?:^|(?<=[\s\[,;*]))step[ \t]*(\d+)[ \t]*\**[ \t]*:", re.I)
_BOLD = re.compile(r"\*\*+|__")  # markdown emphasis around a step or its words, not part of the step
_LIST_MARK_LINE = re.compile(r"\n[ \t]*(?:\d+[.)]|[-*\u2022])?[ \t]*$")  # the next step's list number
_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+")


@dataclass
class Reply:
    """One reply, as fields. A field given twice keeps its first value."""

    text: str
    fields: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # field names in the order written
    plan: list[str] | None = None
    replan: bool | None = None  # Re-plan: Y (True) or N (False); None when absent
    problems: list[str] = field(default_factory=list)
    query_moved: bool = False  # the Action line held the query itself, taken as the Action input
    _ends: dict[str, int] = field(default_factory=dict, repr=False)  # field name -> end of its text

    def get(self, name: str) -> str | None:
        return self.fields.get(name)

    @property
    def thought(self) -> str | None:
        return self.get("thought")

    @property
    def current_step(self) -> str | None:
        return self.get("current_step")

    @property
    def action(self) -> str | None:
        return self.get("action")

    @property
    def action_input(self) -> str | None:
        return self.get("action_input")

    @property
    def final_answer(self) -> str | None:
        return self.get("final_answer")

    def through_plan(self) -> str:
        """The reply's text up to the end of its plan (what stays in the transcript when the analyst changes
        the plan: the rest of the reply followed the plan as proposed)."""
        end = self._ends.get("plan")
        return self.text[:end].rstrip() if end is not None else self.text


def _clean_query(text: str) -> str:
    text = _FENCE.sub("", text.strip()).strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'`":
        text = text[1:-1].strip()
    return text


def _yes_no(text: str) -> tuple[bool | None, str]:
    """``Y``/``Yes``/``N``/``No`` at the start of a Re-plan value, and what follows it on the line."""
    m = re.match(r"\W*(y(?:es)?|n(?:o)?)\b[\W_]*", text, re.I)
    if not m:
        return None, text
    return m.group(1).lower().startswith("y"), text[m.end():]


def parse_reply(text: str) -> Reply:
    """Split a reply into its fields. Text before the first label counts as the thought when there is no
    ``Thought:``; a reply with no label at all is all thought."""
    reply = Reply(text)
    matches = list(_LABEL.finditer(text))
    preamble = text[:matches[0].start()] if matches else text
    for m, following in zip(matches, matches[1:] + [None], strict=False):
        name = _FIELDS[re.sub(r"[ _]", " ", m.group(1).lower()).replace("replan", "re-plan")]
        end = following.start() if following else len(text)
        reply.order.append(name)
        if name not in reply.fields:
            reply.fields[name] = text[m.end():end].strip()
            reply._ends[name] = end
    if preamble.strip() and "thought" not in reply.fields:
        reply.fields["thought"] = preamble.strip()
    if "replan" in reply.fields:
        reply.replan, rest = _yes_no(reply.fields["replan"])
        rest = re.sub(r"^plan\s*:\s*", "", rest.strip(), flags=re.I)
        if reply.replan and rest and "plan" not in reply.fields:  # "Re-plan: Y. Plan: [Step 1: ...]" on one line
            reply.fields["plan"], reply._ends["plan"] = rest, reply._ends["replan"]
    if reply.fields.get("plan"):
        reply.plan = parse_plan(reply.fields["plan"]) or None
    for name in ("action", "action_input"):
        if name in reply.fields:
            reply.fields[name] = _clean_query(reply.fields[name])
    _query_in_action(reply)
    _check(reply)
    return reply


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).lower() == " ".join(b.split()).lower()


def _query_in_action(reply: Reply) -> None:
    """An Action line holding a query instead of a tool name: taken as the Action input when that is unambiguous
    (no Action input, the same query again, or the tool name written there instead), else a problem saying
    where each goes."""
    action, given = reply.get("action"), reply.get("action_input")
    language = query_language(action) if action and tool_kind(action) is None else None
    if language is None:
        return
    if not given or _same(given, action) or tool_kind(given) is not None:
        tool = given if given and tool_kind(given) is not None else language
        reply.fields["action"], reply.fields["action_input"] = tool, action
        reply.query_moved = True
    else:
        reply.problems.append("your Action line holds a query, not a tool name: write the tool name in Action and "
                              "the query in Action input")


def _check(reply: Reply) -> None:
    if "final_answer" in reply.fields:
        after = reply.order[reply.order.index("final_answer") + 1:]
        if not reply.fields["final_answer"]:
            reply.problems.append("your Final answer is empty")
        elif after:
            reply.problems.append(f"your reply goes on after the Final answer (with {', '.join(sorted(set(after)))})")
        elif "action" in reply.fields or "action_input" in reply.fields:
            reply.problems.append("your reply has both an Action and a Final answer")
        return
    if reply.get("action") and not reply.get("action_input"):
        reply.problems.append("your Action has no Action input")
    elif reply.get("action_input") and not reply.get("action"):
        reply.problems.append("your Action input has no Action naming the tool")


def parse_plan(text: str) -> list[str]:
    """The steps of a plan written as ``[Step 1: ..., Step 2: ...]``, one ``Step N:`` per line, or a numbered or
    bulleted list; each step without its ``Step N:`` prefix and without markdown bold (``**``)."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    marks = list(_STEP.finditer(body))
    if marks:
        parts = [_LIST_MARK_LINE.sub("", _BOLD.sub("", body[m.end():nxt.start() if nxt else len(body)]))
                 for m, nxt in zip(marks, marks[1:] + [None], strict=False)]
    else:
        lines = [line for line in body.splitlines() if line.strip()]
        parts = [_ITEM.sub("", line) for line in lines] if len(lines) > 1 else [body]
    steps = [re.sub(r"\s+", " ", _BOLD.sub("", p)).strip().strip(",;").strip() for p in parts]
    return [s for s in steps if s]


def render_plan(steps: list[str]) -> str:
    """A plan as the agent is shown it: one ``Step N:`` per line."""
    return "\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, 1))


_CYPHER = re.compile(r"\b(?:MATCH|MERGE|UNWIND|RETURN|DETACH)\b|\)\s*<?-\s*\[|\]\s*->|\(\s*\w*\s*:\s*\w+", re.I)
_SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|"
                  r"\b(?:CREATE|DROP|ALTER|TRUNCATE)\s+TABLE\b|\bSHOW\s+TABLES\b|\bGROUP\s+BY\b|\bJOIN\b", re.I)


def query_language(query: str) -> str | None:
    """``sql`` or ``cypher`` when the query clearly is one and not the other; None when unsure."""
    code = re.sub(r"'[^']*'|\"[^\"]*\"", "''", query)  # string literals say nothing about the language
    cypher, sql = bool(_CYPHER.search(code)), bool(_SQL.search(code))
    if cypher != sql:
        return "cypher" if cypher else "sql"
    return None


def tool_kind(action: str) -> str | None:
    """What an Action names: ``sql`` (the Relational DB), ``cypher`` (the Graph DB), ``self`` (Self-thinking),
    or None for an unknown tool."""
    key = re.sub(r"[^a-z0-9]", "", action.lower())
    if key.startswith("relational") or key in {"rdb", "sql", "mysql", "sqlite", "sqldb", "sqldatabase"}:
        return "sql"
    if key.startswith("graph") or key in {"gdb", "cypher", "neo4j", "ladybug", "kuzu"}:
        return "cypher"
    if key.startswith("self"):
        return "self"
    return None
