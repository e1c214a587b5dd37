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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class StreamingStub:
    def __init__(self, replies: list[list[str]], streams: bool = True, hold: bool = True,
                 gap: Callable[[], float] | None = None):
        self.replies, self.streams, self.hold, self.gap = list(replies), streams, hold, gap
        self.release = threading.Event()
        self.sent: list[tuple[float, str]] = []
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self.do_GET()
                outer.requests.append(body)
                pieces = outer.replies.pop(0)
                if not (body.get("stream") and outer.streams):
                    text = "".join(pieces)
                    data = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                                       "model": "stand-in", "choices": [{"index": 0, "message": {
                                           "role": "assistant", "content": text}, "finish_reason": "stop"}],
                                       "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                                                 "total_tokens": 110}}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()

                def send(payload) -> None:
                    self.wfile.write(f"data: {payload}\n\n".encode())
                    self.wfile.flush()

                send(json.dumps(_chunk({"role": "assistant", "content": ""})))
                for i, piece in enumerate(pieces):
                    if outer.hold and i == len(pieces) - 1:
                        outer.release.wait(120)
                    elif outer.gap and i:
                        time.sleep(outer.gap())
                    send(json.dumps(_chunk({"content": piece})))
                    outer.sent.append((time.time(), piece))
                send(json.dumps(_chunk({}, "stop")))
                send(json.dumps({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 0,
                                 "model": "stand-in", "choices": [],
                                 "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}))
                send("[DONE]")
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
