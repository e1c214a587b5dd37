"""Control of one driven run: its heartbeat in the run store, and Stop. A stop is asked for in the run
store (``RunStore.request_stop``, from any process: the Stop button, ``python -m core stop``) or directly
(``RunControl.stop``); the run then ends between steps, and an LLM call or a query in flight is abandoned at once
(the query is also cancelled through the backend's ``cancel`` hook where it has one; the LLM call makes no further
attempt, ``ChatLLM.cancel``).

    control = RunControl(store, run_id)       # beats and watches for a stop until closed
    control.check()                           # between steps: raises RunStopped once stopped
    reply = control.call(llm.complete, ...)   # in flight: RunStopped as soon as the run is stopped
"""
from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable

from core.store.runs import HEARTBEAT_S, RunStore

POLL_S = 0.25  # how often the owner looks for a stop asked for in the run store


class RunStopped(Exception):
    """The analyst stopped the run."""


class RunInterrupted(RunStopped):
    """The process driving the run is stopping (SIGTERM, SIGINT): the run is kept ``interrupted``, to be resumed
    from its last checkpoint; the message says why."""


class RunControl:
    """The heartbeat and stop of one run driven by this process (a watcher thread until ``close``)."""

    def __init__(self, store: RunStore | None, run_id: str):
        self.run_id = run_id
        self._store = store
        self._stopped = threading.Event()
        self._interrupted = ""  # why the run is interrupted rather than stopped (its process is stopping)
        self._closed = threading.Event()
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        if store is not None:
            threading.Thread(target=self._watch, name=f"control-{run_id}", daemon=True).start()

    def _watch(self) -> None:
        last_beat = 0.0
        while not self._closed.wait(POLL_S):
            try:
                if time.monotonic() - last_beat >= HEARTBEAT_S:
                    last_beat = time.monotonic()
                    asked = self._store.beat(self.run_id)
                else:
                    asked = self._store.stop_requested(self.run_id)
            except Exception:  # a busy or broken store: the next poll tries again
                continue
            if asked:
                self.stop()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def stop(self) -> None:
        """Stop the run: the next check raises RunStopped, and whatever is in flight is cancelled."""
        with self._lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
            hooks = list(self._hooks)
        for hook in hooks:
            try:
                hook()
            except Exception:  # best effort: the abandoned call ends by its own timeout
                pass

    def interrupt(self, reason: str) -> None:
        """Stop the run as interrupted (RunInterrupted with ``reason``), not as stopped by the analyst."""
        self._interrupted = self._interrupted or reason
        self.stop()

    def _stopped_error(self) -> RunStopped:
        if self._interrupted:
            return RunInterrupted(self._interrupted)
        return RunStopped(f"run {self.run_id} was stopped")

    def check(self) -> None:
        """Raise RunStopped (RunInterrupted) when the run was stopped (called between steps)."""
        if self._stopped.is_set():
            raise self._stopped_error()

    def call(self, fn: Callable, *args, cancel: Callable[[], None] | None = None, **kwargs):
        """``fn(*args, **kwargs)`` in a worker thread, waited for until it returns (its result or its exception) or
        the run is stopped (RunStopped; ``cancel`` is then called, and the worker abandoned)."""
        self.check()
        wake, box = threading.Event(), {}
        hooks = [wake.set] + ([cancel] if cancel else [])

        def work():
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as e:  # handed to the caller
                box["error"] = e
            finally:
                wake.set()

        with self._lock:
            self._hooks.extend(hooks)
        try:
            if self._stopped.is_set():  # stopped while the hooks were added
                wake.set()
            else:
                # in the caller's context: LangGraph's stream writer (events emitted from inside the call, e.g.
                # an LLM retry) and LangChain's callbacks live in context variables
                context = contextvars.copy_context()
                threading.Thread(target=context.run, args=(work,), name=f"call-{self.run_id}", daemon=True).start()
            wake.wait()
            if "value" not in box and "error" not in box:
                raise self._stopped_error()
        finally:
            with self._lock:
                self._hooks = [h for h in self._hooks if not any(h is k for k in hooks)]
        if "error" in box:
            raise box["error"]
        return box["value"]

    def close(self) -> None:
        self._closed.set()


def call(control: RunControl | None, fn: Callable, *args, cancel: Callable[[], None] | None = None, **kwargs):
    """``control.call(...)``, or ``fn(...)`` directly for a run without control."""
    if control is None:
        return fn(*args, **kwargs)
    return control.call(fn, *args, cancel=cancel, **kwargs)
