"""Worker processes for the embedded engines (SQLite, Ladybug): an engine that crashes, runs past its time or
takes too much memory fails one query, never the app's process.

Each open backend has one long-lived worker, started on its first query and started again after a crash or a
kill; when the backend closes, its worker is kept idle (a few at most) for the next backend on the same file. The worker (``python -m core.backends.worker ENGINE FILE``) opens the database read-only, then locks itself
down: an address-space limit (RLIMIT_AS), and on Linux with Landlock no file may be opened or written and no TCP
connection made (so ``COPY ... TO``, ``EXPORT DATABASE``, ``LOAD FROM`` or ``INSTALL`` cannot reach the
filesystem or the network whatever the query checks let through). It inherits no environment (no key).

Requests and replies are length-prefixed JSON frames on its stdin and stdout (JSON, not pickle: a subverted
engine cannot make the app's process run code). The app waits for a reply until the query's timeout plus
``GRACE_S``; past it the worker is killed and the query is reported as timed out.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from core.backends.base import (BackendUnavailable, QueryError, QueryResult, QuerySyntaxError, QueryTimeout,
                                RefusedWrite)
from core.backends import engines

#: Seconds past a query's timeout after which its worker is killed (the engine's own stop comes first).
GRACE_S = 1.0
#: Seconds a worker may take to start and open its database.
START_TIMEOUT_S = 60.0
#: Address space of a worker, in bytes (Ladybug reserves its max_db_size, 1 GB, of it up front).
MEMORY_LIMIT = {"sqlite": 1 << 30, "ladybug": 3 << 30}
_ROOT = Path(__file__).resolve().parents[2]
_ERRORS = {c.kind: c for c in (QueryError, RefusedWrite, QueryTimeout, QuerySyntaxError, BackendUnavailable)}
_HEADER = struct.Struct("!I")
#: Largest reply the app reads (bytes); results are capped well below it in the worker.
MAX_FRAME = 64 << 20


def _encode(obj) -> bytes:
    body = json.dumps(obj, default=lambda v: {"$bytes": v.hex()} if isinstance(v, (bytes, bytearray)) else str(v),
                      separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def _decode(body: bytes):
    return json.loads(body, object_hook=lambda d: bytes.fromhex(d["$bytes"]) if d.keys() == {"$bytes"} else d)


class _BadReply(Exception):
    """A reply the app cannot take: too large, or not a frame of this protocol."""


class Worker:
    """The worker process of one open backend; ``run`` may be called from any thread (one query at a time)."""

    def __init__(self, engine: str, path: Path):
        self.engine, self.path = engine, path
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._stopped = False  # set by cancel(): the running query's worker was killed on purpose
        self.starts = 0  # how many workers were started (for tests and benches)

    def run(self, sql: str, timeout_s: float, row_cap: int) -> QueryResult:
        """Run ``sql`` (the engine's own language, checked already) in the worker. Raises a QueryError: the
        engine's, QueryTimeout when the worker had to be killed at the deadline, QueryError when it crashed."""
        with self._lock:
            self._stopped = False
            proc = self._ensure_started()
            deadline = time.monotonic() + timeout_s + GRACE_S
            try:
                proc.stdin.write(_encode({"sql": sql, "timeout_s": timeout_s, "row_cap": row_cap}))
                proc.stdin.flush()
                reply = self._receive(proc, deadline)
            except (BrokenPipeError, EOFError):
                raise self._died(proc) from None
            except _BadReply as e:
                self._kill()
                raise QueryError(f"the {self.engine} engine gave an unreadable answer ({e}) and was restarted") from None
            except TimeoutError:
                self._kill()
                raise QueryTimeout(f"the query ran longer than {timeout_s:g} s and was stopped (its engine did not "
                                   "stop it in time and was restarted); make it cheaper") from None
        if "error" in reply:
            error = _ERRORS.get(reply["error"], QueryError)(str(reply.get("message")))
            error.executed = sql
            raise error
        try:
            return QueryResult(list(reply["columns"]), list(reply["rows"]), int(reply["total"]),
                               float(reply["elapsed"]), executed=sql, notes=list(reply["notes"]))
        except (KeyError, TypeError, ValueError):
            raise QueryError(f"the {self.engine} engine gave an unreadable answer") from None

    def prestart(self) -> None:
        """Start the worker now unless a query has (a failure to start is reported by the first query)."""
        with self._lock:
            if self._proc is None and not self.starts:
                try:
                    self._ensure_started()
                except QueryError:
                    pass

    def _ensure_started(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._kill()
        env = {"PYTHONPATH": str(_ROOT), "PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
        proc = subprocess.Popen([sys.executable, "-m", "core.backends.worker", self.engine, str(self.path)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                cwd=_ROOT, env=env, close_fds=True)
        self._proc = proc
        self.starts += 1
        try:
            ready = self._receive(proc, time.monotonic() + START_TIMEOUT_S)
        except (EOFError, TimeoutError, _BadReply):
            self._kill()
            raise BackendUnavailable(f"the {self.engine} worker process could not start on {self.path}") from None
        if "error" in ready:
            self._kill()
            raise _ERRORS.get(ready["error"], BackendUnavailable)(ready["message"])
        return proc

    @staticmethod
    def _receive(proc: subprocess.Popen, deadline: float):
        fd = proc.stdout.fileno()

        def read(n: int) -> bytes:
            data = b""
            while len(data) < n:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError
                chunk = os.read(fd, n - len(data))
                if not chunk:
                    raise EOFError
                data += chunk
            return data

        size = _HEADER.unpack(read(_HEADER.size))[0]
        if size > MAX_FRAME:
            raise _BadReply(f"a reply of {size:,} bytes")
        try:
            reply = _decode(read(size))
        except (ValueError, RecursionError) as e:
            raise _BadReply(str(e)[:200]) from None
        if not isinstance(reply, dict):
            raise _BadReply("not a map")
        return reply

    def _died(self, proc: subprocess.Popen) -> QueryError:
        code = proc.wait()
        self._kill()  # closes its pipes
        if self._stopped:
            return QueryError("the query was stopped")
        try:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        except ValueError:
            how = f"signal {-code}"
        if code in (-signal.SIGABRT, -signal.SIGBUS, -signal.SIGKILL):
            how += f"; perhaps out of its {MEMORY_LIMIT[self.engine] >> 20} MB memory limit"
        return QueryError(f"the {self.engine} engine crashed on this query ({how}) and was restarted; this query "
                          "cannot run here: write it differently")

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass

    @property
    def pid(self) -> int | None:
        """The process id of the running worker (None before the first query and after a crash or kill)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def cancel(self) -> None:
        """Stop the query running now by killing the worker (any thread may call this); the next query starts
        a new one."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._stopped = True
            proc.kill()

    def close(self) -> None:
        """End the worker."""
        self.cancel()
        with self._lock:
            self._kill()


# --- idle workers, kept for the next open of the same file ----------------------------------------------------
#: Idle workers kept at most (the oldest is ended first): starting one costs tens of milliseconds, which a run
#: of a few steps would pay at each open (a benchmark opens a backend per item).
MAX_IDLE = 8
_idle: list[Worker] = []
_idle_lock = threading.Lock()


def worker_for(engine: str, path: Path) -> Worker:
    """An idle worker of ``engine`` on ``path`` (started for an earlier backend), else a new one, starting in
    the background (so that its start overlaps the run's first LLM call; a query waits for it)."""
    with _idle_lock:
        for i in range(len(_idle) - 1, -1, -1):
            if _idle[i].engine == engine and _idle[i].path == path:
                return _idle.pop(i)
    worker = Worker(engine, path)
    threading.Thread(target=worker.prestart, name=f"start-{engine}-worker", daemon=True).start()
    return worker


def release(worker: Worker) -> None:
    """Keep ``worker`` for the next backend on its file when it is alive and idle; else end it."""
    if worker.pid is None or not worker._lock.acquire(blocking=False):
        return worker.close()
    worker._lock.release()
    with _idle_lock:
        _idle.append(worker)
        evicted = _idle[:-MAX_IDLE]
        del _idle[:-MAX_IDLE]
    for w in evicted:
        w.close()


def discard(path: Path) -> None:
    """End the idle workers on ``path`` (its file is being replaced)."""
    with _idle_lock:
        gone = [w for w in _idle if w.path == path]
        _idle[:] = [w for w in _idle if w.path != path]
    for w in gone:
        w.close()


# --- inside the worker --------------------------------------------------------------------------------------
def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none, or not Linux)."""
    if not sys.platform.startswith("linux"):  # syscall 444 is Linux's landlock_create_ruleset only
        return 0
    try:
        return max(ctypes.CDLL(None).syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)), 0)
    except (OSError, AttributeError):
        return 0


def _landlock(readable: str | None = None) -> bool:
    """Forbid this thread and those it starts later to open, create or change any file (but read the files
    beneath the folder ``readable``) and to bind or connect TCP sockets (Linux Landlock; files already open stay
    usable). False where Landlock is missing."""
    abi = landlock_abi()
    if abi < 1:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fs = (1 << {1: 13, 2: 14, 3: 15, 4: 15}.get(abi, 16)) - 1
        fields = [fs] + ([3] if abi >= 4 else []) + ([3] if abi >= 6 else [])  # net: bind, connect; scoped
        attr = struct.pack(f"{len(fields)}Q", *fields)
        ruleset = libc.syscall(444, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
        if ruleset < 0:
            return False
        try:
            if readable:
                folder = os.open(readable, os.O_PATH | os.O_CLOEXEC)
                rule = struct.pack("=Qi", 4 | 8, folder)  # READ_FILE | READ_DIR beneath it
                added = libc.syscall(445, ctypes.c_int(ruleset), ctypes.c_int(1), ctypes.c_char_p(rule),
                                     ctypes.c_uint32(0))
                os.close(folder)
                if added != 0:
                    return False
            if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
                return False
            return libc.syscall(446, ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0  # landlock_restrict_self
        finally:
            os.close(ruleset)
    except (OSError, AttributeError):
        return False


def _serve(engine: str, path: str) -> None:
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(1), "wb")  # the frames' own descriptor: the engine's prints (fd 1) go to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # No PR_SET_PDEATHSIG: it fires when the *thread* that started the worker ends (a run's query threads do);
    # the app's exit closes the pipe instead, and the worker ends at the end of stdin.
    limit = MEMORY_LIMIT[engine]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def send(obj) -> None:
        stdout.write(_encode(obj))
        stdout.flush()

    try:
        session = engines.SESSIONS[engine](path, _landlock)
    except QueryError as e:
        return send({"error": e.kind, "message": str(e)})
    send({"ready": True})
    while header := stdin.read(_HEADER.size):
        request = _decode(stdin.read(_HEADER.unpack(header)[0]))
        try:
            r = session.run(request["sql"], request["timeout_s"], request["row_cap"])
            reply = {"columns": r.columns, "rows": r.rows, "total": r.total_rows, "elapsed": r.elapsed_s,
                     "notes": r.notes}
        except QueryError as e:
            reply = {"error": e.kind, "message": str(e)}
        except MemoryError:
            reply = {"error": "error", "message": f"the query needs more than the {limit >> 20} MB memory limit "
                                                  "of its engine; narrow it"}
        except Exception as e:  # noqa: BLE001 - the engine's own failure, for that query only
            reply = {"error": "error", "message": f"{type(e).__name__}: {e}"[:2000]}
        try:
            send(reply)
        except (ValueError, RecursionError, MemoryError):  # a value JSON cannot take
            send({"error": "error", "message": "the result cannot be sent back (too deeply nested or too large)"})


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
