"""A run's events as OpenTelemetry spans (OpenInference and GenAI semantic conventions). One trace per run, its
ids derived from the run id: a root ``agent run`` span (question, technique, database, review mode, outcome,
decision, rank, regret; reviews and stops as events) sent when the run ends, and for each stretch driven without a
pause a ``run segment`` span under it (a pause as its last event), holding one span per LLM call (its messages
read through LangChain's callbacks) and per query."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextvars import ContextVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

from core.config.secrets import scrub
from core.model.events import ActionEvent, ErrorEvent, Event, ObservationEvent
from core.model.outcome import RunOutcome
from core.telemetry import group, tracing

#: characters of a message, query or answer kept in a span (the rest is cut, as the store's transcript does)
TEXT_CAP = 4000


class _Prompts(BaseCallbackHandler):
    """The messages of the last chat model call made while a traced run's events are produced (LangChain's
    callbacks: the model client needs no change)."""

    def __init__(self):
        self.last: list = []

    def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
        self.last = list(messages[0]) if messages else []


_prompts: ContextVar[_Prompts | None] = ContextVar("planrag_traced_prompts", default=None)
register_configure_hook(_prompts, inheritable=True)  # LangChain hands every call made under it to the handler


def _text(value) -> str:
    text = scrub(str(value or ""))
    return text if len(text) <= TEXT_CAP else text[:TEXT_CAP] + "…"


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def _input_messages(messages: list) -> dict:
    """A chat call's messages as OpenInference's ``llm.input_messages`` attributes (each capped)."""
    out = {}
    for i, message in enumerate(messages):
        out[f"llm.input_messages.{i}.message.role"] = _ROLES.get(message.type, message.type)
        out[f"llm.input_messages.{i}.message.content"] = _text(message.content)
    return out


def run_ids(run_id: str) -> tuple[int, int]:
    """The trace id and root span id of run ``run_id``."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()
    return int(digest[:32], 16) or 1, int(digest[32:48], 16) or 1


def traced(run_id: str, store, question: str, events: Iterator[Event]) -> Iterator[Event]:
    """``events`` (one stretch of run ``run_id`` driven by the runtime), each passed on unchanged, traced when an
    endpoint is configured; at the stretch's end the run's record in ``store`` gives its pause or outcome."""
    tracer = tracing()
    if tracer is None:
        yield from events
        return
    yield from _Segment(tracer, run_id, store, question).follow(events)


def _safely(action, *args) -> None:
    """``action(*args)``; a failure to trace is the trace's loss, never the run's."""
    try:
        action(*args)
    except Exception:  # noqa: BLE001 (tracing is optional: whatever breaks it, the run goes on)
        pass


class _Segment:
    def __init__(self, tracing_, run_id: str, store, question: str):
        from opentelemetry import trace  # heavy: the OpenTelemetry API, only when tracing is configured
        self.trace, self.tracing, self.run_id, self.store, self.question = trace, tracing_, run_id, store, question
        self.record = store.get(run_id, events=False)
        trace_id, span_id = run_ids(run_id)
        self.root = trace.set_span_in_context(trace.NonRecordingSpan(trace.SpanContext(
            trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))))
        self.action: ActionEvent | None = None
        self.prompts = _Prompts()

    def follow(self, events: Iterator[Event]) -> Iterator[Event]:
        span = self.tracing.tracer.start_span("run segment", context=self.root, attributes={
            "openinference.span.kind": "CHAIN", "planrag.run_id": self.run_id,
            "planrag.technique": self.record.settings.technique})
        context = self.trace.set_span_in_context(span)
        events = iter(events)
        try:
            while True:
                hook = _prompts.set(self.prompts)  # only while the run makes its next event: the caller's context
                try:                                 # is left as it was between events
                    event = next(events)
                except StopIteration:
                    break
                finally:
                    _prompts.reset(hook)
                _safely(self._on, event, span, context)
                yield event
        finally:
            _safely(self._close, span)

    def _on(self, event: Event, span, context) -> None:
        if event.llm is not None:
            self._llm(event, context)
        if isinstance(event, ActionEvent):
            self.action = event
        elif isinstance(event, ObservationEvent) and self.action is not None:
            self._query(self.action, event, context)
            self.action = None
        elif isinstance(event, ErrorEvent) and event.error_kind == "stopped":
            span.add_event("stop", {"planrag.message": _text(event.message)}, timestamp=_ns(event.at))

    def _llm(self, event: Event, context) -> None:
        usage, model = event.llm, self.record.settings.llm
        reply = _text(usage.reply)
        span = self.tracing.tracer.start_span("llm call", context=context, start_time=_ns(event.at - usage.latency_s),
                                              attributes={
            "openinference.span.kind": "LLM", "llm.model_name": model, "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model, "llm.token_count.prompt": usage.prompt_tokens,
            "llm.token_count.completion": usage.completion_tokens,
            "llm.token_count.total": usage.prompt_tokens + usage.completion_tokens,
            "gen_ai.usage.input_tokens": usage.prompt_tokens, "gen_ai.usage.output_tokens": usage.completion_tokens,
            "planrag.llm.call": usage.call, "planrag.llm.latency_s": usage.latency_s,
            "planrag.llm.estimated": usage.estimated, "planrag.llm.cached": usage.cached,
            "output.value": reply, "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": reply, **_input_messages(self.prompts.last)})
        span.end(end_time=_ns(event.at))

    def _query(self, action: ActionEvent, seen: ObservationEvent, context) -> None:
        kind = self.record.settings.db
        start = seen.at - seen.latency_s if seen.latency_s else action.at
        span = self.tracing.tracer.start_span("database query", context=context, start_time=_ns(start), attributes={
            "openinference.span.kind": "TOOL", "tool.name": action.tool, "db.system": kind,
            "db.query.text": _text(seen.executed or action.query), "planrag.query.language": action.language,
            "db.response.returned_rows": seen.total_rows, "planrag.query.latency_s": seen.latency_s,
            "input.value": _text(action.query), "output.value": _text(seen.text)})
        if seen.error is not None:
            span.set_attribute("error.type", seen.error_kind or "error")
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, _text(seen.error)))
        span.end(end_time=_ns(max(seen.at, start)))

    def _close(self, span) -> None:
        record = self.store.get(self.run_id, events=False)
        if record.status == "paused" and record.pause:
            span.add_event("pause", {"planrag.pause.kind": str(record.pause.get("kind", "")),
                                     "planrag.pause.plan": [_text(s) for s in record.pause.get("plan") or []]})
        span.set_attribute("planrag.status", record.status)
        span.end()
        if record.status not in ("paused", "running", "queued"):
            self._run_span(record)

    def _run_span(self, record) -> None:
        settings, outcome = record.settings, record.outcome or RunOutcome()
        placement = outcome.placement or {}
        attributes = {
            "openinference.span.kind": "AGENT", "planrag.run_id": self.run_id,
            "input.value": _text(self.question), "planrag.question": _text(self.question),
            "planrag.scenario": settings.scenario, "planrag.question_number": str(settings.question),
            "planrag.technique": settings.technique, "planrag.database": settings.db,
            "planrag.review_mode": settings.hitl, "planrag.review_queries": bool(settings.review_queries),
            "llm.model_name": settings.llm, "planrag.outcome": record.status,
            "output.value": _text(outcome.final_answer), "planrag.llm_calls": outcome.llm_calls}
        for name, value in (("planrag.decision", outcome.decision), ("planrag.correct", outcome.correct),
                            ("planrag.error", outcome.error), ("planrag.rank", placement.get("rank")),
                            ("planrag.of", placement.get("of")), ("planrag.regret", placement.get("regret")),
                            ("planrag.optimal", placement["regret"] == 0 if "regret" in placement else None)):
            if value is not None:
                attributes[name] = value if isinstance(value, (bool, int, float)) else _text(value)
        if group() is not None:
            attributes.update({"session.id": group(), "planrag.benchmark": group()})
        with self.tracing.ids.fixed(*run_ids(self.run_id)):
            span = self.tracing.tracer.start_span("agent run", start_time=_ns(record.created), attributes=attributes)
        for review in self.store.reviews(self.run_id):
            span.add_event("stop" if review["action"] == "stop" else "review", {
                "planrag.reviewer": str(review["reviewer"] or ""), "planrag.review.kind": str(review["kind"] or ""),
                "planrag.review.action": str(review["action"] or ""),
                "planrag.review.note": _text((review["review"] or {}).get("note"))}, timestamp=_ns(review["at"]))
        if record.status != "finished":
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, _text(outcome.error)))
        span.end()
