"""The result store of a benchmark: one row per finished item (question, database, technique, model), written
as the item finishes, in ``results.sqlite`` under the benchmark's directory; and the parameters the results
were made with, so a rerun with other parameters does not mix with them."""
from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from core.benchmark.items import BenchError, Item

FILE = "results.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, scenario TEXT, question INTEGER, db TEXT,
    technique TEXT, model TEXT, status TEXT, correct INTEGER, finished REAL, data TEXT);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT);
"""


class ResultStore:
    """Results by item key. Writes go through one connection (thread-safe); each is committed at once, so a
    killed process keeps every finished item."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / FILE
        self._lock = threading.Lock()
        self._con = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        self._con.execute("PRAGMA journal_mode = WAL")
        self._con.execute("PRAGMA synchronous = NORMAL")
        self._con.executescript(_SCHEMA)

    def close(self) -> None:
        self._con.close()

    def check_params(self, params: dict) -> None:
        """Record the run parameters (temperature, limits, ...) on first use; BenchError if the stored results
        were made with others."""
        text = json.dumps(params, sort_keys=True)
        with self._lock:
            row = self._con.execute("SELECT value FROM meta WHERE name = 'params'").fetchone()
            if row is None:
                self._con.execute("INSERT INTO meta VALUES ('params', ?)", (text,))
                return
        stored = json.loads(row[0])
        if stored != json.loads(text):
            changed = ", ".join(f"{k} {stored.get(k)!r} -> {params.get(k)!r}" for k in sorted(set(stored) | set(params))
                                if stored.get(k) != params.get(k))
            raise BenchError(f"the results in {self.directory} were made with other parameters ({changed}); "
                             "use another --out (or --name) for these")

    def put(self, result: dict) -> None:
        """Store a finished item's result (see core.benchmark.runner for its fields)."""
        item = Item(result["scenario"], result["question"], result["db"], result["technique"], result["model"])
        correct = None if result.get("correct") is None else int(result["correct"])
        with self._lock:
            self._con.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              (item.key, item.scenario, item.question, item.db, item.technique, item.model,
                               result["status"], correct, result["finished"], json.dumps(result, default=str)))

    def done(self) -> set[str]:
        """The keys of the stored items."""
        with self._lock:
            return {k for (k,) in self._con.execute("SELECT key FROM results")}


def read_results(directory: str | Path, keys: set[str] | None = None) -> list[dict]:
    """The stored results of a benchmark directory (all, or those of ``keys``), in scenario, question, database,
    technique order; [] when it has none."""
    path = Path(directory) / FILE
    if not path.exists():
        return []
    con = sqlite3.connect(path, timeout=30)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'results'").fetchone():
            return []  # a store another process is creating right now
        rows = con.execute("SELECT key, data FROM results ORDER BY scenario, question, db, technique, model").fetchall()
    finally:
        con.close()
    return [json.loads(data) for key, data in rows if keys is None or key in keys]
