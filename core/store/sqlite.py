"""The one way the project opens its SQLite stores (runs, checkpoints, grade overrides, benchmark results, the LLM
reply cache): ``open_sqlite``. A store file that is not a database or is damaged (truncated, overwritten) is
renamed aside, never deleted (``runs.sqlite.broken-<time>``), a new one started and a notice given
(core.config.home.notices); ``read_only`` opens an existing file as it is, for readers of another process's store."""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from core.config import home
from core.model.moments import file_stamp

#: SQLite result codes of a file that is damaged or not a database (not of a locked or unopenable one).
_DAMAGED = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_lock = threading.Lock()
_setting_up = threading.RLock()  # one store setup at a time in this process
_checked: set[Path] = set()  # store files found sound by this process (quick_check once)


def _damaged(e: sqlite3.DatabaseError) -> bool:
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGED
    return "malformed" in str(e) or "not a database" in str(e)


def set_aside(path: Path) -> Path:
    """Rename a damaged store file (and its -wal and -shm files) to ``<name>.broken-<time>``; the new name."""
    stamp = file_stamp()
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


def open_read_only(path: Path, **connect) -> sqlite3.Connection:
    """A connection that only reads the SQLite file at ``path`` as it is (another home's store, copied from)."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, **connect)


def open_sqlite(path: Path, what: str, setup=None, *, reader: bool = False, **connect) -> sqlite3.Connection:
    """A connection to the SQLite store at ``path`` (``what`` names it in messages; ``connect``: sqlite3.connect's
    options), set up by ``setup(connection)`` when given. A damaged file or not a database is set aside (never
    deleted) and a new store started, with a notice. ``reader``: the file as it is (nothing checked or set up)."""
    if reader:
        return sqlite3.connect(path, **connect)
    home.check(path.parent)
    for attempt in range(2):
        con = sqlite3.connect(path, **connect)
        try:
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
            if path.resolve() not in _checked:
                result = con.execute("PRAGMA quick_check(1)").fetchone()[0]
                if result != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed ({result})")
            if setup:
                with _setting_up:  # two first opens at once in a new file (journal mode, tables) lock each other out
                    setup(con)
            _checked.add(path.resolve())
            return con
        except sqlite3.DatabaseError as e:
            con.close()
            if attempt or not _damaged(e):
                if isinstance(e, sqlite3.OperationalError) and "unable to open" in str(e):
                    raise home.HomeError(f"cannot open the {what} {path}: {e}") from None
                raise
            with _lock:
                kept = set_aside(path)
            home.add_notice(f"The {what} {path} was damaged ({e}): it was kept as {kept.name} (nothing was "
                            f"deleted) and a new, empty one started.")
    raise AssertionError("unreachable")
