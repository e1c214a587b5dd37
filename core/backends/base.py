"""The one small interface every database backend implements, its result type and its typed errors."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

#: Default bounds on every agent query.
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_ROW_CAP = 200


_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)\n?[ \t]*```", re.S)


def unfence(text: str) -> str:
    """An agent's query without surrounding whitespace and the markdown code fence it may be wrapped in."""
    text = text.strip()
    fenced = _FENCE.fullmatch(text)
    return fenced.group(1).strip() if fenced else text


class QueryError(Exception):
    """A query that could not give rows. The message is meant for the agent and the analyst."""

    kind = "error"


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

    def as_json(self) -> dict:
        return {"columns": self.columns, "rows": self.rows}

    def to_text(self, max_rows: int = 50, max_chars: int = 4000) -> str:
        """A compact rendering for an LLM: a header line, one line per row, and a note on cut rows."""
        return render_rows(self.columns, self.rows, self.total_rows, max_rows, max_chars)


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
    lines = [" | ".join(columns)]
    size = len(lines[0])
    shown = 0
    for r in rows[:max_rows]:
        line = " | ".join(_cell(v) for v in r)
        if size + len(line) + 1 > max_chars and shown:
            break
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
