"""The run store: every run's settings, events and outcome, in one SQLite file (default
``DATA_HOME/runs.sqlite``) or in the team store (PostgreSQL, core.store.database), for the History page, the
benchmark and exports.

Events are appended as the agent emits them, so a run that stopped half-way keeps its trace. The store never
holds an API key: RunSettings has none. Safe to use from several threads and processes (one connection per
thread; every change of who drives a run is one conditional UPDATE, so exactly one of several racing processes
wins it).

Run control: each pause has an id (``p1``, ``p2``, ... per run); a review claims its pause
(``claim_pause``), which fails when the pause is no longer current. A driven run has an owner (process id and
host) and a heartbeat; a ``running`` run whose owner is gone or whose heartbeat is stale reads as ``interrupted``
(``detect_orphans``, the sweep, stores it so) and can be resumed from its last checkpoint or closed.
``request_stop`` asks the owner to stop the run; a branched run names its parent and the step it branched at.

Bad state: a store file that is damaged or not a database is set aside and a new one started
(core.store.sqlite.open_sqlite). Beside the store, ``runs.sqlite.marker`` records the store's id and how many runs it held
after the project's last change, so that a store emptied, replaced or deleted outside the project is noticed
(``notice``) rather than read as "no runs yet", until ``acknowledge()`` accepts it.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.config import home
from core.store.database import Database, is_url, location, upsert
from core.config.files import write_atomic
from core.config.secrets import scrub
from core.model.events import AnyEvent, Event, event_from_dict
from core.model.moments import clock
from core.model.outcome import RunOutcome, RunStatus
from core.model.run_settings import RunSettings

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, created REAL, updated REAL, status TEXT,
    scenario TEXT, question INTEGER, db TEXT, technique TEXT, llm TEXT, hitl TEXT,
    settings TEXT, pause TEXT, outcome TEXT, decision TEXT, correct INTEGER);
CREATE TABLE IF NOT EXISTS events (run_id TEXT, seq INTEGER, kind TEXT, data TEXT, PRIMARY KEY (run_id, seq));
CREATE INDEX IF NOT EXISTS runs_by_question ON runs (scenario, question);
CREATE TABLE IF NOT EXISTS reviews (run_id TEXT, pause_id TEXT, kind TEXT, action TEXT, reviewer TEXT, at REAL,
    review TEXT, PRIMARY KEY (run_id, pause_id));
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS viewers (run_id TEXT, viewer TEXT, at REAL, PRIMARY KEY (run_id, viewer));
"""
#: seconds a "viewing" mark stays fresh: an open run page renews it on each rerun (its live view reruns often)
VIEWING_S = 120.0
#: columns added to ``runs`` after its first version (run control), added to older stores when opened
_CONTROL_COLUMNS = {"pause_id": "TEXT", "pauses": "INTEGER DEFAULT 0", "owner_pid": "INTEGER", "owner_host": "TEXT",
                    "heartbeat": "REAL", "stop_requested": "INTEGER DEFAULT 0", "parent_id": "TEXT",
                    "branch_step": "INTEGER"}
HEARTBEAT_S = 2.0  # how often a driven run's owner beats
STALE_S = 30.0  # a running run whose heartbeat is older than this is interrupted
#: The statuses a run ends in: ``finished`` (with a final answer), ``failed``, ``stopped`` (by the analyst; it can
#: be resumed from its last checkpoint, as an ``interrupted`` one can), ``stuck`` (the loop guard ended it after
#: ``Limits.max_repeats`` repeats) or ``context_exceeded`` (a request could not fit the model's context window).
ENDED = ("finished", "failed", "stopped", "stuck", "context_exceeded")
#: list() filters: keyword -> column
FILTERS = ("status", "scenario", "question", "db", "technique", "llm", "hitl", "correct")
#: Ended without an answer is not a wrong answer (one rule for every way a run ends: failed, stuck,
#: context_exceeded, stopped, interrupted): its ``correct`` is left empty, so a filter on wrong answers does not
#: list it; the pages say "not answered"; the benchmark's reports count it in n as not correct, with its failure
#: category (OTH), as an item that could not run.
NOT_ENDED = ("queued", "running", "paused")
#: The statuses of a run a job will drive: ``queued`` (waiting for a worker of the team's job queue,
#: core.jobs.queue) and ``running``.
DRIVEN = ("queued", "running")


def new_run_id() -> str:
    """A new run's id: 12 hexadecimal digits."""
    return uuid.uuid4().hex[:12]


def unanswered(status: str, outcome: RunOutcome | None) -> bool:
    """Whether a run of ``status`` with ``outcome`` ended without an answer to grade: neither correct nor wrong."""
    return status not in NOT_ENDED and not (outcome and outcome.answered)


@dataclass
class RunRecord:
    """One stored run. ``events`` is filled by ``get``, typed (core.model.events); ``to_dict`` gives them as
    stored."""

    id: str
    created: float
    updated: float
    status: RunStatus
    settings: RunSettings
    pause: dict | None = None
    outcome: RunOutcome | None = None
    events: list[AnyEvent] = field(default_factory=list)
    parent_id: str | None = None  # the run this one branched from
    branch_step: int | None = None  # the step (LLM call) of the parent it branched at

    def to_dict(self) -> dict:
        return {"id": self.id, "created": self.created, "updated": self.updated, "status": self.status,
                "settings": self.settings.to_dict(), "pause": self.pause,
                "outcome": self.outcome.to_dict() if self.outcome else None,
                "events": [e.to_dict() for e in self.events],
                "parent_id": self.parent_id, "branch_step": self.branch_step}


class PauseTaken(Exception):
    """A review for a pause that is no longer current (another review took it, or the run moved on)."""


def _alive(pid: int | None, host: str | None) -> bool:
    """Whether the process ``pid`` on ``host`` still runs (True when it is on another host: its heartbeat tells)."""
    if not pid or host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child not yet reaped by its parent is a zombie: gone for us
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _orphaned(pid: int | None, host: str | None, heartbeat: float | None, updated: float, now: float) -> bool:
    """Whether a ``running`` run is orphaned: its owner process is gone or its heartbeat is stale."""
    beat = heartbeat if heartbeat is not None else updated
    return not _alive(pid, host) or now - beat >= STALE_S


def _json(value) -> str | None:
    """``value`` as stored: JSON with every secret scrubbed (core.config.secrets)."""
    return None if value is None else scrub(json.dumps(value, default=str))


def _load(text: str | None):
    return None if text is None else json.loads(text)


_noticed: list[str] = []
_noticed_lock = threading.Lock()


def store_notices(since: int = 0) -> list[str]:
    """The ``notice`` of every run store opened in this process that disagreed with its marker (from the
    ``since``-th on), for the command line to warn of."""
    with _noticed_lock:
        return list(_noticed[since:])



def _insert_event(con, run_id: str, event: Event) -> None:
    """Append one event to run ``run_id`` in the transaction ``con``."""
    data = event.to_dict()
    con.execute("INSERT INTO events (run_id, seq, kind, data) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ? "
                "FROM events WHERE run_id = ?", (run_id, data.get("kind"), _json(data), run_id))

class RunStore:
    """The runs of the project home's ``runs.sqlite`` (``path``), or of the team store when
    ``PLANRAG_DATABASE_URL`` is set or ``path`` is a ``postgresql://`` URL (core.store.database)."""

    def __init__(self, path: str | Path | None = None):
        target = location(path or home.data_home() / "runs.sqlite")
        self.db = Database(target, "run store", self._set_up)
        self.path = self.db.path or Path(path if path and not is_url(path) else home.data_home() / "runs.sqlite")
        with self.db.transaction() as con:
            if self.db.team:
                con.execute(upsert("store_meta", ("key", "value"), ("key",), replace=False), ("id", uuid.uuid4().hex))
            self.id = con.execute("SELECT value FROM store_meta WHERE key = 'id'").fetchone()[0]
        self.notice = None if self.db.team else self._check_marker()  # the team store is no file to lose
        if self.notice:
            with _noticed_lock:
                _noticed.append(self.notice)

    def _set_up(self, con: sqlite3.Connection) -> None:
        con.execute("PRAGMA synchronous = NORMAL")  # durable across a process crash in WAL mode
        con.execute("PRAGMA journal_mode = WAL")
        con.executescript(_SCHEMA)
        self._add_columns(con)
        with con:
            con.execute(upsert("store_meta", ("key", "value"), ("key",), replace=False), ("id", uuid.uuid4().hex))
        con.execute("SELECT COUNT(*) FROM runs").fetchone()

    @property
    def marker_path(self) -> Path:
        return self.path.with_name(self.path.name + ".marker")

    def _check_marker(self) -> str | None:
        """What disagrees between the store and its marker (None when nothing does); writes the marker of a store
        that has none."""
        try:
            marker = json.loads(self.marker_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self._write_marker()
            return None
        except (OSError, ValueError):
            marker = {}
        held = self.db.rows("SELECT COUNT(*) FROM runs")[0][0]
        before = int(marker.get("runs") or 0)
        if marker.get("id") == self.id and held >= before:
            return None
        kept = sorted(p.name for p in self.path.parent.glob(self.path.name + ".broken-*") if "-wal" not in p.name
                      and "-shm" not in p.name and "-journal" not in p.name)
        what = ("is not the store this home had: it was emptied, replaced or deleted" if marker.get("id") != self.id
                else "has lost runs")
        return (f"The run store {self.path} {what} outside the app: it holds {held} run{'s' * (held != 1)} where "
                f"{before} {'was' if before == 1 else 'were'} stored"
                + (f"; damaged stores kept aside: {', '.join(kept)}" if kept else "")
                + ". Restore it from a backup, or acknowledge to go on with it.")

    def _write_marker(self, con=None) -> None:
        """Record the store's id and run count beside it (within a write transaction, so writers take turns);
        nothing for the team store."""
        if self.db.team:
            return
        held = (con.execute("SELECT COUNT(*) FROM runs").fetchone() if con else
                self.db.rows("SELECT COUNT(*) FROM runs")[0])[0]
        write_atomic(self.marker_path, json.dumps({"id": self.id, "runs": held}))

    def acknowledge(self) -> None:
        """Accept the store as it is now (after ``notice``): the marker records it."""
        self._write_marker()
        self.notice = None

    @staticmethod
    def _add_columns(con: sqlite3.Connection) -> None:
        """Add the run-control columns to a store file made by an older version (once, whoever comes first)."""
        for name, kind in _CONTROL_COLUMNS.items():
            if name not in {row[1] for row in con.execute("PRAGMA table_info(runs)")}:
                try:
                    with con:
                        con.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
                except sqlite3.OperationalError as e:  # another process added it first
                    if "duplicate column" not in str(e):
                        raise

    def create(self, run_id: str, settings: RunSettings, parent_id: str | None = None,
               branch_step: int | None = None, queued: bool = False,
               then: Callable[[object], None] | None = None) -> None:
        """Record a new run with its settings: ``running`` and owned by this process, or ``queued`` for a worker and
        owned by none (a queued run this process claimed gets its settings); a branch names its parent and step.
        ``then(connection)``: called in the same transaction with the team store's psycopg connection."""
        now = time.time()
        columns = ("id", "created", "updated", "status", "scenario", "question", "db", "technique", "llm", "hitl",
                   "settings", "owner_pid", "owner_host", "heartbeat", "parent_id", "branch_step")
        owner = (None, None, None) if queued else (os.getpid(), socket.gethostname(), now)
        values = (run_id, now, now, "queued" if queued else "running", settings.scenario, settings.question,
                  settings.db, settings.technique, settings.llm, settings.hitl, _json(settings.to_dict()), *owner,
                  parent_id, branch_step)
        with self.db.transaction() as con:
            if queued or not con.execute("UPDATE runs SET updated = ?, scenario = ?, question = ?, db = ?, "
                                         "technique = ?, llm = ?, hitl = ?, settings = ? WHERE id = ? AND "
                                         "status = 'running' AND owner_pid = ? AND owner_host = ?",
                                         (*values[2:3], *values[4:11], run_id, os.getpid(),
                                          socket.gethostname())).rowcount:
                con.execute(f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                            values)
            if then is not None:
                then(con.connection)
            if self.notice is None:  # a store in question keeps its old marker until acknowledged
                self._write_marker(con)

    def hand_over(self, run_id: str, then: Callable[[object], None] | None = None) -> bool:
        """Put a run this process claimed (a review, a resume) in the queue for a worker: ``queued``, owned by none,
        its claimed review kept for the worker to go on with; whether it did (the claim may have settled: paused
        again, ended). ``then(connection)``: called in the same transaction when it did (as ``create``'s)."""
        with self.db.transaction() as con:
            handed = con.execute("UPDATE runs SET status = 'queued', updated = ?, owner_pid = NULL, owner_host = NULL, "
                        "heartbeat = NULL WHERE id = ? AND status = 'running' AND owner_pid = ? AND owner_host = ?",
                        (time.time(), run_id, os.getpid(), socket.gethostname())).rowcount
            if handed and then is not None:
                then(con.connection)
        return bool(handed)

    # ------------------------------------------------------------------------------------------ sign-outs

    def end_session(self, session: str, until: float | None = None) -> None:
        """Remember that sign-in session ``session`` (core.auth.roles.Identity.session) was signed out: refused
        from now on, in every tab and replica; ``until``: when it would have expired anyway (kept until then)."""
        with self.db.transaction() as con:
            con.execute(upsert("store_meta", ("key", "value"), ("key",)),
                        (_session_key(session), json.dumps({"at": time.time(), "until": until})))

    def session_ended(self, session: str) -> bool:
        """Whether sign-in session ``session`` was signed out."""
        return bool(self.db.rows("SELECT value FROM store_meta WHERE key = ?", (_session_key(session),)))

    def record_start(self, run_id: str, by: str, asked: dict | None = None) -> None:
        """Record who started the run (shown with its reviews as the action ``start``) and, for a run the job queue
        drives, how they asked for it (core.jobs.payload.Asked: a job queued again for it carries it)."""
        with self.db.transaction() as con:
            con.execute(upsert("reviews", ("run_id", "pause_id", "kind", "action", "reviewer", "at", "review"),
                               ("run_id", "pause_id"), replace=False), (run_id, "start", "start", "start", by,
                                                                        time.time(), _json(asked) if asked else None))

    def started_by(self, run_id: str) -> str:
        """Who started the run ("" for a run stored before starts were recorded)."""
        rows = self.db.rows("SELECT reviewer FROM reviews WHERE run_id = ? AND pause_id = 'start'", (run_id,))
        return rows[0][0] if rows else ""

    def starters(self) -> dict[str, str]:
        """Who started each run, for every run whose start was recorded (one query, for a table of runs)."""
        return dict(self.db.rows("SELECT run_id, reviewer FROM reviews WHERE pause_id = 'start'", ()))

    # ------------------------------------------------------------------------------------------ run control

    def viewing(self, run_id: str, viewer: str, at: float | None = None) -> None:
        """Record that ``viewer`` is looking at the run now (the inbox says who looks at what)."""
        with self.db.transaction() as con:
            con.execute(upsert("viewers", ("run_id", "viewer", "at"), ("run_id", "viewer")),
                        (run_id, viewer, time.time() if at is None else at))

    def unview(self, run_id: str, viewer: str) -> None:
        """Take back ``viewer``'s mark on the run (a session that now goes by another name)."""
        with self.db.transaction() as con:
            con.execute("DELETE FROM viewers WHERE run_id = ? AND viewer = ?", (run_id, viewer))

    def viewers(self, run_id: str, within: float = VIEWING_S) -> dict[str, float]:
        """Who looked at the run within the last ``within`` seconds, with when (latest first)."""
        with self.db.transaction() as con:
            rows = con.execute("SELECT viewer, at FROM viewers WHERE run_id = ? AND at >= ? ORDER BY at DESC",
                               (run_id, time.time() - within)).fetchall()
        return dict(rows)

    def claim_pause(self, run_id: str, pause_id: str, review: dict, reviewer: str, kind: str = "") -> float:
        """Take the run's pause ``pause_id`` for a review, atomically across processes: the run becomes
        ``running``, owned by this process, and the review is recorded (who, when). Returns the time of the
        review; raises PauseTaken (with the run's current state) when that pause is no longer current, KeyError
        for an unknown run."""
        now = time.time()
        with self.db.transaction() as con:
            taken = con.execute("UPDATE runs SET status = 'running', updated = ?, owner_pid = ?, owner_host = ?, "
                                "heartbeat = ?, stop_requested = 0 WHERE id = ? AND status = 'paused' AND "
                                "pause_id = ?", (now, os.getpid(), socket.gethostname(), now, run_id,
                                                 pause_id)).rowcount
            if taken:
                con.execute("INSERT INTO reviews (run_id, pause_id, kind, action, reviewer, at, review) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (run_id, pause_id, kind, review.get("action"), reviewer, now, _json(review)))
                return now
        raise PauseTaken(self.describe_state(run_id, pause_id))

    def describe_state(self, run_id: str, pause_id: str | None = None) -> str:
        """Why a review of ``pause_id`` cannot be applied, with the run's current state."""
        record = self.get(run_id, events=False)
        head = (f"pause {pause_id} of run {run_id} is no longer current" if pause_id else
                f"run {run_id} is not waiting for a review")
        taken = self.review_of(run_id, pause_id) if pause_id else None
        by = (f": {taken['reviewer']} reviewed it ({taken['action']}) at "
              f"{clock(taken['at'])}") if taken else ""
        now = (f"the run now waits at pause {record.pause.get('id')} ({record.pause.get('kind')})"
               if record.status == "paused" and record.pause else f"the run is {record.status}")
        if record.status in ("interrupted", "stopped"):
            now += " (resume it from its last checkpoint, or close it)"
        return f"{head}{by}; {now}"

    def review_of(self, run_id: str, pause_id: str) -> dict | None:
        """The review that took a pause: pause_id, kind, action, reviewer, at, review; None if none did."""
        return next((r for r in self.reviews(run_id) if r["pause_id"] == pause_id), None)

    def reviews(self, run_id: str) -> list[dict]:
        """The run's reviews (and stops, action ``stop``) in the order they were made (its start: ``started_by``)."""
        with self.db.transaction() as con:
            rows = con.execute("SELECT pause_id, kind, action, reviewer, at, review FROM reviews WHERE run_id = ? "
                               "AND (action IS NULL OR action <> 'start') ORDER BY at", (run_id,)).fetchall()
        return [{"pause_id": r[0], "kind": r[1], "action": r[2], "reviewer": r[3], "at": r[4],
                 "review": _load(r[5])} for r in rows]

    def set_pause(self, run_id: str, pause: dict, interrupt_id: str) -> dict:
        """Record that the run waits at a pause; the pause gets its id (``p1``, ``p2``, ...), kept when the same
        interrupt is recorded again (a run resumed after it was interrupted). Returns the pause with its id."""
        with self.db.transaction() as con:
            row = con.execute("SELECT pause, pauses FROM runs WHERE id = ?", (run_id,)).fetchone()
            last, count = _load(row[0]) or {}, row[1] or 0
            if last.get("interrupt") == interrupt_id and last.get("id"):
                pause_id = last["id"]
            else:
                count += 1
                pause_id = f"p{count}"
            pause = {**pause, "id": pause_id, "interrupt": interrupt_id, "at": time.time()}
            con.execute("UPDATE runs SET status = 'paused', updated = ?, pause = ?, pause_id = ?, pauses = ?, "
                        "owner_pid = NULL, heartbeat = NULL WHERE id = ?",
                        (time.time(), _json(pause), pause_id, count, run_id))
        return pause

    def release_pause(self, run_id: str, pause_id: str) -> None:
        """Give back a pause this process claimed but could not go on from (its model or database would not
        open): the run waits at it again, and its review is forgotten."""
        with self.db.transaction() as con:
            if con.execute("UPDATE runs SET status = 'paused', updated = ?, owner_pid = NULL, heartbeat = NULL "
                           "WHERE id = ? AND status = 'running' AND pause_id = ? AND owner_pid = ?",
                           (time.time(), run_id, pause_id, os.getpid())).rowcount:
                con.execute("DELETE FROM reviews WHERE run_id = ? AND pause_id = ?", (run_id, pause_id))

    def claim_run(self, run_id: str, statuses: tuple[str, ...]) -> str:
        """Take a run in one of ``statuses`` (e.g. interrupted, stopped) to drive it from this process, atomically;
        returns the status it had. Raises PauseTaken (the current state) when it is in none of them."""
        self.detect_orphans(run_id)
        now = time.time()
        marks = ", ".join("?" * len(statuses))
        with self.db.transaction() as con:
            row = con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.db.label}")
            if con.execute(f"UPDATE runs SET status = 'running', updated = ?, owner_pid = ?, owner_host = ?, "
                           f"heartbeat = ?, stop_requested = 0 WHERE id = ? AND status IN ({marks}) AND status = ?",
                           (now, os.getpid(), socket.gethostname(), now, run_id, *statuses, row[0])).rowcount:
                return row[0]
        status = self.get(run_id, events=False).status
        raise PauseTaken(f"run {run_id} cannot be resumed: it is {status}"
                         + (" (another process drives it)" if status == "running" else ""))

    def fail_undriven(self, run_id: str, event: Event) -> bool:
        """End as ``failed`` (with ``event``, an ErrorEvent saying why) a run that is queued or driven by this
        process, which cannot drive it (a worker without its data or its model); whether it did."""
        outcome = RunOutcome(error=getattr(event, "message", "")).to_dict()
        with self.db.transaction() as con:  # the status and its event at once: a reader never sees one alone
            failed = con.execute("UPDATE runs SET status = 'failed', updated = ?, outcome = ?, owner_pid = NULL, "
                                 "owner_host = NULL, heartbeat = NULL WHERE id = ? AND (status = 'queued' OR "
                                 "(status = 'running' AND owner_pid = ? AND owner_host = ?))",
                                 (time.time(), _json(outcome), run_id, os.getpid(), socket.gethostname())).rowcount
            if failed:
                _insert_event(con, run_id, event)
        return bool(failed)

    def beat(self, run_id: str) -> bool:
        """The owner's heartbeat; returns whether the run must stop: a stop was asked for, or the run is no longer
        this process's (it was marked interrupted while this process hung, and maybe taken by another)."""
        with self.db.transaction() as con:
            owned = con.execute("UPDATE runs SET heartbeat = ? WHERE id = ? AND status = 'running' AND "
                                "owner_pid = ? AND owner_host = ?",
                                (time.time(), run_id, os.getpid(), socket.gethostname())).rowcount
            row = con.execute("SELECT stop_requested FROM runs WHERE id = ?", (run_id,)).fetchone()
        return not owned or bool(row and row[0])

    def stop_requested(self, run_id: str) -> bool:
        with self.db.transaction() as con:
            row = con.execute("SELECT stop_requested FROM runs WHERE id = ?", (run_id,)).fetchone()
        return bool(row and row[0])

    def request_stop(self, run_id: str, by: str = "") -> str:
        """Ask the process driving a running run to stop it; a queued, paused or interrupted run is closed at once (status
        ``stopped``). ``by``: who stopped it, recorded beside the reviews (action ``stop``). Returns the run's status
        after the request; KeyError for an unknown run."""
        self.detect_orphans(run_id)
        now = time.time()
        with self.db.transaction() as con:
            if by:
                con.execute("INSERT INTO reviews (run_id, pause_id, kind, action, reviewer, at, review) "
                            "SELECT id, NULL, 'run', 'stop', ?, ?, '{}' FROM runs WHERE id = ? AND status IN "
                            "('queued', 'running', 'paused', 'interrupted')", (by, now, run_id))
            con.execute("UPDATE runs SET stop_requested = 1, updated = ? WHERE id = ? AND status = 'running'",
                        (now, run_id))
            con.execute("UPDATE runs SET status = 'stopped', updated = ?, pause_id = NULL WHERE id = ? AND "
                        "status IN ('queued', 'paused', 'interrupted')", (now, run_id))
        return self.get(run_id, events=False).status

    def interrupt(self, run_id: str) -> bool:
        """Mark ``interrupted`` a run this process drives, as it stops (its pause and claimed review kept, for the
        resume); whether it did."""
        with self.db.transaction() as con:
            return bool(con.execute("UPDATE runs SET status = 'interrupted', updated = ?, owner_pid = NULL, "
                                    "owner_host = NULL, heartbeat = NULL WHERE id = ? AND status = 'running' AND "
                                    "owner_pid = ? AND owner_host = ?",
                                    (time.time(), run_id, os.getpid(), socket.gethostname())).rowcount)

    def detect_orphans(self, run_id: str | None = None) -> list[str]:
        """The sweep: store as ``interrupted`` the running runs (all, or ``run_id``) whose owner process is gone or
        whose heartbeat is stale (reads already show them so); returns their ids. Run before a run is taken or
        stopped."""
        sql = "SELECT id, owner_pid, owner_host, heartbeat, updated FROM runs WHERE status = 'running'"
        with self.db.transaction() as con:
            rows = con.execute(sql + (" AND id = ?" if run_id else ""), (run_id,) if run_id else ()).fetchall()
        now, found = time.time(), []
        for rid, pid, host, heartbeat, updated in rows:
            if not _orphaned(pid, host, heartbeat, updated, now):
                continue
            with self.db.transaction() as con:  # conditional: an owner that just beat (or a resume that took it) wins
                if con.execute("UPDATE runs SET status = 'interrupted', updated = ? WHERE id = ? AND "
                               "status = 'running' AND owner_pid IS NOT DISTINCT FROM ? AND heartbeat IS NOT DISTINCT FROM ?",
                               (now, rid, pid, heartbeat)).rowcount:
                    found.append(rid)
        return found

    def branches(self, run_id: str) -> list[RunRecord]:
        """The runs branched from ``run_id`` (not their branches), oldest first."""
        with self.db.transaction() as con:
            ids = [r[0] for r in con.execute("SELECT id FROM runs WHERE parent_id = ? ORDER BY created", (run_id,))]
        return [self.get(i, events=False) for i in ids]

    def add_event(self, run_id: str, event: Event) -> None:
        """Append one event (stored as its ``to_dict()``)."""
        with self.db.transaction() as con:
            _insert_event(con, run_id, event)

    def events(self, run_id: str, after: int = 0) -> list[AnyEvent]:
        """The run's events after the first ``after`` (a cursor: how many the reader has), typed, in order; a page
        follows a run driven by any process this way."""
        with self.db.transaction() as con:  # seq counts from 1 without gaps: the cursor is a seq
            rows = con.execute("SELECT data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
                               (run_id, int(after))).fetchall()
        return [_event(d) for (d,) in rows]

    def update(self, run_id: str, status: RunStatus, *, pause: dict | None = None,
               outcome: RunOutcome | None = None) -> None:
        """Set the run's status, its pause (None clears it, except for a running run) and, once it ended, its
        outcome (stored as its ``to_dict()``)."""
        decision = None if not outcome or outcome.decision is None else str(outcome.decision)
        correct = (None if not outcome or outcome.correct is None or unanswered(status, outcome)
                   else int(outcome.correct))
        # A running run has this process as owner, and keeps the pause it resumed from (the review of which
        # goes on if the run is interrupted before its next step); a run that stops running has no owner.
        owned = status == "running"
        with self.db.transaction() as con:
            con.execute("UPDATE runs SET status = ?, updated = ?, pause = CASE WHEN ? THEN pause ELSE ? END, "
                        "outcome = COALESCE(?, outcome), decision = COALESCE(?, decision), "
                        "correct = COALESCE(?, correct), pause_id = CASE WHEN ? THEN pause_id ELSE ? END, "
                        "owner_pid = ?, owner_host = ?, heartbeat = ?, stop_requested = "
                        "CASE WHEN ? THEN stop_requested ELSE 0 END WHERE id = ?",
                        (status, time.time(), owned and pause is None, _json(pause),
                         _json(outcome.to_dict() if outcome else None), decision,
                         correct, owned and pause is None, (pause or {}).get("id"), os.getpid() if owned else None,
                         socket.gethostname() if owned else None, time.time() if owned else None, owned, run_id))

    def get(self, run_id: str, events: bool = True) -> RunRecord:
        """The run with its events (``events=False``: without them, for its settings, status or outcome);
        KeyError if there is none. A pure read: an orphaned running run reads as ``interrupted``, not stored so."""
        with self.db.transaction() as con:
            row = con.execute(f"SELECT {_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise KeyError(f"no run {run_id!r} in {self.db.label}")
            kept = [_event(d) for (d,) in con.execute("SELECT data FROM events WHERE run_id = ? ORDER BY seq",
                                                      (run_id,))] if events else []
        return _record(row, kept)

    def list(self, limit: int | None = 200, **filters) -> list[RunRecord]:
        """Runs, newest first, without their events; ``filters`` on any of FILTERS, e.g.
        ``list(scenario="locating", technique="planrag", correct=True)``."""
        unknown = set(filters) - set(FILTERS)
        if unknown:
            raise ValueError(f"cannot filter runs on {', '.join(sorted(unknown))}; use {', '.join(FILTERS)}")
        where = [(k, int(v) if isinstance(v, bool) else v) for k, v in filters.items() if v is not None]
        status = dict(where).get("status")
        derived = status in ("running", "interrupted")  # an orphaned running run reads as interrupted
        clauses = [("status IN ('running', 'interrupted')", ()) if k == "status" and derived else (f"{k} = ?", (v,))
                   for k, v in where]
        sql = f"SELECT {_COLUMNS} FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(c for c, _ in clauses)
        sql += " ORDER BY created DESC" + (f" LIMIT {int(limit)}" if limit and not derived else "")
        with self.db.transaction() as con:
            rows = con.execute(sql, [v for _, values in clauses for v in values]).fetchall()
        records = [_record(r) for r in rows]
        if derived:
            records = [r for r in records if r.status == status][:limit or None]
        return records

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
        with self.db.transaction() as con:
            con.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM reviews WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM viewers WHERE run_id = ?", (run_id,))
            con.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            if self.notice is None:
                self._write_marker(con)


_COLUMNS = ("id, created, updated, status, settings, pause, outcome, parent_id, branch_step, owner_pid, owner_host, "
            "heartbeat")


def _session_key(session: str) -> str:
    return "signed_out:" + hashlib.sha256(session.encode()).hexdigest()


def _event(text: str) -> AnyEvent:
    """A stored event, typed (an unreadable record is kept as an UnknownEvent)."""
    try:
        return event_from_dict(json.loads(text))
    except ValueError:
        return event_from_dict({"kind": "unreadable", "text": text})


def _record(row, events: list[AnyEvent] | None = None) -> RunRecord:
    """A stored run (``_COLUMNS``); a running one whose owner is gone or whose heartbeat is stale as ``interrupted``."""
    status = row[3]
    if status == "running" and _orphaned(row[9], row[10], row[11], row[2], time.time()):
        status = "interrupted"
    return RunRecord(row[0], row[1], row[2], status, RunSettings.from_dict(_load(row[4])), _load(row[5]),
                     RunOutcome.from_dict(_load(row[6])), events or [], row[7], row[8])


def as_tree(records: list[RunRecord]) -> list[tuple[RunRecord, int]]:
    """The runs with their depth in the branch tree, each run followed by its branches (oldest first); runs
    whose parent is not among ``records`` are roots, in the order given."""
    ids = {r.id for r in records}
    children: dict[str, list[RunRecord]] = {}
    for r in sorted(records, key=lambda r: r.created):
        if r.parent_id in ids:
            children.setdefault(r.parent_id, []).append(r)
    ordered: list[tuple[RunRecord, int]] = []

    def visit(record: RunRecord, depth: int) -> None:
        ordered.append((record, depth))
        for child in children.get(record.id, []):
            visit(child, depth + 1)

    for r in records:
        if r.parent_id not in ids:
            visit(r, 0)
    return ordered
