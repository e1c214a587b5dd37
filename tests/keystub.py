"""A logging OpenAI-compatible stub on localhost for the credential tests: it answers chat completions from a
replay file's replies in order (or "OK") and records the Authorization header of every request it gets, so a test
can assert which keys it was sent."""
from __future__ import annotations

from tests.stub_server import StubServer, completion, send_json


class KeyStub(StubServer):
    def __init__(self, replies: list[str] | None = None):
        self.replies = list(replies or [])
        self.keys: list[str | None] = []  # every request's Authorization, in order
        super().__init__({"GET *": self._models, "POST *": self._chat})

    def _models(self, handler, body: dict) -> None:  # /models, /props: what a server reports of its model
        self.keys.append(handler.headers.get("Authorization"))
        send_json(handler, 200, {"object": "list", "data": []})

    def _chat(self, handler, body: dict) -> None:
        self.keys.append(handler.headers.get("Authorization"))
        send_json(handler, 200, completion(self.replies.pop(0) if self.replies else "OK", 1, 1))

    def got(self, key: str) -> bool:
        """Whether any request carried ``key``."""
        return any(key in (k or "") for k in self.keys)
