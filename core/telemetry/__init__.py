"""Runs as OpenTelemetry traces, sent over OTLP/HTTP when an endpoint is configured (``PLANRAG_OTLP_ENDPOINT``, or
the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and their headers); with
none, nothing is loaded or sent. Spans leave through a bounded queue on a background thread: a dead or slow
receiver never slows or fails a run; spans it could not take are counted (``status``)."""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from core.config.secrets import scrub

#: how long (s) one export may wait for the receiver (its own thread; the run never waits for it)
EXPORT_TIMEOUT_S = 5.0
#: spans kept waiting for the receiver at most; more are dropped and counted
QUEUE_SIZE = 2048


@dataclass
class Status:
    """What the exporter did in this process: spans ``sent``, ``dropped`` (queue full or refused by the receiver)
    and the ``endpoint`` (None: tracing is off)."""

    endpoint: str | None
    sent: int = 0
    dropped: int = 0


def endpoint() -> str | None:
    """The OTLP/HTTP traces URL configured, or None (tracing off)."""
    own = os.environ.get("PLANRAG_OTLP_ENDPOINT", "").strip()
    if own:
        return own.rstrip("/") + "/v1/traces"
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return base.rstrip("/") + "/v1/traces" if base else None


class _Tracing:
    """One tracer provider for the process, its exporter's counts and the ids a run's root span takes."""

    def __init__(self, url: str):
        from core.telemetry.export import open_provider  # heavy: the OpenTelemetry SDK, only when configured
        self.status = Status(url)
        self.provider, self.tracer, self.ids = open_provider(url, self.status, EXPORT_TIMEOUT_S, QUEUE_SIZE)


_lock = threading.Lock()
_tracing: _Tracing | None = None


def tracing() -> _Tracing | None:
    """The process's tracing as configured now (opened on first use; None when no endpoint is set)."""
    global _tracing
    url = endpoint()
    with _lock:
        if url is None:
            return None
        if _tracing is None or _tracing.status.endpoint != url:
            if _tracing is not None:
                _tracing.provider.shutdown()
            _tracing = _Tracing(url)
        return _tracing


def status() -> Status:
    """Spans sent and dropped so far in this process (for the Settings page)."""
    url = endpoint()
    with _lock:
        return _tracing.status if _tracing is not None and _tracing.status.endpoint == url else Status(url)


def flush(timeout_s: float = EXPORT_TIMEOUT_S) -> None:
    """Send the spans waiting now (at most ``timeout_s``)."""
    with _lock:
        current = _tracing
    if current is not None:
        current.provider.force_flush(int(timeout_s * 1000))


def describe() -> str:
    """One line for the Settings page: where traces go and how many spans were sent and dropped."""
    now = status()
    if now.endpoint is None:
        return ("Traces: off. Set OTEL_EXPORTER_OTLP_ENDPOINT (or PLANRAG_OTLP_ENDPOINT) to send each run as an "
                "OpenTelemetry trace (README: Use with Phoenix / Langfuse / any OTLP backend).")
    return (f"Traces: each run is sent to {scrub(now.endpoint)} (OTLP/HTTP); in this process {now.sent} spans sent, "
            f"{now.dropped} dropped (receiver unreachable or too slow).")


_group: ContextVar[str | None] = ContextVar("planrag_trace_group", default=None)


@contextmanager
def grouped(name: str) -> Iterator[None]:
    """Runs made inside belong to group ``name`` (a benchmark): their run spans carry it as OpenInference's
    ``session.id``, which backends such as Phoenix group traces by."""
    token = _group.set(name)
    try:
        yield
    finally:
        _group.reset(token)


def group() -> str | None:
    """The group runs made now belong to (``grouped``), or None."""
    return _group.get()
