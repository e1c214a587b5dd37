"""Plain in-memory tables: the one data shape shared by the simulators, the importers and the backends."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

#: Column types used by the DQA schemas (as declared in the MySQL dumps).
COLUMN_TYPES = ("VARCHAR", "INT", "FLOAT", "BOOLEAN")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # one of COLUMN_TYPES


@dataclass
class Table:
    """A table in file order: declared columns, primary key and rows as tuples."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    rows: list[tuple] = field(default_factory=list)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def index(self, column: str) -> int:
        """Position of a column in each row."""
        return self.column_names.index(column)

    def column(self, column: str) -> list:
        """All values of one column, in table order."""
        i = self.index(column)
        return [r[i] for r in self.rows]

    def records(self) -> list[dict]:
        """Rows as dicts keyed by column name."""
        names = self.column_names
        return [dict(zip(names, r)) for r in self.rows]


@dataclass
class Tables:
    """The tables of one database in file order, plus notes on data defects that were repaired."""

    tables: dict[str, Table]
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Table:
        return self.tables[name]

    def __contains__(self, name: str) -> bool:
        return name in self.tables

    def __iter__(self):
        return iter(self.tables.values())

    def content_hash(self) -> str:
        """A hash of the data (names, types, rows), independent of how the file spelled it."""
        h = hashlib.sha256()
        for t in self.tables.values():
            h.update(repr((t.name, t.columns, t.primary_key)).encode())
            for r in t.rows:
                h.update(repr(r).encode())
        return h.hexdigest()
