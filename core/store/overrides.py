"""Grade overrides: an analyst's reading of a run's answer that replaces the automatic grade, stored with who
made it and when (``overrides.sqlite`` under DATA_HOME, or the team store), keyed by run id so the Run, History and Benchmark views
and the reports all see it. The automatic grade stays in the run's outcome; an override is shown as such."""
from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from core.config import settings as core_settings
from core.model.grade import Override
from core.model.outcome import RunOutcome
from core.store.database import Database, is_url, location, upsert

FILE = "overrides.sqlite"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS overrides (run_id TEXT PRIMARY KEY, decision TEXT, correct INTEGER, "
           "by TEXT, at REAL, note TEXT, placement TEXT)")


def _set_up(con: sqlite3.Connection) -> None:
    con.execute(_SCHEMA)
    if "placement" not in {row[1] for row in con.execute("PRAGMA table_info(overrides)")}:  # an older file
        con.execute("ALTER TABLE overrides ADD COLUMN placement TEXT")
    con.commit()


class OverrideStore:
    """Overrides by run id, in ``home`` (default DATA_HOME), or in the team store (core.store.database)."""

    _COLUMNS = ("run_id", "decision", "correct", "by", "at", "note", "placement")

    def __init__(self, home: str | Path | None = None):
        home = Path(home or core_settings.DATA_HOME)
        self.path = home / FILE
        target = location(self.path)
        if not is_url(target):
            home.mkdir(parents=True, exist_ok=True)
        self.db = Database(target, "grade override store", _set_up)

    def put(self, run_id: str, override: Override) -> None:
        """Store (or replace) the override of a run."""
        with self.db.transaction() as con:
            con.execute(upsert("overrides", self._COLUMNS, ("run_id",)),
                        (run_id, json.dumps(override.decision), None if override.correct is None else
                         int(override.correct), override.by, override.at, override.note,
                         None if override.placement is None else json.dumps(override.placement)))

    def clear(self, run_id: str) -> bool:
        """Remove a run's override; whether there was one."""
        with self.db.transaction() as con:
            return con.execute("DELETE FROM overrides WHERE run_id = ?", (run_id,)).rowcount > 0

    def get(self, run_id: str) -> Override | None:
        """The run's override, None without one."""
        return self.all([run_id]).get(run_id)

    def all(self, run_ids: list[str] | None = None) -> dict[str, Override]:
        """Every override (or those of ``run_ids``), by run id."""
        rows = self.db.rows("SELECT run_id, decision, correct, by, at, note, placement FROM overrides")
        wanted = None if run_ids is None else set(run_ids)
        return {r: Override(json.loads(d), None if c is None else bool(c), by, at, note or "",
                            None if p is None else json.loads(p))
                for r, d, c, by, at, note, p in rows if wanted is None or r in wanted}


def with_override(outcome: RunOutcome | None, override: Override | None) -> RunOutcome | None:
    """A run's outcome as every view reads it: with the analyst's override (if any) as its decision, correctness
    and place in the simulator's ranking (the automatic grade stays in the stored outcome)."""
    if override is None:
        return outcome
    o = outcome or RunOutcome()
    changed = override.decision != o.decision
    return replace(o, decision=override.decision, correct=override.correct,
                   placement=override.placement if changed else o.placement)


def apply(results: list[dict], overrides: dict[str, Override]) -> list[dict]:
    """Benchmark results with their runs' overrides applied: ``decision`` and ``correct`` replaced, the automatic
    ones kept as ``auto_decision`` / ``auto_correct``, ``overridden`` True with ``override_by`` and ``override_at``
    (ISO time). A changed decision takes the rank and regret the override placed it at (cleared for an override
    stored before placements were)."""
    from datetime import datetime, timezone

    out = []
    for r in results:
        o = overrides.get(r.get("run_id"))
        if o is None:
            out.append(r)
            continue
        changed = o.decision != r.get("decision")
        r = {**r, "auto_decision": r.get("decision"), "auto_correct": r.get("correct"), "decision": o.decision,
             "correct": o.correct, "overridden": True, "override_by": o.by, "override_note": o.note,
             "override_at": datetime.fromtimestamp(o.at, timezone.utc).isoformat(timespec="seconds"),
             "grade_status": "decided" if o.decision is not None else "none",
             "grade_reason": f"overridden by {o.by}" + (f": {o.note}" if o.note else "")}
        if changed:  # the analyst's decision's place in the simulator's ranking (unknown for an old override)
            p = o.placement or {}
            r.update(rank=p.get("rank"), tied=p.get("tied"), regret=p.get("regret"),
                     relative_regret=p.get("relative_regret"), optimal=p.get("regret") == 0 if p else None)
        out.append(r)
    return out

