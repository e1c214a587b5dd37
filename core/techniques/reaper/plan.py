"""REAPER's retrieval plans (Joshi et al., CIKM 2024, Figure 2, with ReWOO's ``#E`` evidence variables): the steps
of a plan written in one LLM call, each one database query whose result is called ``#EN``, and the substitution
of earlier results into later queries.

    Step 1: the home node of "SWE" - #E1 = Relational DB[SELECT home_node FROM country WHERE country_name = "SWE"]
    Step 2: the nodes flowing into it - #E2 = Relational DB[SELECT source FROM flow WHERE dest = #E1]
    Step 3: their values - #E3 = Relational DB[SELECT * FROM trade_node WHERE trade_node IN (#E2)]

A reference ``#EN`` in a query is replaced by the result of the step that assigned it:

- one row, one column: that value, as a literal of the query language (strings in double quotes, numbers as
  they are, ``NULL``/``null``, ``TRUE``/``true``);
- one column, several rows: the values as comma-separated literals in row order, inside the query's own
  brackets: ``IN (#E1)`` in SQL, ``IN [#E1]`` in Cypher;
- anything else (no rows, several columns, more rows than were kept): the step fails (``UnusableResult``).

A reference written inside quotes (``'#E1'``) is replaced together with its quotes. A step that uses the
result of a failed step does not run.

The parser is lenient about form (``Step N:`` or ReWOO's ``Plan:`` lines, bold, a tool called with ``(...)``,
quotes or a code fence around the query, commentary after a step) and strict about content: every problem it
finds (no query, an unknown tool, a reference to no earlier step) is kept on the step as ``problem``.
"""
from __future__ import annotations

import numbers
import re
from dataclasses import asdict, dataclass, replace

from core.agents.parsing import _clean_query, query_language, tool_kind
from core.agents.prompts import LANGUAGE_NAMES, TOOL_NAMES

_ASSIGN = re.compile(r"#E(\d+)[ \t*]*=[ \t*]*")
_TOOL = re.compile(r"([A-Za-z][\w .-]{0,40}?)[ \t]*([\[(])")
_MARK = re.compile(r"^[ \t>*#-]*(?:step[ \t]*(\d+)|plan)[ \t*]*[:.)][ \t*]*", re.I | re.M)
_NEXT = re.compile(_MARK.pattern + r"|^[ \t>*-]*#E\d+[ \t*]*=", re.I | re.M)  # where a next step begins
_BARE = re.compile(r"[ \t*]*(?:```[\w-]*[ \t]*\n?[ \t]*)?[\"'`]?(?:SELECT|WITH|MATCH|OPTIONAL[ \t]+MATCH|UNWIND|CALL|"
                   r"SHOW)\b", re.I)  # a query written without the tool around it
_REF = re.compile(r"""(["'`]?)#E(\d+)(?!\d)\1""")
_PAIRS = {"(": ")", "[": "]", "{": "}"}


class UnusableResult(Exception):
    """A referenced result that cannot stand in a query (the message says why)."""


@dataclass(frozen=True)
class Step:
    """One step: ``label`` N of its ``#EN``, what it retrieves, the tool's name and the query as written (with
    its references). ``problem`` says why it cannot run; ``text`` is what was written for it."""

    text: str
    label: int | None = None
    purpose: str = ""
    tool: str = ""
    query: str = ""
    problem: str | None = None

    def name(self, position: int) -> str:
        """``#EN``, or ``Step <position>`` for a step that assigns no result."""
        return f"#E{self.label}" if self.label is not None else f"Step {position}"

    @property
    def refs(self) -> list[int]:
        """The results its query uses, in order of first use."""
        return list(dict.fromkeys(int(m.group(2)) for m in _REF.finditer(self.query)))

    def render(self) -> str:
        """The step as the analyst reviews and edits it (``Step N:`` left out), parsed back by ``parse_steps``."""
        if self.problem and not self.query:
            return self.text
        assignment = f"#E{self.label} = {self.tool}[{self.query}]"
        return f"{self.purpose} - {assignment}" if self.purpose else assignment

    def to_dict(self) -> dict:
        return asdict(self)


def _closing(text: str, start: int) -> int | None:
    """Where the bracket at ``start`` closes (string literals skipped), or None."""
    stack, quote, i = [], None, start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif ch in ")]}":
            if ch != stack[-1]:
                return None
            stack.pop()
            if not stack:
                return i
        i += 1
    return None


def _purpose(text: str) -> str:
    """What a step retrieves: the last line of the text before its ``#EN =``, without marks and dashes."""
    lines = [line for line in _MARK.sub("", text).splitlines() if line.strip()]
    return lines[-1].strip().strip("*").strip().rstrip("-\u2013:").strip() if lines else ""


def _assignment(text: str, start: int, language: str) -> tuple[Step, int]:
    """The step whose ``#EN =`` starts at ``start`` (its purpose still empty), and where its text ends."""
    m = _ASSIGN.match(text, start)
    label, rest = int(m.group(1)), m.end()
    if _BARE.match(text, rest):
        return _bare_assignment(text, start, rest, label, language)
    tool = _TOOL.match(text, rest)
    if not tool:
        line_end = text.find("\n", rest)
        end = len(text) if line_end < 0 else line_end
        return Step(text[start:end].strip(), label, problem=f"#E{label} has no query: write #E{label} = "
                    f"{TOOL_NAMES[language]}[{LANGUAGE_NAMES[language]} query]"), end
    open_at, closing = tool.end() - 1, _PAIRS[text[tool.end() - 1]]
    nxt = _NEXT.search(text, open_at + 1)
    limit = nxt.start() if nxt else len(text)
    close = _closing(text[:limit], open_at)
    if close is None:  # an unbalanced query: up to the step's last closing bracket of its kind
        close = text.rfind(closing, open_at + 1, limit)
    if close < 0:
        return Step(text[start:limit].strip(), label, tool=tool.group(1),
                    problem=f"the query of #E{label} is not closed with '{closing}'"), limit
    step = Step(text[start:close + 1].strip(), label, tool=tool.group(1).strip(),
                query=_clean_query(text[open_at + 1:close]))
    return replace(step, **_check_tool(step, language)), close + 1


def _bare_assignment(text: str, start: int, rest: int, label: int, language: str) -> tuple[Step, int]:
    """``#EN = SELECT ...`` without the tool around the query: the query runs to the next step (or a blank line),
    on the database's tool."""
    nxt = _NEXT.search(text, rest)
    end = nxt.start() if nxt else len(text)
    blank = re.search(r"\n[ \t]*\n", text[rest:end])
    if blank:
        end = rest + blank.start()
    step = Step(text[start:end].strip(), label, tool=TOOL_NAMES[language],
                query=_clean_query(text[rest:end].strip().strip("*").strip()))
    return replace(step, **_check_tool(step, language)), end


def _check_tool(step: Step, language: str) -> dict:
    """The step's canonical tool name, or its problem."""
    kind, db = tool_kind(step.tool), TOOL_NAMES[language]
    if not step.query:
        return {"problem": f"#E{step.label} has an empty query"}
    if kind is None:
        return {"problem": f"'{step.tool}' is not a tool here: every step queries the {db}"}
    if kind == "self":
        return {"problem": f"{step.tool} cannot be a step: every step runs one query on the {db}"}
    if kind != language:
        return {"problem": f"there is no {step.tool} here: the data is in the {db}, queried in "
                           f"{LANGUAGE_NAMES[language]}"}
    found = query_language(step.query)
    if found and found != language:
        return {"problem": f"the query of #E{step.label} looks like {LANGUAGE_NAMES[found]}, but the {db} only "
                           f"runs {LANGUAGE_NAMES[language]}"}
    return {"tool": db}


def _unassigned(text: str, language: str) -> list[Step]:
    """``Step N:`` lines in ``text`` that assign no result: steps without a query."""
    marks = [m for m in _MARK.finditer(text) if m.group(1)]
    steps = []
    for m, nxt in zip(marks, marks[1:] + [None], strict=False):
        body = text[m.start():nxt.start() if nxt else len(text)].strip()
        steps.append(Step(body, problem="it runs no query: write each step as '... - #EN = "
                                        f"{TOOL_NAMES[language]}[{LANGUAGE_NAMES[language]} query]'"))
    return steps


def _raw_steps(text: str, language: str) -> list[Step]:
    """The steps of a plan in the order written, each checked on its own."""
    text = re.sub(r"^[ \t]*```[\w-]*[ \t]*$", "", text, flags=re.M)
    steps, pos = [], 0
    while (m := _ASSIGN.search(text, pos)) is not None:
        before = text[pos:m.start()]
        marks = [k for k in _MARK.finditer(before) if k.group(1)]
        if len(marks) > 1:  # "Step N:" lines before the last one assign nothing
            steps += _unassigned(before[:marks[-1].start()], language)
        step, pos = _assignment(text, m.start(), language)
        steps.append(replace(step, purpose=_purpose(before[marks[-1].start():] if marks else before)))
    return steps + _unassigned(text[pos:], language)


def _rename(query: str, renamed: dict[int, int]) -> str:
    return _REF.sub(lambda m: f"{m.group(1)}#E{renamed.get(int(m.group(2)), int(m.group(2)))}{m.group(1)}", query)


def check_references(steps: list[Step], known: set[int] = frozenset()) -> list[Step]:
    """The steps with their labels made unique, and a problem where a query uses a result no earlier step (nor one
    of the ``known`` labels) gives. A label assigned again (a re-plan numbered from #E1 again, a plan reusing
    #E1) is read as a new result: the step gets the next free label, and the later steps' references to it follow
    (a reference before it still means the earlier result)."""
    seen, checked, renamed = set(known), [], {}
    free = max([*known, *(s.label for s in steps if s.label is not None)], default=0) + 1
    for step in steps:
        if renamed and step.query:
            step = replace(step, query=_rename(step.query, renamed))
        if step.label is not None and step.label in seen:
            renamed[step.label], step, free = free, replace(step, label=free), free + 1
        if step.problem is None:
            missing = [r for r in step.refs if r not in seen]
            if missing:
                step = replace(step, problem=f"#E{step.label} uses #E{missing[0]}, which no earlier step gives")
        if step.label is not None:
            seen.add(step.label)
        checked.append(step)
    return checked


def parse_plan(text: str, language: str, known: set[int] = frozenset()) -> list[Step]:
    """The steps of a plan (a reply), in order; ``known``: labels assigned by steps that ran before (a re-plan
    may use their results)."""
    return check_references(_raw_steps(text, language), known)


def parse_steps(texts: list[str], language: str, known: set[int] = frozenset()) -> list[Step]:
    """The steps of an edited plan, one text each (as ``Step.render`` wrote them); a text that holds no step is
    kept as a step with a problem."""
    steps = []
    for text in texts:
        found = _raw_steps(text, language) or [Step(text.strip(), problem="it runs no query: write it as '... - "
                                                   f"#EN = {TOOL_NAMES[language]}[query]'")]
        steps += found
    return check_references(steps, known)


def literal(value, language: str) -> str:
    """A value as a literal of the query language."""
    sql = language == "sql"
    if value is None:
        return "NULL" if sql else "null"
    if isinstance(value, bool):
        return str(value).upper() if sql else str(value).lower()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, numbers.Number):
        return str(value)
    text = str(value)
    escaped = text.replace('"', '""') if sql else text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def result_value(label: int, result: dict, language: str) -> str:
    """What ``#E<label>`` stands for in a query, from its result ``{"columns", "rows", "total_rows"}``."""
    columns, rows, total = result["columns"], result["rows"], result["total_rows"]
    if total == 0:
        raise UnusableResult(f"#E{label} has no rows")
    if len(columns) != 1:
        raise UnusableResult(f"#E{label} has {len(columns)} columns ({', '.join(columns)}); a query can only use "
                             "a result with one column (a value or a list)")
    if total > len(rows):
        raise UnusableResult(f"#E{label} has {total} rows, more than the {len(rows)} kept")
    return ", ".join(literal(row[0], language) for row in rows)


def substitute(query: str, results: dict[str, dict], language: str) -> str:
    """The query with each ``#EN`` replaced by its result (``results``: ``"EN"`` -> result). Raises
    UnusableResult."""
    return _REF.sub(lambda m: result_value(int(m.group(2)), results[f"E{m.group(2)}"], language), query)
