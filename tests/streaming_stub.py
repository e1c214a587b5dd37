"""A stub OpenAI-compatible server that streams its replies (server-sent events, as OpenAI, vLLM and llama.cpp send
them), for the tests of issue 29 section 1: each reply is sent in ``pieces``; before the last piece the server
waits for ``release`` (an Event the test sets), so a test can look at the reply while it is being written
(``hold=False``: it does not wait); ``gap()``, when given, is how long it waits before each piece but the first (a
model's pace). ``sent`` records when each piece went out (time.time()). With ``streams=False`` it answers a streamed request with
one plain JSON body, as a server that does not stream."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from tests.stub_server import StubServer, completion, send_json


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class StreamingStub(StubServer):
    def __init__(self, replies: list[list[str]], streams: bool = True, hold: bool = True,
                 gap: Callable[[], float] | None = None):
        self.replies, self.streams, self.hold, self.gap = list(replies), streams, hold, gap
        self.release = threading.Event()
        self.sent: list[tuple[float, str]] = []
        self.requests: list[dict] = []
        super().__init__({"POST /v1/chat/completions": self._chat}, protocol_version="HTTP/1.1")

    def _chat(self, handler, body: dict) -> None:
        self.requests.append(body)
        pieces = self.replies.pop(0)
        if not (body.get("stream") and self.streams):
            return send_json(handler, 200, completion("".join(pieces), 100, 10))
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()

        def send(payload) -> None:
            handler.wfile.write(f"data: {payload}\n\n".encode())
            handler.wfile.flush()

        send(json.dumps(_chunk({"role": "assistant", "content": ""})))
        for i, piece in enumerate(pieces):
            if self.hold and i == len(pieces) - 1:
                self.release.wait(120)
            elif self.gap and i:
                time.sleep(self.gap())
            send(json.dumps(_chunk({"content": piece})))
            self.sent.append((time.time(), piece))
        send(json.dumps(_chunk({}, "stop")))
        send(json.dumps({**_chunk({}), "choices": [],
                         "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}))
        send("[DONE]")
        handler.close_connection = True

    def close(self) -> None:
        self.release.set()
        super().close()
