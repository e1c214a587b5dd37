"""Parse a database dump in the DQA SQL format (MySQL dialect, one statement a line) into Tables.

The format: ``CREATE TABLE name( col TYPE, ..., PRIMARY KEY (...));`` statements, then one
``INSERT INTO name(cols) VALUES (...);`` a line with double-quoted strings, numbers and TRUE/FALSE.
Numbers are read with Python's ``float``/``int``, which round-trip the files' ``repr`` output exactly.

Defect rule: a column spelled ``has_has_merchant`` (left in some DQA files by a text substitution)
is read as ``has_merchant``, in CREATE TABLE and INSERT alike, and a note says so. Every row is kept.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sims.files import read_text
from sims.tables import Column, Table, Tables

#: Misspelled column names and the name they are read as.
COLUMN_ALIASES = {"has_has_merchant": "has_merchant"}

_CREATE = re.compile(r"^\s*CREATE\s+TABLE\s+(\w+)\s*\((.*)\)\s*;\s*$", re.I | re.S)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\s*\(([^)]*)\)\s*VALUES\s*\((.*)\)\s*;\s*$", re.I | re.S)
_VALUE = re.compile(
    r'\s*(?:"((?:[^"\\]|\\.|"")*)"|(TRUE|FALSE|NULL)|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))\s*(,|$)',
    re.I,
)
_TYPES = {"VARCHAR": "VARCHAR", "CHAR": "VARCHAR", "TEXT": "VARCHAR", "INT": "INT", "INTEGER": "INT",
          "BIGINT": "INT", "FLOAT": "FLOAT", "DOUBLE": "FLOAT", "REAL": "FLOAT", "BOOLEAN": "BOOLEAN",
          "BOOL": "BOOLEAN", "TINYINT": "BOOLEAN"}


class DumpError(ValueError):
    """A dump file that cannot be read; the message names the file and line."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(f"{source}, line {line}: {message}")
        self.source, self.line, self.reason = source, line, message


def _column_name(name: str, source: str, line: int, notes: list[str], table: str) -> str:
    canonical = COLUMN_ALIASES.get(name.lower(), name.lower())
    if canonical != name.lower():
        note = f"{table}.{name} read as {table}.{canonical}"
        if note not in notes:
            notes.append(note)
    return canonical


def _parse_create(m: re.Match, source: str, line: int, notes: list[str]) -> Table:
    name, body = m.group(1).lower(), m.group(2)
    columns: list[Column] = []
    primary_key: tuple[str, ...] = ()
    for part in re.split(r",(?![^()]*\))", body):
        part = part.strip()
        if not part:
            continue
        pk = re.match(r"PRIMARY\s+KEY\s*\(([^)]*)\)", part, re.I)
        if pk:
            primary_key = tuple(_column_name(c.strip(), source, line, notes, name) for c in pk.group(1).split(","))
            continue
        cm = re.match(r"(\w+)\s+(\w+)", part)
        if not cm or cm.group(2).upper() not in _TYPES:
            raise DumpError(source, line, f"cannot read column definition {part!r} of table {name}")
        columns.append(Column(_column_name(cm.group(1), source, line, notes, name), _TYPES[cm.group(2).upper()]))
    return Table(name, tuple(columns), primary_key)


def _unescape(text: str) -> str:
    if "\\" not in text and '""' not in text:
        return text
    return text.replace('\\"', '"').replace('""', '"').replace("\\\\", "\\")


def _convert(text: str | None, keyword: str | None, number: str | None, col: Column, source: str, line: int):
    if text is not None:
        if col.type != "VARCHAR":
            raise DumpError(source, line, f"string {text!r} in {col.type} column {col.name}")
        return _unescape(text)
    if keyword is not None:
        k = keyword.upper()
        if k == "NULL":
            return None
        if col.type != "BOOLEAN":
            raise DumpError(source, line, f"{k} in {col.type} column {col.name}")
        return k == "TRUE"
    if col.type == "INT":
        try:
            return int(number)
        except ValueError:
            raise DumpError(source, line, f"{number} is not an integer (column {col.name})") from None
    if col.type == "FLOAT":
        return float(number)
    if col.type == "BOOLEAN":
        return float(number) != 0
    raise DumpError(source, line, f"number {number} in {col.type} column {col.name}")


def _parse_values(text: str, source: str, line: int) -> list[tuple]:
    out, pos = [], 0
    while True:
        m = _VALUE.match(text, pos)
        if not m:
            raise DumpError(source, line, f"cannot read value at {text[pos:pos + 30]!r}")
        out.append(m.groups()[:3])
        pos = m.end()
        if m.group(4) == "":
            if pos != len(text):
                raise DumpError(source, line, f"unexpected text {text[pos:pos + 30]!r}")
            return out


# One value of a known column type, as the alternative of _VALUE that this type accepts without
# conversion errors. Alternatives differ in their first character, so where this matches, _VALUE
# matches the same text the same way; an atomic group commits to that match as _VALUE.match does.
_TYPED_VALUE = {
    "VARCHAR": r'"((?:[^"\\]|\\.|"")*)"',
    "BOOLEAN": r"(TRUE|FALSE)",
    "INT": r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)",
    "FLOAT": r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)",
}
_TYPED_CONVERT = {"VARCHAR": _unescape, "BOOLEAN": lambda s: s.upper() == "TRUE", "INT": int,
                  "FLOAT": float}


@dataclass(frozen=True)
class _InsertPlan:
    """How to turn the values of one INSERT spelling (table, column list) into a row in column order."""

    table: Table
    columns: tuple[str, ...]
    order: list[int]  # for each table column, its position in the INSERT
    typed: re.Pattern  # the whole value list when every value has its column's type
    converters: tuple  # per INSERT position, the conversion of a typed value
    reorder: Callable[[tuple], tuple] | None  # INSERT order -> table order; None if they are the same


def _insert_plan(m: re.Match, tables: dict[str, Table], notes: list[str], source: str, line: int) -> _InsertPlan:
    name = m.group(1).lower()
    table = tables.get(name)
    if table is None:
        raise DumpError(source, line, f"INSERT into unknown table {name}")
    cols = tuple(_column_name(c.strip(), source, line, notes, name) for c in m.group(2).split(","))
    try:
        order = [cols.index(c) for c in table.column_names]
    except ValueError:
        missing = sorted(set(table.column_names) - set(cols))
        raise DumpError(source, line, f"INSERT into {name} lacks columns {missing}") from None
    if len(cols) != len(table.columns):
        raise DumpError(source, line, f"INSERT into {name} names unknown columns {cols}")
    types = [table.columns[order.index(i)].type for i in range(len(cols))]
    typed = "".join(rf"(?>\s*{_TYPED_VALUE[t]}\s*(?:,|$))" for t in types) + r"(?<!,)\Z"
    reorder = None if order == sorted(order) else operator.itemgetter(*order)
    return _InsertPlan(table, cols, order, re.compile(typed, re.I), tuple(_TYPED_CONVERT[t] for t in types), reorder)


def _row(plan: _InsertPlan, text: str, source: str, line: int) -> tuple:
    """The row of one INSERT's value list: a fast path for values of their columns' types, else the
    checking reader (which raises the DumpError)."""
    match = plan.typed.match(text)
    if match:
        try:
            values = tuple(map(operator.call, plan.converters, match.groups()))
            return values if plan.reorder is None else plan.reorder(values)
        except ValueError:  # e.g. 1.5 in an INT column: let the checking reader report it
            pass
    values = _parse_values(text, source, line)
    if len(values) != len(plan.columns):
        raise DumpError(source, line, f"{len(values)} values for {len(plan.columns)} columns of {plan.table.name}")
    return tuple(_convert(*values[i], col, source, line) for col, i in zip(plan.table.columns, plan.order))


def parse_sql_dump(text: str, source: str = "<dump>") -> Tables:
    """Parse a DQA-format SQL dump. Raises DumpError naming ``source`` and the line on any defect."""
    tables: dict[str, Table] = {}
    notes: list[str] = []
    plans: dict[tuple[str, str], _InsertPlan] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("--"):
            continue
        if stripped[:6].upper() == "INSERT":
            m = _INSERT.match(stripped)
            if not m:
                raise DumpError(source, lineno, "malformed INSERT statement (truncated line?)")
            key = (m.group(1), m.group(2))
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = _insert_plan(m, tables, notes, source, lineno)
            plan.table.rows.append(_row(plan, m.group(3), source, lineno))
        elif stripped[:6].upper() == "CREATE":
            m = _CREATE.match(stripped)
            if not m:
                raise DumpError(source, lineno, "malformed CREATE TABLE statement")
            table = _parse_create(m, source, lineno, notes)
            if table.name in tables:
                raise DumpError(source, lineno, f"table {table.name} created twice")
            tables[table.name] = table
        else:
            raise DumpError(source, lineno, f"unexpected statement {stripped[:40]!r}")
    if not tables:
        raise DumpError(source, 1, "no CREATE TABLE statement: not a DQA SQL dump")
    return Tables(tables, notes)


def read_sql_dump(path: str | Path) -> Tables:
    """Read and parse a DQA-format SQL dump file."""
    path = Path(path)
    try:
        text = read_text(path, "database dump")
    except UnicodeDecodeError as e:
        raise DumpError(str(path), text_line(path, e.start), "not UTF-8 text") from None
    return parse_sql_dump(text, str(path))


def text_line(path: Path, offset: int) -> int:
    """1-based line number of a byte offset in a file."""
    return path.read_bytes()[:offset].count(b"\n") + 1
