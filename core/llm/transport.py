"""The model client's HTTP transport (httpx): every reply body is read with a byte cap, so a server sending hundreds
of megabytes is cut at the cap instead of read whole, and each attempt in flight (``Flight``) can be abandoned at
once: its connection is shut, so a server that checks stops generating, and the thread reading it wakes."""
from __future__ import annotations

import contextvars
import json
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from functools import cache
from urllib.parse import urlsplit

import httpx

#: Bytes of a reply body per character of the reply cap: a plain reply is JSON (a character takes up to 6 bytes
#: escaped); a streamed one frames every piece (about 200 bytes of JSON per piece of a few characters).
BODY_BYTES_PER_CHAR, STREAM_BYTES_PER_CHAR, SLACK_BYTES = 8, 256, 1 << 20


@cache
def tls() -> ssl.SSLContext:
    """The process's one TLS context, as httpx makes its default (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR):
    making one reads the roots, about 35 ms of CPU, which every model client and server probe of a run paid."""
    return httpx.create_ssl_context()


class ReplyTooLarge(Exception):
    """A reply body past its byte cap: reading stopped there."""


class Flight:
    """One LLM attempt in flight, shared by the thread reading its reply and the one keeping its time limits:
    when it began, when its first and latest pieces came, the characters read, and its HTTP response once the
    headers came (to shut its connection when the attempt is abandoned)."""

    def __init__(self):
        self.changed = threading.Condition()
        self.began = self.latest = time.monotonic()
        self.first: float | None = None
        self.chars = 0
        self.done = False
        self.abandoned = False
        self.unstreamed = False  # a streamed request was answered with one plain reply (given as a stream)
        self._responses: list[httpx.Response] = []

    def piece(self, chars: int) -> None:
        """``chars`` more characters of the reply came."""
        with self.changed:
            self.latest = time.monotonic()
            self.first = self.first or self.latest
            self.chars += chars
            self.changed.notify_all()

    def finish(self) -> None:
        with self.changed:
            self.done = True
            self.changed.notify_all()

    def opened(self, response: httpx.Response) -> None:
        with self.changed:
            self._responses.append(response)
            abandoned = self.abandoned
        if abandoned:
            _shut(response)

    def abandon(self) -> None:
        """Stop the attempt: no more is read, and its connection is shut (the server sees the client gone)."""
        with self.changed:
            self.abandoned = True
            responses = list(self._responses)
        for response in responses:
            _shut(response)


def _shut(response: httpx.Response) -> None:
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked in another thread; the server sees a FIN
        except OSError:
            pass


#: The attempt the current thread reads (set by the thread running it).
current: contextvars.ContextVar[Flight | None] = contextvars.ContextVar("llm_flight", default=None)


class _Capped(httpx.SyncByteStream):
    def __init__(self, stream, limit: int):
        self._stream, self._limit, self._read = stream, limit, 0

    def __iter__(self) -> Iterator[bytes]:
        for part in self._stream:
            self._read += len(part)
            if self._read > self._limit:
                raise ReplyTooLarge(f"the server's reply passed {self._limit:,} bytes, far more than the reply cap "
                                    "allows: reading stopped there")
            yield part

    def close(self) -> None:
        self._stream.close()


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url`` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, less NO_PROXY), as httpx
    would use it with its own transport."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


class CappedTransport(httpx.HTTPTransport):
    """httpx's transport, each response body capped at ``max_chars`` of reply (in bytes: BODY_BYTES_PER_CHAR a
    character, STREAM_BYTES_PER_CHAR for a stream) and handed to the attempt in flight."""

    def __init__(self, max_chars: int, **kwargs):
        super().__init__(verify=tls(), **kwargs)
        self._body = max_chars * BODY_BYTES_PER_CHAR + SLACK_BYTES
        self._stream = max_chars * STREAM_BYTES_PER_CHAR + SLACK_BYTES

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        limit = self._stream if "event-stream" in response.headers.get("content-type", "") else self._body
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            response.close()
            raise ReplyTooLarge(f"the server announced a reply of {int(declared):,} bytes, far more than the reply "
                                f"cap allows ({limit:,}): not read")
        capped = httpx.Response(response.status_code, headers=response.headers,
                                stream=_Capped(response.stream, limit), extensions=response.extensions)
        flight = current.get()
        if flight is not None:
            flight.opened(capped)
        if response.status_code == 200 and "json" in response.headers.get("content-type", "") and _streamed(request):
            return _as_stream(capped, flight)
        return capped


def _streamed(request: httpx.Request) -> bool:
    try:
        return json.loads(request.content).get("stream") is True
    except (ValueError, AttributeError, httpx.RequestNotRead):
        return False


def _as_stream(response: httpx.Response, flight: Flight | None) -> httpx.Response:
    """A plain chat completion that answers a streamed request, as the stream it stands for (so the reply is used
    rather than asked for again); anything else as it came."""
    data = response.read()
    try:
        body = json.loads(data)
        message = body["choices"][0]["message"]
        text, finish = message.get("content") or "", body["choices"][0].get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return httpx.Response(response.status_code, headers=response.headers, content=data,
                              extensions=response.extensions)
    base = {key: body.get(key) for key in ("id", "created", "model")}

    def event(choices: list, **extra) -> bytes:
        return f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': choices, **extra})}\n\n".encode()

    events = (event([{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}])
              + event([{"index": 0, "delta": {}, "finish_reason": finish}])
              + (event([], usage=body["usage"]) if isinstance(body.get("usage"), dict) else b"") + b"data: [DONE]\n\n")
    if flight is not None:
        flight.unstreamed = True
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type",
                                                                              "content-encoding")}
    return httpx.Response(200, headers={**headers, "content-type": "text/event-stream"}, content=events,
                          extensions=response.extensions)
