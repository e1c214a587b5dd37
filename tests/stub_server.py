"""What the tests' stub OpenAI-compatible servers share: a threading HTTP server on 127.0.0.1 (a free port) that
answers from a table of routes, JSON replies, the chat-completion body, 404 for what a stub does not serve, and
no request log. Each stub (tests/test_llm.py's StandIn, tests/streaming_stub.py, tests/turn_stub.py, ...) keeps
only its own routes."""
from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: A route's answer: a function of the request (its handler) and its JSON body ({} when none) that writes the
#: reply, or a dict, sent as JSON with status 200.
Route = Callable[[BaseHTTPRequestHandler, dict], None] | dict


def completion(text: str, prompt_tokens: int = 11, completion_tokens: int = 7, finish_reason: str = "stop") -> dict:
    """An OpenAI chat-completion body answering ``text``."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def send_stream(handler: BaseHTTPRequestHandler, body: dict) -> None:
    """A chat-completion ``body`` sent as a stream (server-sent events, as OpenAI-compatible servers stream): its text
    in one piece, its finish reason, its usage, ``[DONE]``."""
    choice = body["choices"][0]

    def chunk(delta: dict, finish=None, **extra) -> bytes:
        data = {"id": body["id"], "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return f"data: {json.dumps(data)}\n\n".encode()

    data = (chunk({"role": "assistant", "content": choice["message"]["content"]})
            + chunk({}, choice["finish_reason"])
            + chunk({}, usage=body["usage"]).replace(b'"choices": [{"index": 0, "delta": {}, "finish_reason": null}]',
                                                      b'"choices": []')
            + b"data: [DONE]\n\n")
    send(handler, 200, data, "text/event-stream")


def send(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str) -> None:
    """A whole reply; a client that has gone away is not an error."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
    except OSError:
        pass


def send_json(handler: BaseHTTPRequestHandler, status: int, body) -> None:
    send(handler, status, json.dumps(body).encode(), "application/json")


def not_found(handler: BaseHTTPRequestHandler, body: dict | None = None) -> None:
    send_json(handler, 404, {"error": "not found"})


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many runs asking at once


class StubServer:
    """Serves ``routes`` ("METHOD /path" -> Route; "METHOD *" answers that method's other paths; anything else is
    404) from daemon threads until ``close()``. ``url`` is its OpenAI base URL (…/v1); ``asked`` records the
    (method, path) of every request."""

    def __init__(self, routes: dict[str, Route], protocol_version: str = "HTTP/1.0"):
        self.routes = routes
        self.asked: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else {}
                outer.asked.append((self.command, self.path))
                route = outer.routes.get(f"{self.command} {self.path}", outer.routes.get(f"{self.command} *",
                                                                                           not_found))
                send_json(self, 200, route) if isinstance(route, dict) else route(self, body)

            do_GET = do_POST = answer

            def log_message(self, *args):
                pass

        Handler.protocol_version = protocol_version
        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
