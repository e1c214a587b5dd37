"""The job queue's tasks (core.jobs.queue), as a worker runs them: drive a run, run a benchmark item. Each is
safe to run again (a job put back in the queue after its worker was lost): a run goes on from its last
checkpoint, an item with a result is not run twice."""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator

from core.agents.runtime import AgentRuntime, RunNotPaused
from core.config import home
from core.config import settings as config
from core.config.secrets import scrub
from core.jobs.code import code_version
from core.model.events import ErrorEvent, Event
from core.model.run_settings import RunSettings
from core.store.runs import HEARTBEAT_S, STALE_S, PauseTaken, RunStore


class StoreLost(Exception):
    """The team store went away while a benchmark item ran: the item is retried once."""


class OtherCode(Exception):
    """A job queued by other code than this worker's."""


_runtimes: dict[str, AgentRuntime] = {}
_runtimes_lock = threading.Lock()


def _same_code(code: str) -> None:
    if code and code != code_version():
        raise OtherCode(f"this worker runs other code ({code_version()}) than the app that queued the job ({code}): "
                        "update the worker's checkout (or the app's) so they match, then resume")


def _runtime(llm: dict | None) -> AgentRuntime:
    """This worker's runtime for runs asked with the LLM settings ``llm`` (its own key, DQA folder and home)."""
    key = json.dumps(llm, sort_keys=True)
    with _runtimes_lock:
        found = _runtimes.get(key)
        if found is None:
            home.use_fallback()
            found = _runtimes[key] = AgentRuntime(config.DATA_HOME, llm_settings=config.LLMSettings(**(llm or {})))
    return found


def _begin(runtime: AgentRuntime, action: str, run_id: str, branch: dict | None) -> Iterator[Event] | None:
    """The run's events from where it is; None when there is nothing to drive (stopped while queued, ended, or
    driven by another worker). A run whose old owner may still be alive on another machine is waited for until
    its heartbeat is stale."""
    store = runtime.store
    deadline = time.monotonic() + STALE_S + 2 * HEARTBEAT_S
    while (record := store.get(run_id, events=False)).status == "running" and time.monotonic() < deadline:
        time.sleep(HEARTBEAT_S)
    if record.status not in ("queued", "interrupted"):
        return None
    try:
        if action in ("start", "branch") and not runtime.checkpointed(run_id):
            store.claim_run(run_id, ("queued", "interrupted"))
            if action == "start":
                return runtime.iter_start(RunSettings.from_dict(record.settings), run_id)
            return runtime.iter_branch(branch["parent"], branch["step"], new_id=run_id, **branch["changes"])
        return runtime.iter_continue(run_id, ("queued", "interrupted"))
    except (PauseTaken, RunNotPaused):  # another worker took it first
        return None


def drive_run(action: str, run_id: str, llm: dict | None = None, branch: dict | None = None,
              code: str = "") -> str:
    """Drive run ``run_id`` (recorded ``queued`` by the app) until it pauses or ends: ``start`` it, ``continue``
    it from its checkpoint (a review or a resume claimed by the app), or start it as a ``branch`` (parent, step,
    changes). A failure outside the agent's own loop (no data here, a broken model configuration, other code)
    ends the run as failed with the reason, and fails the job. Returns the run's status."""
    runtime = None
    try:
        _same_code(code)
        runtime = _runtime(llm)
        events = _begin(runtime, action, run_id, branch)
        if events is None:
            return "not driven: " + runtime.store.get(run_id, events=False).status
        for _ in events:  # each event is stored as it comes
            pass
        return runtime.store.get(run_id, events=False).status
    except Exception as e:
        message = scrub(f"worker {socket.gethostname()}:{os.getpid()} could not drive the run: {e}")
        store = runtime.store if runtime is not None else RunStore(config.DATA_HOME / "runs.sqlite")
        store.fail_undriven(run_id, ErrorEvent(message=message, error_kind="worker"))
        raise


def bench_item(config: dict, key: str, budget: str | None = None, code: str = "") -> str:
    """Run the benchmark item ``key`` of the benchmark ``config`` describes, unless it has a result; what came of
    it. A failure is kept as the item's not-run record, with the reason."""
    from core.benchmark.queued import run_item  # heavy: the benchmark runner

    return run_item(config, key, budget, check=lambda: _same_code(code))
