"""Runs driven outside the app server's process (``PLANRAG_JOBS=process``, the embedded default): the app starts a
local run process (``python -m core local-runs``, core.jobs.local_host) per home, at the first page that starts
runs, and hands it each run to drive with the session's own settings (its model key included, over the process's
private pipe: never stored, never queued). The server's pages so no longer share its interpreter with agent runs
(issue 41: pages crawled while runs went on in the server's threads).

A run is followed as a ``LocalRun``, a job of this process (core.jobs.job): its events from the run store, the
model's reply in flight and the call under way as the run process relays them; Stop and the server's own stop
(``interrupt``) are relayed at once. A review or resume is claimed here (core.jobs.runs) and marked interrupted,
then taken up by the run process from its last checkpoint: a run process that dies first leaves it interrupted, to
be resumed, never lost. The run process ends when the app does (its standard input closes): its runs end
interrupted, as in the threads mode. If it dies, its runs read as interrupted (their owner is gone), their jobs end
saying so, and the next run starts a new one.

Messages, one JSON object a line: to the run process ``{"op": "start" | "continue" | "branch", "run_id", ...}``,
``{"op": "stop", "run_id", "by"}``, ``{"op": "interrupt", "run_id", "reason"}``; from it ``{"run_id", "kind":
"opened" | "calling" | "piece" | "event" | "ended", ...}`` (``RELAYED``), and ``{"run_id": "", "kind": "spans",
"sent", "dropped"}``: the OpenTelemetry spans it has sent and dropped, once those of a run that ended are out.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Literal, get_args

from core.config import home
from core.config import settings as config
from core.jobs.job import Job
from core.jobs.opening import open_store
from core.model.events import AnyEvent
from core.model.run_settings import RunSettings
from core.store.runs import RunStore

Op = Literal["start", "continue", "branch", "stop", "interrupt"]
Relayed = Literal["opened", "calling", "piece", "event", "ended", "spans"]
OPS: tuple[Op, ...] = get_args(Op)
RELAYED: tuple[Relayed, ...] = get_args(Relayed)
COMMAND = ("-m", "core", "local-runs")  # after the interpreter
MAX_LINE = 1 << 20  # the longest message line either side reads (settings, plan edits, a reply's piece: far shorter)


class RunProcessGone(Exception):
    """The local run process ended (or could not be started) while it drove a run."""


def enabled() -> bool:
    """Whether the app's runs go to a local run process (``PLANRAG_JOBS``, core.config.settings.jobs_mode)."""
    return config.jobs_mode() == "process"


def opener_fields(opener) -> dict:
    """What the run process needs of a core.jobs.runs.Opener to open the run's runtime as the page would."""
    return {"dqa_root": None if opener.dqa_root is None else str(opener.dqa_root),
            "llm": None if opener.llm is None else asdict(opener.llm),
            "db": None if opener.db is None else asdict(opener.db)}


class RunProcess:
    """The local run process of one home: started by ``process_for``; ``send`` a message, its replies go to the
    ``LocalRun`` they name."""

    def __init__(self, data_home: Path):
        env = {**os.environ, "PLANRAG_HOME": str(data_home), config.JOBS_ENV: "threads"}
        # a session of its own: a Ctrl-C meant for the server reaches it through the server's stop, not twice
        self._process = subprocess.Popen([sys.executable, *COMMAND], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env=env, cwd=config.PROJECT_ROOT, text=True, encoding="utf-8", bufsize=1,
                                         start_new_session=True)
        self._runs: dict[str, LocalRun] = {}
        self._lock = threading.Lock()  # guards _runs
        self._writing = threading.Lock()  # one message at a time (never held by the reader: no wait on each other)
        self.exit_code: int | None = None
        self.spans: tuple[int, int] | None = None  # spans sent and dropped, as it last told (None: not yet)
        threading.Thread(target=self._read, name=f"local-runs-{self._process.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self.exit_code is None and self._process.poll() is None

    def attach(self, run: LocalRun) -> None:
        with self._lock:
            self._runs[run.run_id] = run
        if not self.alive:  # ended before: the run hears it now
            run.relayed({"kind": "ended", "error": self._gone(), "gone": True})

    def send(self, message: dict) -> None:
        """Send ``message`` (RunProcessGone when the process has ended)."""
        with self._writing:
            try:
                self._process.stdin.write(json.dumps(message) + "\n")
                self._process.stdin.flush()
            except (OSError, ValueError) as e:  # a closed pipe
                raise RunProcessGone(f"{self._gone()} ({e})") from None

    def _gone(self) -> str:
        code = self._process.poll()
        return f"the local run process ended (exit code {code})" if code is not None else \
            "the local run process does not answer"

    def _read(self) -> None:
        for line in iter(lambda: self._process.stdout.readline(MAX_LINE), ""):
            try:
                message = json.loads(line)
                if message.get("kind") == "spans":
                    self.spans = (int(message["sent"]), int(message["dropped"]))
                run = self._runs.get(message["run_id"]) if message.get("kind") in RELAYED else None
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # not a message of the protocol
            if run is not None:
                run.relayed(message)
                if message["kind"] == "ended":
                    with self._lock:
                        self._runs.pop(run.run_id, None)
        self.exit_code = self._process.wait()
        with self._lock:
            left = list(self._runs.values())
        for run in left:
            run.relayed({"kind": "ended", "error": self._gone(), "gone": True})

    def stop(self) -> None:
        """Close its input (it interrupts its runs and ends) and wait for it (tests; the server's end does this)."""
        try:
            self._process.stdin.close()
        except OSError:
            pass
        self._process.wait()


_processes: dict[Path, RunProcess] = {}
_processes_lock = threading.Lock()


def process_for() -> RunProcess:
    """The local run process of this process's home (DATA_HOME, or the app's fallback home when DATA_HOME cannot be
    used: core.config.home), started when there is none or it has ended."""
    home.use_fallback()
    where = Path(config.DATA_HOME).resolve()
    with _processes_lock:
        found = _processes.get(where)
        if found is None or not found.alive:
            found = _processes[where] = RunProcess(where)
        return found


def spans() -> tuple[int, int] | None:
    """The OpenTelemetry spans this process's run processes have sent and dropped, as they last told (None: none
    has told yet)."""
    with _processes_lock:
        told = [p.spans for p in _processes.values() if p.spans is not None]
    return (sum(s for s, _ in told), sum(d for _, d in told)) if told else None


def stop_all() -> None:
    """Stop every local run process of this process (tests)."""
    with _processes_lock:
        found = list(_processes.values())
        _processes.clear()
    for process in found:
        process.stop()


class LocalRun(Job):
    """A run the local run process drives, followed here as this process's job of kind ``run``: the same
    interface as core.jobs.runs.RunJob (``events``, ``status``, ``partial``, ``calling``, ``streams``, ``opening``,
    ``stop``, ``interrupt``). ``request``: the message that hands the run over."""

    kind = "run"

    def __init__(self, run_id: str, settings: RunSettings, request: dict):
        super().__init__(run_id)
        self.settings = settings
        self.calling: dict | None = None
        self.streams: bool | None = None
        self.opening = True
        self._pieces: list[str] = []
        self._request = {**request, "run_id": run_id}
        self._process: RunProcess | None = None
        self._stop_asked: dict | None = None  # a stop or interrupt asked before the run was handed over
        self._handing = threading.Lock()  # the hand-over and a stop or interrupt, in that order (never the reader's)
        self._there = threading.Event()  # the run process has ended the run
        self._failure = ""  # what ended it there, if it failed outside the agent's loop
        self._process_gone = False  # whether the run process ended while it held the run
        self._store: RunStore | None = None

    @property
    def run_id(self) -> str:
        return self.key

    @property
    def partial(self) -> str:
        return "".join(self._pieces)

    def store(self) -> RunStore:
        if self._store is None:
            self._store = open_store()
        return self._store

    def events(self, after: int = 0) -> list[AnyEvent]:
        return self.store().events(self.run_id, after)

    def status(self) -> str:
        """The run's stored status (``running`` until it is stored)."""
        try:
            return self.store().get(self.run_id, events=False).status
        except KeyError:
            return "failed" if self.error else "running"

    def _work(self) -> None:
        process = process_for()
        process.attach(self)  # from now on, its end is told to this run
        with self._handing:
            self._process, asked = process, self._stop_asked
            try:
                process.send(self._request)
                if asked:
                    process.send(asked)
            except RunProcessGone:
                pass  # told as it ends
        self._there.wait()
        if self._failure:
            raise RunProcessGone(self._failure + (self._left() if self._process_gone else ""))

    def _left(self) -> str:
        """Where the run stands once its run process ended while it held it."""
        try:
            status = self.store().get(self.run_id, events=False).status
        except KeyError:
            return " before the run was stored: start it again (the app's log says why it ended)"
        return (f": the run reads as {status}" + (", to be resumed from its last checkpoint" if status == "interrupted"
                                                  else "") + " (the app's log says why it ended)")

    def relayed(self, message: dict) -> None:
        """A message of the run process about this run."""
        kind = message.get("kind")
        if kind == "opened":
            self.opening = False
        elif kind == "calling":
            self.opening, self.calling, self._pieces = False, message.get("calling"), []
            self.streams = bool((self.calling or {}).get("streams", False))
        elif kind == "piece":
            self._pieces.append(str(message.get("text", "")))
        elif kind == "event":
            self._pieces = []
        elif kind == "ended":
            self._failure, self._process_gone = str(message.get("error") or ""), bool(message.get("gone"))
            self._there.set()
        self.changed()

    def _relay(self, message: dict) -> str:
        with self._handing:
            process = self._process
            if process is None:  # not handed over yet: sent right after the run
                self._stop_asked = message
                return "running"
        try:
            process.send(message)
        except RunProcessGone:
            pass  # its runs read as interrupted; this job ends saying so
        return "running"

    def stop(self, by: str = "") -> str:
        """Stop the run at once (the run process stops it, also before it is stored)."""
        return self._relay({"op": "stop", "run_id": self.run_id, "by": by})

    def interrupt(self, reason: str) -> None:
        """This process stops: the run ends interrupted, to be resumed from its last checkpoint."""
        self._relay({"op": "interrupt", "run_id": self.run_id, "reason": reason})
