"""The run store: every run's settings, events and outcome, in one SQLite file (default
``DATA_HOME/runs.sqlite``), for the History page, the benchmark and exports.

Events are appended as the agent emits them, so a run that stopped half-way keeps its trace. The store never
holds an API key: RunSettings has none. Safe to use from several threads (one connection per thread).
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.settings import DATA_HOME

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, created REAL, updated REAL, status TEXT,
    scenario TEXT, question INTEGER, db TEXT, technique TEXT, llm TEXT, hitl TEXT,
    settings TEXT, pause TEXT, outcome TEXT, decision TEXT, correct INTEGER);
CREATE TABLE IF NOT EXISTS events (run_id TEXT, seq INTEGER, kind TEXT, data TEXT, PRIMARY KEY (run_id, seq));
CREATE INDEX IF NOT EXISTS runs_by_question ON runs (scenario, question);
"""
#: list() filters: keyword -> column
FILTERS = ("status", "scenario", "question", "db", "technique", "llm", "hitl", "correct")


@dataclass
class RunRecord:
    """One stored run. ``events`` is filled by ``get`` (as dicts, see core.agents.events.event_from_dict)."""

    id: str
    created: float
    updated: float
    status: str  # running | paused | finished | failed
    settings: dict
    pause: dict | None = None
    outcome: dict | None = None
    events: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"id": self.id, "created": self.created, "updated": self.updated, "status": self.status,
                "settings": self.settings, "pause": self.pause, "outcome": self.outcome, "events": self.events}


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def _load(text: str | None):
    return None if text is None else json.loads(text)


class RunStore:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else DATA_HOME / "runs.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        con = self._connect()
        con.execute("PRAGMA journal_mode = WAL")
        con.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use and kept (reopening per operation costs a WAL
        checkpoint each time). ``with`` on it commits, or rolls back on error."""
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = sqlite3.connect(self.path, timeout=30)
            con.execute("PRAGMA synchronous = NORMAL")  # durable across a process crash in WAL mode
        return con

    def create(self, run_id: str, settings: dict) -> None:
        """Record a new run (status ``running``) with its settings."""
        now = time.time()
        with self._connect() as con:
            con.execute("INSERT INTO runs (id, created, updated, status, scenario, question, db, technique, llm, "
                        "hitl, settings) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                        (run_id, now, now, settings.get("scenario"), settings.get("question"), settings.get("db"),
                         settings.get("technique"), settings.get("llm"), settings.get("hitl"), _json(settings)))

    def add_event(self, run_id: str, event: dict) -> None:
        """Append one event (as ``Event.to_dict()`` gives it)."""
        with self._connect() as con:
            con.execute("INSERT INTO events (run_id, seq, kind, data) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ? "
                        "FROM events WHERE run_id = ?", (run_id, event["kind"], _json(event), run_id))

    def update(self, run_id: str, status: str, *, pause: dict | None = None, outcome: dict | None = None) -> None:
        """Set the run's status, its pause (None clears it) and, once it ended, its outcome."""
        decision = None if not outcome or outcome.get("decision") is None else str(outcome["decision"])
        correct = None if not outcome or outcome.get("correct") is None else int(outcome["correct"])
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, updated = ?, pause = ?, outcome = COALESCE(?, outcome), "
                        "decision = COALESCE(?, decision), correct = COALESCE(?, correct) WHERE id = ?",
                        (status, time.time(), _json(pause), _json(outcome), decision, correct, run_id))

    def get(self, run_id: str, events: bool = True) -> RunRecord:
        """The run with its events (``events=False``: without them, for its settings, status or outcome);
        KeyError if there is none."""
        with self._connect() as con:
            row = con.execute("SELECT id, created, updated, status, settings, pause, outcome FROM runs WHERE id = ?",
                              (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.path}")
            kept = [json.loads(d) for (d,) in con.execute("SELECT data FROM events WHERE run_id = ? ORDER BY seq",
                                                          (run_id,))] if events else []
        return RunRecord(row[0], row[1], row[2], row[3], _load(row[4]), _load(row[5]), _load(row[6]), kept)

    def list(self, limit: int | None = 200, **filters) -> list[RunRecord]:
        """Runs, newest first, without their events; ``filters`` on any of FILTERS, e.g.
        ``list(scenario="locating", technique="planrag", correct=True)``."""
        unknown = set(filters) - set(FILTERS)
        if unknown:
            raise ValueError(f"cannot filter runs on {', '.join(sorted(unknown))}; use {', '.join(FILTERS)}")
        where = [(k, int(v) if isinstance(v, bool) else v) for k, v in filters.items() if v is not None]
        sql = "SELECT id, created, updated, status, settings, pause, outcome FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(f"{k} = ?" for k, _ in where)
        sql += " ORDER BY created DESC" + (f" LIMIT {int(limit)}" if limit else "")
        with self._connect() as con:
            rows = con.execute(sql, [v for _, v in where]).fetchall()
        return [RunRecord(r[0], r[1], r[2], r[3], _load(r[4]), _load(r[5]), _load(r[6])) for r in rows]

    def export(self, run_ids: list[str] | None = None, **filters) -> list[dict]:
        """Runs with their events as JSON-ready dicts: the given ids, or those ``list`` finds with ``filters``."""
        ids = run_ids if run_ids is not None else [r.id for r in self.list(limit=None, **filters)]
        return [self.get(i).to_dict() for i in ids]

    def export_json(self, path: str | Path, run_ids: list[str] | None = None, **filters) -> int:
        """Write ``export(...)`` to a JSON file; returns the number of runs written."""
        runs = self.export(run_ids, **filters)
        Path(path).write_text(json.dumps(runs, indent=1, default=str), encoding="utf-8")
        return len(runs)

    def delete(self, run_id: str) -> None:
        with self._connect() as con:
            con.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM runs WHERE id = ?", (run_id,))
