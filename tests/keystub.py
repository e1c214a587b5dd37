"""A logging OpenAI-compatible stub on localhost for the credential tests: it answers chat completions from a
replay file's replies in order (or "OK") and records the Authorization header of every request it gets, so a test
can assert which keys it was sent."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class KeyStub:
    def __init__(self, replies: list[str] | None = None):
        self.replies = list(replies or [])
        self.keys: list[str | None] = []  # every request's Authorization, in order
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # /models, /props: what a server reports of its model
                outer.keys.append(self.headers.get("Authorization"))
                self._answer({"object": "list", "data": []})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.keys.append(self.headers.get("Authorization"))
                text = outer.replies.pop(0) if outer.replies else "OK"
                self._answer({"id": "c", "object": "chat.completion", "created": 0, "model": "stub",
                              "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def got(self, key: str) -> bool:
        """Whether any request carried ``key``."""
        return any(key in (k or "") for k in self.keys)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
