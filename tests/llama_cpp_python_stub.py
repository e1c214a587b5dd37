"""A scripted stand-in for llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``), answering
as its source says it does (llama_cpp/server/app.py and errors.py): ``GET /v1/models`` lists only each model's id
(``object``, ``owned_by: me``, ``permissions``); no ``/props``, no ``/api/show`` (FastAPI's 404 ``{"detail": "Not
Found"}``); ``POST /extras/tokenize`` (``{"tokens": [...]}``) and ``/extras/tokenize/count`` (``{"count": n}``)
for ``{"input", "model"}``; chat completions through the model's chat template (ChatML here, as Qwen's), refused
before any computing when the prompt's tokens reach the window ``n_ctx``: HTTP 400 with ``{"error": {"message":
"This model's maximum context length is N tokens. However, you requested ...", "type": "invalid_request_error",
"param": "messages", "code": "context_length_exceeded"}}``; streamed with no usage in the stream (``usage``: with
it, as a server following OpenAI's ``stream_options`` does), plain with it.
Its tokenizer is a stand-in (words, punctuation and line breaks a token each; ChatML's markers one each), so a
test knows every count. Replies come from a script, not a model."""
from __future__ import annotations

import json
import re

from tests.stub_server import StubServer, completion, send, send_json

_TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|[^\w ]")


def tokenize(text: str) -> list[int]:
    """The stand-in tokenizer: a token per word, per punctuation mark or line break, per ChatML marker."""
    return [hash(t) % 50_000 for t in _TOKEN.findall(text)]


def chatml(messages: list[dict]) -> str:
    """The prompt Qwen's chat template makes of ``messages``, with the reply's opening."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + \
        "<|im_start|>assistant\n"


class LlamaCppPython(StubServer):
    def __init__(self, replies: list[str], n_ctx: int = 2048, alias: str = "stand-in", usage: bool = False):
        self.replies, self.n_ctx, self.alias, self.usage = list(replies), n_ctx, alias, usage
        self.prompt_tokens: list[int] = []  # each chat request's prompt tokens, as the server counts them
        models = {"object": "list", "data": [{"id": alias, "object": "model", "owned_by": "me", "permissions": []}]}
        super().__init__({"GET /v1/models": models, "GET *": self._missing, "POST *": self._missing,
                          "POST /extras/tokenize": self._tokenize, "POST /extras/tokenize/count": self._count,
                          "POST /v1/chat/completions": self._chat}, protocol_version="HTTP/1.1")

    def _missing(self, handler, body: dict) -> None:
        send_json(handler, 404, {"detail": "Not Found"})

    def _tokenize(self, handler, body: dict) -> None:
        send_json(handler, 200, {"tokens": tokenize(body["input"])})

    def _count(self, handler, body: dict) -> None:
        send_json(handler, 200, {"count": len(tokenize(body["input"]))})

    def _chat(self, handler, body: dict) -> None:
        prompt = len(tokenize(chatml(body["messages"])))
        self.prompt_tokens.append(prompt)
        if prompt >= self.n_ctx:
            asked = body.get("max_tokens") or 0
            message = (f"This model's maximum context length is {self.n_ctx} tokens. However, you requested "
                       f"{asked + prompt} tokens ({prompt} in the messages, {asked} in the completion). Please "
                       "reduce the length of the messages or completion.")
            return send_json(handler, 400, {"error": {"message": message, "type": "invalid_request_error",
                                                      "param": "messages", "code": "context_length_exceeded"}})
        text = self.replies.pop(0)
        if not body.get("stream"):
            return send_json(handler, 200, completion(text, prompt, len(tokenize(text))))
        chunks = [{"role": "assistant", "content": ""}, {"content": text}]
        data = "".join(f"data: {json.dumps(_chunk(delta))}\n\n" for delta in chunks)
        data += f"data: {json.dumps(_chunk({}, 'stop'))}\n\n"
        if self.usage:
            counts = {"prompt_tokens": prompt, "completion_tokens": len(tokenize(text))}
            data += f"data: {json.dumps({**_chunk({}), 'choices': [], 'usage': counts})}\n\n"
        data += "data: [DONE]\n\n"
        send(handler, 200, data.encode(), "text/event-stream")


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "chatcmpl-l", "object": "chat.completion.chunk", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
