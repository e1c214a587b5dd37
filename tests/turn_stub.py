"""An OpenAI-compatible stub server that answers by turn, for many runs at once (the job queue's tests and
bench/bench_workers.py): the reply to a chat completion is ``script[n]``, n the number of assistant messages in
the request (the last one for any later turn), after ``latency`` seconds; requests are served concurrently. At turn
``hold_at`` a request waits until ``release`` is set (a model call in flight, for a worker to be killed in).
``calls`` counts the requests per (conversation, turn): a conversation is named by its first user message."""
from __future__ import annotations

import threading
import time
from collections import Counter

from tests.stub_server import StubServer, completion, send_json


class TurnStub(StubServer):
    def __init__(self, script: list[str], latency: float = 0.0, hold_at: int | None = None):
        self.script, self.latency, self.hold_at = script, latency, hold_at
        self.release, self.held = threading.Event(), threading.Event()
        self.calls: Counter = Counter()
        self._lock = threading.Lock()
        super().__init__({"POST /v1/chat/completions": self._chat})  # no /tokenize, no /api/show: a plain server

    def _chat(self, handler, body: dict) -> None:
        messages = body.get("messages", [])
        turn = sum(m.get("role") == "assistant" for m in messages)
        first = next((m.get("content") for m in messages if m.get("role") == "user"), "")
        with self._lock:
            self.calls[(str(first)[:200], turn)] += 1
        if turn == self.hold_at:
            self.held.set()
            while not self.release.wait(0.05):
                pass
        time.sleep(self.latency)
        send_json(handler, 200, completion(self.script[min(turn, len(self.script) - 1)]))

    def repeated(self) -> dict:
        """The (conversation, turn) pairs asked more than once, with how often."""
        with self._lock:
            return {k: n for k, n in self.calls.items() if n > 1}

    def close(self) -> None:
        self.release.set()
        super().close()
