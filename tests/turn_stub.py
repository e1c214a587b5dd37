"""An OpenAI-compatible stub server that answers by turn, for many runs at once (the job queue's tests and
bench/bench_workers.py): the reply to a chat completion is ``script[n]``, n the number of assistant messages in
the request (the last one for any later turn), after ``latency`` seconds; requests are served concurrently. At turn
``hold_at`` a request waits until ``release`` is set (a model call in flight, for a worker to be killed in).
``calls`` counts the requests per (conversation, turn): a conversation is named by its first user message."""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(text: str, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict:
    return {"id": "chatcmpl-t", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many runs asking at once


class TurnStub:
    def __init__(self, script: list[str], latency: float = 0.0, hold_at: int | None = None):
        self.script, self.latency, self.hold_at = script, latency, hold_at
        self.release, self.held = threading.Event(), threading.Event()
        self.calls: Counter = Counter()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_error(404)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if not self.path.endswith("/chat/completions"):  # no /tokenize, no /api/show: a plain server
                    return self.send_error(404)
                messages = body.get("messages", [])
                turn = sum(m.get("role") == "assistant" for m in messages)
                first = next((m.get("content") for m in messages if m.get("role") == "user"), "")
                with outer._lock:
                    outer.calls[(str(first)[:200], turn)] += 1
                if turn == outer.hold_at:
                    outer.held.set()
                    while not outer.release.wait(0.05):
                        pass
                time.sleep(outer.latency)
                data = json.dumps(completion(outer.script[min(turn, len(outer.script) - 1)])).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the asking process is gone
                    pass

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def repeated(self) -> dict:
        """The (conversation, turn) pairs asked more than once, with how often."""
        with self._lock:
            return {k: n for k, n in self.calls.items() if n > 1}

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
