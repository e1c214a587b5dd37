"""The OpenTelemetry SDK set up for the workbench: a tracer provider whose spans go through a bounded
``BatchSpanProcessor`` to the OTLP/HTTP exporter, counting what was sent and dropped, and an id generator that lets
a run's root span take ids derived from the run id (so every segment of a paused run lands in one trace)."""
from __future__ import annotations

import threading

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

SERVICE = "planrag-workbench"


class RunIds(IdGenerator):
    """Random ids, except inside ``fixed(trace_id, span_id)``: a root span created there takes those."""

    def __init__(self):
        self._random, self._local = RandomIdGenerator(), threading.local()

    def fixed(self, trace_id: int, span_id: int):
        ids = self

        class _Fixed:
            def __enter__(self):
                ids._local.ids = (trace_id, span_id)

            def __exit__(self, *exc):
                ids._local.ids = None

        return _Fixed()

    def generate_trace_id(self) -> int:
        ids = getattr(self._local, "ids", None)
        return ids[0] if ids else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._local, "ids", None)
        return ids[1] if ids else self._random.generate_span_id()


class _Counting(SpanExporter):
    """The OTLP exporter, counting the spans the receiver took and those it did not."""

    def __init__(self, exporter: SpanExporter, status):
        self.exporter, self.status = exporter, status

    def export(self, spans):
        try:
            result = self.exporter.export(spans)
        except Exception:  # an exporter's defect must not reach the export thread's loop
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.status.sent += len(spans)
        else:
            self.status.dropped += len(spans)
        return result

    def shutdown(self):
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class _Bounded(BatchSpanProcessor):
    """A batch processor that counts the spans its full queue drops (the SDK drops them silently)."""

    def __init__(self, exporter, status, queue_size: int):
        super().__init__(exporter, max_queue_size=queue_size, max_export_batch_size=min(512, queue_size))
        self.status, self.queue_size = status, queue_size

    def on_end(self, span) -> None:
        queue = getattr(getattr(self, "_batch_processor", None), "_queue", None)  # the SDK's deque (pinned version)
        if queue is not None and len(queue) >= self.queue_size:
            self.status.dropped += 1
        super().on_end(span)


def open_provider(url: str, status, timeout_s: float, queue_size: int):
    """The tracer provider exporting to ``url``, its tracer and its ``RunIds``."""
    ids = RunIds()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}), id_generator=ids)
    exporter = _Counting(OTLPSpanExporter(endpoint=url, timeout=timeout_s), status)
    provider.add_span_processor(_Bounded(exporter, status, queue_size))
    return provider, provider.get_tracer("planrag.workbench"), ids
