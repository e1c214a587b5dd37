"""Evidence coverage: which database values decide a question, derived from the simulator, and which of them a run
actually saw in its observations (docs/evidence.md has the method).

A value *decides* the question when the simulator's verdict rests on it: nudging it (by +10%, or to 1 from 0)
and simulating again changes the score of the best decision or of its nearest rival (a column the simulator does not
read is not tried). The values tried are those of
the rows about the best decisions, the runner-up and the target, as the scenario's type names them (Locating: the
trade node rows, the deciding country's power there, the flows out of them and the country's development;
Building: the buildings' levels, their supply and demand rows, and the asked goods' row; a plugin: every row).
A run *saw* a value when one row it got back holds the value (equal within 1e-6 relative) together with the row's
keys (node, country, building id, goods).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

from core.model.question import Database, Question
from core.model.run_settings import RunSettings
from core.scenarios import default_mode, scenario_type
from sims.ranking import InputError, Ranking, same_score
from sims.tables import Tables
from core.analysis.trace import Trace
from core.model.events import Event
from core.scenarios import catalog
from core.scenarios.dqa.source import DQAError

NUDGE = 0.10
MAX_BEST = 3  # best decisions (of a tie group) looked at


@dataclass(frozen=True)
class Value:
    """One database cell: its table, column, the key of its row (each part a tuple of acceptable spellings,
    e.g. a goods by code or name), the value and a label such as ``trade_node.ingoing of krakow``."""

    table: str
    column: str
    key: tuple[tuple, ...]
    value: float
    label: str


@dataclass(frozen=True)
class Coverage:
    """The deciding values of a question and which a run saw."""

    values: tuple[Value, ...]
    seen: tuple[bool, ...]

    @property
    def total(self) -> int:
        return len(self.values)

    @property
    def n_seen(self) -> int:
        return sum(self.seen)

    @property
    def missing(self) -> list[str]:
        return [v.label for v, s in zip(self.values, self.seen) if not s]

    @property
    def complete(self) -> bool:
        return self.n_seen == self.total

    def text(self) -> str:
        """``the agent saw 4 of 7 values that decide this question``."""
        return f"the agent saw {self.n_seen} of {self.total} values that decide this question"

    def to_dict(self) -> dict:
        return {"evidence_total": self.total, "evidence_seen": self.n_seen, "evidence_missing": self.missing}


def _rank(question: Question, tables: Tables, mode: str) -> Ranking:
    return scenario_type(question.scenario).ranking(question, Database("nudged", question.scenario, tables, None),
                                                    mode)


def _scores(question: Question, tables: Tables, focus: list, mode: str) -> list[float]:
    """The focus candidates' scores on ``tables``."""
    return scenario_type(question.scenario).focus_scores(question, tables, focus, mode)


def _focus(ranking: Ranking) -> list:
    """The best decisions (up to MAX_BEST of the top tie group) and the runner-up, if any."""
    groups = ranking.groups()
    best = [e.candidate for e, (rank, _) in zip(ranking.entries, groups) if rank == 1][:MAX_BEST]
    rival = next((e.candidate for e, (rank, _) in zip(ranking.entries, groups) if rank > 1), None)
    return best + ([rival] if rival is not None else [])


def _rows(question: Question, tables: Tables, focus: list) -> list[tuple[str, int, tuple[tuple, ...], str]]:
    """(table, row index, key, who) of the rows worth nudging."""
    return scenario_type(question.scenario).evidence_rows(question, tables, focus)


def _nudged(tables: Tables, table: str, row: int, column: int) -> Tables | None:
    t = tables[table]
    old = t.rows[row][column]
    if isinstance(old, bool) or not isinstance(old, (int, float)):
        return None
    new = old * (1 + NUDGE) if old else 1.0
    new = type(old)(round(new)) if isinstance(old, int) and not isinstance(old, bool) else new
    if new == old:
        new = old + 1
    rows = list(t.rows)
    rows[row] = rows[row][:column] + (new,) + rows[row][column + 1:]
    return Tables({**tables.tables, table: replace(t, rows=rows)}, tables.notes)


_CACHE: dict[tuple, tuple[Value, ...]] = {}
_LOCK = threading.Lock()


def deciding_values(question: Question, database: Database, mode: str | None = None) -> tuple[Value, ...]:
    """The database values the question's best decision depends on, by the simulator (cached per question)."""
    key = (question, database.key, mode or default_mode(question))
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = tuple(_derive(question, database, key[2]))
        return _CACHE[key]


def _derive(question: Question, database: Database, mode: str) -> list[Value]:
    tables = database.tables
    try:
        ranking = _rank(question, tables, mode)
    except InputError:  # no simulator: nothing decides
        return []
    focus = _focus(ranking)
    if not focus:
        return []
    before = [ranking.score_of(c) for c in focus]
    reads = scenario_type(question.scenario).reads()
    values = []
    for table, row, key, who in _rows(question, tables, focus):
        t = tables[table]
        for column, name in enumerate(t.column_names):
            if name in t.primary_key or (reads is not None and name not in reads.get(table, ())):
                continue
            nudged = _nudged(tables, table, row, column)
            if nudged is None:
                continue
            try:
                changed = any(not same_score(b, a) for b, a in zip(before, _scores(question, nudged, focus, mode)))
            except (ValueError, KeyError, ZeroDivisionError, InputError):
                changed = False
            if changed:
                values.append(Value(table, name, key, float(t.rows[row][column]), f"{table}.{name} of {who}"))
    return values


def _same(a, b) -> bool:
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)


def _cells(row) -> list:
    cells = []
    for c in row:
        if isinstance(c, dict):
            cells += list(c.values())
        elif isinstance(c, (list, tuple)):
            cells += list(c)
        else:
            cells.append(c)
    return cells


def _holds(row: list, value: Value) -> bool:
    texts = {str(c).strip().lower() for c in row if isinstance(c, str)}
    ints = {c for c in row if isinstance(c, int) and not isinstance(c, bool)}

    def has(spellings) -> bool:
        return any((isinstance(s, str) and s.lower() in texts)
                   or (isinstance(s, int) and (s in ints or str(s) in texts)) for s in spellings)

    if not all(has(part) for part in value.key):
        return False
    return any(_same(c, value.value) for c in row if not isinstance(c, (str, bool)) and c is not None)


def coverage(values: tuple[Value, ...], events: list[Event] | Trace) -> Coverage:
    """Which deciding values appear in the rows a run's database queries returned (its typed events, or their
    fold)."""
    trace = events if isinstance(events, Trace) else Trace.of(events)
    rows = [_cells(r) for r in trace.rows]
    return Coverage(tuple(values), tuple(any(_holds(r, v) for r in rows) for v in values))


def run_coverage(question: Question, database: Database, events: list[Event] | Trace) -> Coverage:
    """The evidence coverage of a run on ``question``."""
    return coverage(deciding_values(question, database), events)


def of_run(settings: RunSettings, events: list[Event] | Trace, root=None) -> Coverage | None:
    """The evidence coverage of a stored run (its settings and events), None when its question cannot be
    loaded or ranked."""

    try:
        question = catalog.question(settings.source, settings.scenario, settings.question, root)
        return run_coverage(question, catalog.database(question, root), events)
    except (DQAError, ValueError, KeyError):
        return None


def values_table(values: tuple[Value, ...], seen: tuple[bool, ...] | None = None):
    """The deciding values as a table (value, table, column; ``seen`` by a run when given)."""
    import pandas as pd

    rows = [{"value": v.label, "table": v.table, "column": v.column, "stored": v.value} for v in values]
    if seen is not None:
        for row, s in zip(rows, seen):
            row["seen by the run"] = s
    return pd.DataFrame(rows)
