"""Stub model servers that misbehave on purpose, on free local ports (tests of issue 45 items 1-2 and issue 44
section D): a stream paced by a script of gaps (``PacedStream``: slow but flowing, silent before its first piece,
or silent mid-reply), a stream that never ends, and a plain reply of hundreds of megabytes. Every loop is bounded,
and each server records whether the client went away (``gone``) and how much it sent (``sent_bytes``)."""
from __future__ import annotations

import json
import select
import socket
import threading
import time

from tests.stub_server import StubServer


def _chunk(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    data = {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


USAGE = (b'data: {"id": "chatcmpl-h", "object": "chat.completion.chunk", "created": 0, "model": "stand-in", '
         b'"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}\n\n')


class _Hostile(StubServer):
    def __init__(self):
        self.gone = threading.Event()  # the client closed the connection while the server still sent
        self.closing = threading.Event()
        self.sent_bytes = 0
        self.requests: list[dict] = []
        super().__init__({"POST /v1/chat/completions": self._answer}, protocol_version="HTTP/1.1")

    def _answer(self, handler, body: dict) -> None:
        self.requests.append(body)
        try:
            self.serve(handler, body)
        except OSError:  # the client shut the connection
            self.gone.set()
        handler.close_connection = True

    def write(self, handler, data: bytes) -> None:
        handler.wfile.write(data)
        handler.wfile.flush()
        self.sent_bytes += len(data)

    def wait(self, handler, seconds: float) -> bool:
        """Wait ``seconds`` as a server that checks its client does (llama.cpp's): False as soon as the client has
        closed the connection (``gone`` set) or the stub closes."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.closing.is_set():
                return False
            readable, _, _ = select.select([handler.connection], [], [], min(left, 0.05))
            if readable and not handler.connection.recv(1, socket.MSG_PEEK):
                self.gone.set()
                return False
        return True

    def head(self, handler, content_type: str = "text/event-stream", length: int | None = None) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        if length is not None:
            handler.send_header("Content-Length", str(length))
        handler.send_header("Connection", "close")
        handler.end_headers()

    def serve(self, handler, body: dict) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.closing.set()
        super().close()


class PacedStream(_Hostile):
    """Streams each reply of ``replies`` as ``[(wait_s, piece), ...]``: waits ``wait_s`` (the first: before the
    first piece, as a server reading the prompt), then sends the piece; then the finish, the usage and [DONE]."""

    def __init__(self, replies: list[list[tuple[float, str]]]):
        self.replies = list(replies)
        super().__init__()

    def serve(self, handler, body: dict) -> None:
        script = self.replies.pop(0)
        self.head(handler)
        self.write(handler, _chunk(""))
        for wait_s, piece in script:
            if not self.wait(handler, wait_s):
                return
            self.write(handler, _chunk(piece))
        self.write(handler, _chunk(None, "stop") + USAGE + b"data: [DONE]\n\n")


class EndlessStream(_Hostile):
    """A stream that never ends: the same piece again and again (at most ``most`` pieces, the test's bound) until
    the client goes away."""

    def __init__(self, piece: str = "word ", most: int = 5_000_000):
        self.piece, self.most, self.pieces = piece, most, 0
        super().__init__()

    def serve(self, handler, body: dict) -> None:
        self.head(handler)
        data = _chunk(self.piece)
        for self.pieces in range(1, self.most + 1):
            if self.closing.is_set():
                return
            self.write(handler, data)


class HugeReply(_Hostile):
    """Answers with one plain (not streamed) chat completion of ``size`` bytes, its content one long string, sent in
    1 MB parts until the client goes away (``announce``: with its Content-Length; else until the connection
    closes)."""

    def __init__(self, size: int = 300 << 20, announce: bool = False):
        self.size, self.announce = size, announce
        super().__init__()

    def serve(self, handler, body: dict) -> None:
        opening = b'{"id": "chatcmpl-h", "object": "chat.completion", "created": 0, "model": "stand-in", ' \
                  b'"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "'
        closing = b'"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'
        filler = self.size - len(opening) - len(closing)
        self.head(handler, "application/json", self.size if self.announce else None)
        self.write(handler, opening)
        part = b"x" * (1 << 20)
        while filler > 0 and not self.closing.is_set():
            self.write(handler, part[:filler])
            filler -= len(part)
        self.write(handler, closing)
