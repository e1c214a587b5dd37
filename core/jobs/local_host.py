"""The local run process (core.jobs.local): ``python -m core local-runs``, started by the app, drives the runs the
app hands it, each a core.jobs.runs.RunJob in a thread of its own as the threads mode drives them, and tells the
app what a page shows of a run beside its stored events (the runtime opened, the model call under way, the reply as
it streams, each event stored, the run's end). It reads the app's messages on its standard input and writes its
own on the standard output it was given (its own prints go to standard error); when its input closes (the app
ended), it interrupts its runs, kept to be resumed from their last checkpoint, and ends."""
from __future__ import annotations

import contextvars
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TextIO

from core import scenarios, telemetry
from core.config import settings as config
from core.config.secrets import scrub
from core.jobs import job, local, opening
from core.jobs.runs import Opener, RunJob
from core.model.events import Event
from core.model.run_settings import RunSettings

class Channel:
    """The messages to the app, one JSON line each, written whole by one thread at a time."""

    def __init__(self, out: TextIO):
        self._out, self._lock = out, threading.Lock()

    def send(self, run_id: str, kind: local.Relayed, **fields) -> None:
        with self._lock:
            try:
                self._out.write(json.dumps({"run_id": run_id, "kind": kind, **fields}) + "\n")
                self._out.flush()
            except (OSError, ValueError):  # the app is gone: its input closes next, and this process ends
                pass


class RelayedRun(RunJob):
    """A RunJob whose reply in flight, call under way, stored events and end are told to the app."""

    def __init__(self, run_id: str, settings: RunSettings, make_runtime: Callable,
                 iterate: Callable[..., Iterator[Event]], channel: Channel):
        self.channel = channel

        def opened():
            runtime = make_runtime()
            channel.send(run_id, "opened")
            return runtime

        def told(runtime) -> Iterator[Event]:
            for event in iterate(runtime):  # stored before it comes here
                channel.send(run_id, "event")
                yield event

        super().__init__(run_id, settings, opened, told)

    def _calling(self, attempt: dict) -> None:
        super()._calling(attempt)
        self.channel.send(self.run_id, "calling", calling=attempt)

    def _writing(self, piece: str) -> None:
        super()._writing(piece)
        self.channel.send(self.run_id, "piece", text=piece)

    def _drive(self) -> None:
        super()._drive()
        self.channel.send(self.run_id, "ended", error=scrub(str(self.error)) if self.error else None)
        if telemetry.endpoint():  # its spans sent (or dropped) since, for the app's Settings page
            threading.Thread(target=_tell_spans, args=(self.channel,), name="spans", daemon=True).start()


def _tell_spans(channel: Channel) -> None:
    """Send the spans waiting, then tell the app how many this process has sent and dropped (run id "")."""
    telemetry.flush()
    told = telemetry.status()
    channel.send("", "spans", sent=told.sent, dropped=told.dropped)


def _iterate(message: dict) -> Callable[..., Iterator[Event]]:
    """How the run ``message`` hands over is driven, once its runtime is open."""
    run_id = message["run_id"]
    if message["op"] == "start":
        settings = RunSettings.from_dict(message["settings"])
        return lambda runtime: runtime.iter_start(settings, run_id)
    if message["op"] == "continue":  # claimed by the app and marked interrupted for this process to take
        return lambda runtime: runtime.iter_continue(run_id, ("interrupted",))
    return lambda runtime: runtime.iter_branch(message["parent"], int(message["step"]), new_id=run_id,
                                               **message["changes"])


def _opener(fields: dict) -> Opener:
    llm, db = fields.get("llm"), fields.get("db")
    return Opener(fields.get("dqa_root"), config.LLMSettings(**llm) if llm else None,
                  config.DatabaseSettings(**db) if db else None)


def _drive(message: dict, channel: Channel) -> None:
    run_id = message["run_id"]
    settings = RunSettings.from_dict(message["settings"])
    run = RelayedRun(run_id, settings, _opener(message["opener"]), _iterate(message), channel)
    context = contextvars.copy_context()  # the session's scenarios folder, for the run's thread
    context.run(scenarios.use_folder, message.get("scenarios"))
    try:
        context.run(job.launch, run)
    except job.JobBusy as e:
        channel.send(run_id, "ended", error=str(e))


def _act(message: dict, channel: Channel) -> None:
    op = message.get("op")
    if op not in local.OPS or not isinstance(message.get("run_id"), str):
        raise ValueError(f"not a message of the app: op {str(op)[:40]!r}")
    if op in ("stop", "interrupt"):
        current = job.get(RunJob.kind, message["run_id"])
        if current is not None and not current.done:
            current.stop(str(message.get("by", ""))) if op == "stop" else current.interrupt(str(message["reason"]))
        return
    _drive(message, channel)


def serve(requests: TextIO, replies: TextIO) -> int:
    """Drive the runs ``requests`` hand over until it closes, telling ``replies`` how they go; 0 when it closed."""
    channel = Channel(replies)
    threading.Thread(target=opening.warm_up, name="warm-up", daemon=True).start()  # before the first run needs it
    while line := requests.readline(local.MAX_LINE):
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            print(f"local-runs: a line that is not a message was refused: {e}", file=sys.stderr, flush=True)
            continue
        try:
            _act(message, channel)
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # one bad message: said, the rest go on
            why = f"the local run process refused the run: {scrub(str(e))[:300]}"
            print(f"local-runs: {why}", file=sys.stderr, flush=True)
            if isinstance(message.get("run_id"), str) and message.get("op") in ("start", "continue", "branch"):
                channel.send(message["run_id"], "ended", error=why)
    return 0


def main(_args=None) -> int:
    """``python -m core local-runs``: the messages go out on the standard output this process was started with;
    anything else it prints goes to standard error."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    code = serve(sys.stdin, replies)
    job.shutdown()  # the app has ended: the runs left end interrupted, to be resumed from their last checkpoint
    return code
