"""The one small interface every database backend implements, its result type and its typed errors."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from core.model.run_settings import DEFAULT_CELL_CHARS, MAX_CELL_CHARS  # noqa: F401 (the backends' cell caps)

#: Default bounds on every agent query.
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_ROW_CAP = 200
#: What reaches a parser or translator: longer or more deeply bracketed queries are refused before any parser
#: sees them (sqlglot and the Cypher rewrite recurse per bracket level; Ladybug's parser crashes at ~800).
MAX_QUERY_CHARS = 20_000
MAX_NESTING = 20
#: Characters of one cell, and of all the cells of one result, kept (and stored, and shown to the model); what is
#: cut is marked. The run's own ``Limits.cell_chars`` may be lower.
MAX_RESULT_CHARS = 200_000
CUT_MARK = "…[cut: {n:,} characters in all]"
#: Characters of one error message, one column name and one note kept where they are made (an engine's error may
#: quote a huge value; an alias may be as long as the query); what is cut is marked.
MAX_ERROR_CHARS = 2000
MAX_NAME_CHARS = 200
MAX_NOTE_CHARS = 1000
_CUT = re.compile(r"…\[cut: (?:[\d,]+ characters in all|a longer list or map)\]$")


_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.S)


def cap_text(text: str, chars: int) -> str:
    """``text`` when it fits in ``chars`` characters; else its first ``chars`` characters and the cut's mark
    (the mark of an earlier cut kept, with the length in all)."""
    return cap_cell(text, chars)


def unfence(text: str) -> str:
    """An agent's query without surrounding whitespace and the markdown code fence it may be wrapped in."""
    text = text.strip()
    fenced = _FENCE.fullmatch(text)
    return fenced.group(1).strip() if fenced else text


def check_size(text: str) -> None:
    """Refuse a query longer than MAX_QUERY_CHARS (QuerySyntaxError), before any parser sees it."""
    if len(text) > MAX_QUERY_CHARS:
        raise QuerySyntaxError(f"the query is {len(text):,} characters long; at most {MAX_QUERY_CHARS:,} are "
                               "accepted: send a shorter query")


def check_nesting(brackets) -> None:
    """Refuse a query whose brackets (the bracket characters of its tokens, in order: strings and comments left
    out) nest deeper than MAX_NESTING (QuerySyntaxError)."""
    depth = 0
    for b in brackets:
        if b in "([{":
            depth += 1
            if depth > MAX_NESTING:
                raise QuerySyntaxError(f"the query nests brackets more than {MAX_NESTING} deep; flatten it (a "
                                       "WITH step, a subquery fewer, or simpler expressions)")
        elif b in ")]}":
            depth = max(depth - 1, 0)  # a stray closing bracket does not buy depth for later ones


def too_complex() -> QuerySyntaxError:
    """The error for a query whose parsing or translation ran out of recursion depth."""
    return QuerySyntaxError("the query is too deeply nested to be read (long chains of operators or brackets); "
                            "write it more simply")


class QueryError(Exception):
    """A query that could not give rows. The message is meant for the agent and the analyst: it is cut to
    MAX_ERROR_CHARS characters (marked) when the error is made, as an engine's message may quote a huge value.
    ``executed``: the query as run, shown to the analyst only (the agent is told of its own query)."""

    kind = "error"
    engine_message: str | None = None  # what the engine itself said, where the backend's message is its own

    def __init__(self, message: object = "", executed: str = ""):
        super().__init__(cap_text(str(message), MAX_ERROR_CHARS))
        self.executed = executed  # the query as the engine ran it (after dialect translation), for the analyst


class RefusedWrite(QueryError):
    """The query tried to change data or schema; the connection is read-only."""

    kind = "refused"


class QueryTimeout(QueryError):
    """The query ran past its time limit and was stopped."""

    kind = "timeout"


class QuerySyntaxError(QueryError):
    """The query is not valid in the backend's language (or cannot be translated to it)."""

    kind = "syntax"


class BackendUnavailable(QueryError):
    """The server or engine cannot be reached or is not installed."""

    kind = "unavailable"


@dataclass
class QueryResult:
    """Rows of one query, capped at ``row_cap``; ``total_rows`` counts all rows the query gave."""

    columns: list[str]
    rows: list[list]
    total_rows: int
    elapsed_s: float
    executed: str = ""  # the query as the engine ran it (after dialect translation)
    notes: list[str] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.total_rows > len(self.rows)

    def capped(self, cell_chars: int = DEFAULT_CELL_CHARS, result_chars: int = MAX_RESULT_CHARS) -> QueryResult:
        """This result cut to its limits, each cut marked and noted: column names to MAX_NAME_CHARS (less for a
        very wide result), cells to ``cell_chars``, the rows to ``result_chars`` characters in all, notes to
        MAX_NOTE_CHARS and the executed query to twice MAX_QUERY_CHARS."""
        name_chars = min(MAX_NAME_CHARS, cell_chars, max(result_chars // (4 * len(self.columns) or 1), 40))
        columns = [cap_text(str(c), name_chars) for c in self.columns]
        rows, size, cut = [], 0, 0
        for row in self.rows:
            if size > result_chars:
                break
            kept = []
            for v in row:  # a row wider than what is left is cut too (the first row included)
                kept.append(cap_cell(v, max(min(cell_chars, result_chars - size), 0)))
                size += len(kept[-1]) if isinstance(kept[-1], str) else 16
            cut += sum(a is not b for a, b in zip(kept, row))
            rows.append(kept)
        notes = [cap_text(str(n), MAX_NOTE_CHARS) for n in self.notes[:20]]
        executed = cap_text(self.executed, 2 * MAX_QUERY_CHARS)
        named = sum(a != b for a, b in zip(columns, self.columns))
        if named:
            notes.append(f"{named} column name(s) longer than {name_chars:,} characters were cut (marked …[cut: …])")
        if cut:
            notes.append(f"{cut} cell(s) longer than {cell_chars:,} characters were cut (marked …[cut: …])")
        if len(rows) < len(self.rows):
            notes.append(f"only the first {len(rows)} rows were kept: the result is longer than "
                         f"{result_chars:,} characters")
        if (not cut and not named and len(rows) == len(self.rows) and notes == self.notes
                and executed is self.executed):
            return self
        return QueryResult(columns, rows, self.total_rows, self.elapsed_s, executed, notes)

    def as_json(self) -> dict:
        return {"columns": self.columns, "rows": self.rows}

    def to_text(self, max_rows: int = 50, max_chars: int = 4000) -> str:
        """A compact rendering for an LLM: a header line, one line per row, and a note on cut rows."""
        return render_rows(self.columns, self.rows, self.total_rows, max_rows, max_chars)


class RowKeeper:
    """A server's result as its rows stream in: the first ``row_cap`` rows, each value converted and cut to
    MAX_CELL_CHARS, kept only while they hold less than twice MAX_RESULT_CHARS (``QueryResult.capped`` cuts further
    and says so), and the count of all rows, so that wide cells never pile up in this process."""

    def __init__(self, row_cap: int, convert=lambda v: v):
        self.rows: list[list] = []
        self.total = self._size = 0
        self._row_cap, self._convert = row_cap, convert

    def add(self, row) -> None:
        if self.total < self._row_cap and self._size < 2 * MAX_RESULT_CHARS:
            kept = [cap_cell(self._convert(v), MAX_CELL_CHARS) for v in row]
            self._size += sum(16 if v is None or isinstance(v, (bool, int, float)) else len(str(v)) for v in kept)
            self.rows.append(kept)
        self.total += 1


def cap_cell(v, chars: int):
    """``v`` itself when its text fits in ``chars`` characters; else its text cut there and marked (a long string,
    bytes, or a list or map of the graph backends)."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        if len(v) <= chars:
            return v
        earlier = _CUT.search(v, len(v) - 60)  # cut before (by the worker): keep its mark, the length in all
        return v[:min(chars, earlier.start()) if earlier else chars] + (earlier.group() if earlier else
                                                                          CUT_MARK.format(n=len(v)))
    if isinstance(v, (bytes, bytearray)):
        n = len(v) * 2 + 3  # as x'hex'
        return v if n <= chars else ("x'" + v[:chars // 2].hex())[:chars] + CUT_MARK.format(n=n)
    text = _bounded_text(v, chars + 1)
    return v if len(text) <= chars else text[:chars] + "…[cut: a longer list or map]"


class _Sym(str):
    """Punctuation in ``_bounded_text``'s work list (told apart from string values)."""


def _bounded_text(v, limit: int) -> str:
    """The text of a nested value (lists, maps, scalars), built only up to about ``limit`` characters, so that a
    huge value costs no more than its first ``limit`` characters."""
    parts, size, todo = [], 0, [v]
    while todo and size <= limit:
        x = todo.pop()
        if isinstance(x, (list, tuple, dict)):
            items = list(x.items()) if isinstance(x, dict) else [(None, item) for item in x]
            todo.append(_Sym("}" if isinstance(x, dict) else "]"))
            for i, (key, item) in enumerate(reversed(items)):
                todo.append(item)
                if key is not None:
                    todo.append(_Sym(f"{key}: "))
                if i < len(items) - 1:
                    todo.append(_Sym(", "))
            x = _Sym("{" if isinstance(x, dict) else "[")
        text = x if isinstance(x, _Sym) else repr(x) if isinstance(x, str) else _cell(x)
        parts.append(text)
        size += len(text)
    return "".join(parts)


def _cell(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def render_rows(columns: list[str], rows: list[list], total_rows: int, max_rows: int = 50,
                max_chars: int = 4000) -> str:
    """Render rows as ``col | col`` lines, stopping at ``max_rows`` or ``max_chars``, saying what was left out."""
    if not columns:
        return "(no result)"
    lines = [cap_text(" | ".join(columns), max(max_chars // 2, 1))]  # room for rows under a long header
    size = len(lines[0])
    shown = 0
    for r in rows[:max_rows]:
        line = " | ".join(_cell(v) for v in r)
        if size + len(line) + 1 > max_chars and shown:
            break
        if size + len(line) + 1 > max_chars:  # a first row longer than the whole budget: its start, marked
            line = line[:max(max_chars - size - 1, 0)] + CUT_MARK.format(n=len(line))
        lines.append(line)
        size += len(line) + 1
        shown += 1
    if total_rows == 0:
        lines.append("(0 rows)")
    elif shown < total_rows:
        lines.append(f"... {total_rows - shown} more rows not shown ({total_rows} rows in all); "
                     "narrow the query (WHERE, ORDER BY ... LIMIT, aggregates).")
    return "\n".join(lines)


class Backend(Protocol):
    """A question's database, loaded and opened read-only for agent queries."""

    name: str  # "sqlite" | "mysql" | "ladybug" | "neo4j"
    language: str  # "sql" | "cypher"

    def schema_text(self) -> str:
        """The schema as text for prompts (MySQL CREATE TABLEs, or Cypher node/relationship patterns)."""

    def query(self, text: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
        """Run one read-only query. Raises a QueryError subclass when it gives no rows."""

    def close(self) -> None:
        """Release the connection and any temporary files."""

    # Optional: ``cancel()`` stops the query running now from another thread (the analyst's Stop), best effort;
    # a backend without it lets an abandoned query end by its own timeout.
