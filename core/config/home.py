"""The project home (``PLANRAG_HOME``, ``core.config.settings.DATA_HOME``) in a bad state, and the SQLite stores in it.

A home that is a file, cannot be made or is read-only is reported by ``problem`` (``check`` raises HomeError with
it, which the command line prints as an error); the app then works in a fallback home (``use_fallback``) and says
so on every page. A store file that is not a database or is damaged (truncated, overwritten) is renamed aside, never
deleted (``runs.sqlite.broken-<time>``), and a new one started (``open_sqlite``); what was set aside is listed by
``notices`` for the pages to show. The home is always read from core.config.settings when called, so that a test or the
app pointing it elsewhere is followed.
"""
from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from core.config import settings

#: SQLite result codes of a file that is damaged or not a database (not of a locked or unopenable one).
_DAMAGED = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB

_lock = threading.Lock()
_notices: list[str] = []
_checked: set[Path] = set()  # store files found sound by this process (quick_check once)
_fallback_reason: str | None = None  # why this process uses the fallback home


class HomeError(Exception):
    """The project home cannot hold the project's files. The message says what to change."""

    kind = "config"


def data_home() -> Path:
    """The project home now (``core.config.settings.DATA_HOME``)."""
    return Path(settings.DATA_HOME)


def problem(home: str | Path | None = None, what: str = "the project home {} (PLANRAG_HOME)") -> str | None:
    """Why folder ``home`` (default the project home; ``what`` names it) cannot hold the project's files: a file,
    not creatable, not writable; None when it can."""
    home = Path(home) if home is not None else data_home()
    what = what.format(home)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"{what} is a file, not a folder"
    except OSError as e:
        return f"cannot make {what}: {e.strerror or e}"
    try:
        with tempfile.NamedTemporaryFile(dir=home, prefix=".planrag-probe-"):
            pass
    except OSError as e:
        return f"{what} is not writable: {e.strerror or e}"
    return None


def check(home: str | Path | None = None) -> Path:
    """``home`` (default the project home), made if needed; HomeError saying what is wrong when it cannot be used."""
    home = Path(home) if home is not None else data_home()
    reason = problem(home)
    if reason:
        raise HomeError(f"{reason}; set PLANRAG_HOME to a writable folder")
    return home


def fallback_home() -> Path:
    """Where the app keeps its files when the project home cannot be used: a folder in the temporary directory."""
    return Path(tempfile.gettempdir()) / f"planrag-fallback-home-{os.getuid() if hasattr(os, 'getuid') else 0}"


def use_fallback() -> str | None:
    """For the app: when the project home cannot be used, point this process at ``fallback_home()`` and say why
    (the message to show on every page, as long as the process lives); None when the home is fine. HomeError when
    the fallback cannot be used either."""
    global _fallback_reason
    with _lock:
        if _fallback_reason and data_home() == fallback_home():
            return _fallback_reason
        home = data_home()
        reason = problem(home)
        if reason is None:
            return None
        fallback = check(fallback_home())
        settings.DATA_HOME = fallback
        _fallback_reason = (f"{reason}. This app keeps runs, benchmarks and plans in {fallback} instead (temporary); "
                            f"what is stored in {home} is not shown. Set PLANRAG_HOME to a writable folder and "
                            "restart the app.")
        return _fallback_reason


def _damaged(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGED
    return "malformed" in str(e) or "not a database" in str(e)


def set_aside(path: Path) -> Path:
    """Rename a damaged store file (and its -wal and -shm files) to ``<name>.broken-<time>``; the new name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kept = path.with_name(f"{path.name}.broken-{stamp}")
    n = 1
    while kept.exists():
        n += 1
        kept = path.with_name(f"{path.name}.broken-{stamp}-{n}")
    path.rename(kept)
    for suffix in ("-wal", "-shm", "-journal"):
        try:  # a connection closing meanwhile removes its -wal and -shm files
            path.with_name(path.name + suffix).rename(kept.with_name(kept.name + suffix))
        except FileNotFoundError:
            pass
    return kept


def open_sqlite(path: Path, what: str, setup=None, **connect) -> sqlite3.Connection:
    """A connection to the SQLite store at ``path`` (``what`` names it in messages), after ``setup(connection)``
    (its schema) when given. A file that is not a database or is damaged is set aside (never deleted) and a new
    store started, with a notice (``notices``); SQLite's ``quick_check`` runs at the first open in a process, later
    opens rely on the schema read and ``setup``. HomeError when its folder cannot be used."""
    check(path.parent)
    for attempt in range(2):
        con = sqlite3.connect(path, **connect)
        try:
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
            if path.resolve() not in _checked:
                result = con.execute("PRAGMA quick_check(1)").fetchone()[0]
                if result != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
            if setup:
                setup(con)
            _checked.add(path.resolve())
            return con
        except sqlite3.DatabaseError as e:
            con.close()
            if attempt or not _damaged(e):
                if isinstance(e, sqlite3.OperationalError) and "unable to open" in str(e):
                    raise HomeError(f"cannot open the {what} {path}: {e}") from None
                raise
            with _lock:
                kept = set_aside(path)
                _notices.append(f"The {what} {path} was damaged ({e}): it was kept as {kept.name} (nothing was "
                                f"deleted) and a new, empty one started.")
    raise AssertionError("unreachable")


def notices(since: int = 0) -> list[str]:
    """What this process found wrong in the home and set aside (from the ``since``-th on), for the pages to
    show."""
    with _lock:
        return list(_notices[since:])
