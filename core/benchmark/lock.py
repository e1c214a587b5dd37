"""One benchmark at a time per results directory, across processes: two ``core bench`` (or an app's benchmark and
a ``core bench``) on the same directory would both run every pending item, paying the model twice. In the team
store (core.store.database) the lock is PostgreSQL's advisory lock on the benchmark's name, held by one connection
for as long as the benchmark runs, so it holds across machines and goes with a process that dies."""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from core.benchmark.items import BenchError
from core.store import database

LOCK_NAME = "bench.lock"


class BenchBusy(BenchError):
    """Another process is running a benchmark into the same results directory."""

    kind = "busy"


class DirectoryLock:
    """An exclusive ``flock`` on ``DIRECTORY/bench.lock``, which also holds the owner's pid and start time for the
    message the next one gets. The kernel releases it when the owner ends, however it ends, so a killed benchmark
    leaves no stale lock (the file stays, naming a pid that no longer holds it)."""

    def __init__(self, directory: Path):
        self.path = Path(directory) / LOCK_NAME
        self._file = None
        self._team = None  # the connection holding the team store's advisory lock

    def _owner(self) -> str:
        return (f"pid {os.getpid()} on {os.uname().nodename}, since "
                f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")

    def _acquire_team(self, url: str) -> None:
        name = self.path.parent.name
        con = database.session(url)
        if not con.execute("SELECT pg_try_advisory_lock(hashtextextended(?, 0))", ("bench:" + name,)).fetchone()[0]:
            row = con.execute("SELECT value FROM bench_meta WHERE benchmark = ? AND name = 'lock'", (name,)).fetchone()
            con.close()
            raise BenchBusy(f"a benchmark is already running into {name} in the team store "
                            f"({row[0] if row else 'another process'}); wait for it to end or stop it, then rerun: "
                            "the items it finished are skipped")
        con.execute(database.upsert("bench_meta", ("benchmark", "name", "value"), ("benchmark", "name")),
                    (name, "lock", self._owner()))
        self._team = con

    def acquire(self) -> None:
        """Take the lock, or raise BenchBusy naming the process that holds it."""
        if self._file is not None or self._team is not None:
            return
        target = database.location(self.path)
        if database.is_url(target):
            return self._acquire_team(target)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            owner = f.read().strip() or "another process"
            f.close()
            raise BenchBusy(f"a benchmark is already running into {self.path.parent} ({owner}); wait for it to end "
                            "or stop it, then rerun: the items it finished are skipped") from None
        f.seek(0)
        f.truncate()
        f.write(self._owner() + "\n")
        f.flush()
        self._file = f

    def regain(self) -> None:
        """After the team store was away: hold its lock again (it went with its session when the server stopped);
        BenchBusy when another process took it meanwhile. Nothing for a lock file (the kernel's holds)."""
        if self._team is None:
            return
        try:
            self._team.execute("SELECT 1")
            return
        except database.connection_errors():
            self._team.close()
            self._team = None
        self._acquire_team(database.location(self.path))

    def release(self) -> None:
        if self._team is not None:
            self._team.close()  # the advisory lock goes with its session
            self._team = None
        if self._file is not None:
            self._file.truncate(0)
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
