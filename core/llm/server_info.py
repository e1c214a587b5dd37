"""What an OpenAI-compatible server says about its model, when it says it cheaply: the context window and a count
of tokens by the model's own tokenizer.

The window, where each server kind says it: llama.cpp's ``GET /props`` (``default_generation_settings.n_ctx``, the
context it runs with), vLLM's ``GET /v1/models`` (``max_model_len``), llama.cpp's ``/v1/models``
(``meta.n_ctx_train``) and other servers' (``n_ctx``, ``context_length`` or ``context_window`` in the entry or its
``meta`` / ``metadata``; llama-cpp-python's lists only each model's id), Ollama's ``POST /api/show`` (``num_ctx``
among its parameters, else the model's ``context_length``). Each found window says where it came from (``Window.source``).

llama-cpp-python's server says its window nowhere but in the error of a request past it (``This model's maximum
context length is N tokens``, code ``context_length_exceeded``, raised after the prompt is tokenized, before any of
it is computed): ``window_from_error`` remembers it from there, so every later run of that server and model keeps
to it (and a run that met it goes on within it).

Token counts: llama.cpp's and vLLM's ``POST /tokenize``, llama-cpp-python's ``POST /extras/tokenize``.

A few short requests per server and model; what was found is remembered for the process. A server that did not
say its window (or was down) is asked again next time; one without a tokenize endpoint after ``FORGET_S``
seconds. The requests go through httpx, as the model's own do: no Authorization header follows a redirect to
another origin.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import httpx

from core.llm.transport import tls

TIMEOUT_S = 2.0
FORGET_S = 30.0
_lock = threading.Lock()
_windows: dict[tuple, Window] = {}  # (base URL, model, key) -> window
_tokenizers: dict[tuple, tuple[str | None, float]] = {}  # (base URL, key) -> (the path that counts, when asked)
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.M)


@dataclass(frozen=True)
class Window:
    """A context window in tokens, and where it came from (``llama.cpp GET /props (n_ctx)``)."""

    tokens: int
    source: str


def _request(url: str, api_key: str | None, body: dict | None = None) -> dict | None:
    """One probe through httpx, the HTTP client the model's own requests use (the OpenAI SDK's): the key goes to
    ``url`` and a redirect to the same origin, never to another origin."""
    headers = {"Authorization": f"Bearer {api_key or 'unused'}"}
    try:
        response = httpx.request("GET" if body is None else "POST", url, json=body, headers=headers,
                                 timeout=TIMEOUT_S, follow_redirects=True, verify=tls())
        found = response.json() if response.is_success else None
    except (httpx.HTTPError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _size(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def _from_props(body: dict | None) -> Window | None:
    settings = (body or {}).get("default_generation_settings") or {}
    size = _size(settings.get("n_ctx") if isinstance(settings, dict) else None) or _size((body or {}).get("n_ctx"))
    return Window(size, "llama.cpp GET /props (n_ctx)") if size else None


def _from_models(body: dict | None, model: str) -> Window | None:
    entries = (body or {}).get("data") or []
    if not isinstance(entries, list):
        return None
    for entry in sorted(entries, key=lambda e: e.get("id") != model if isinstance(e, dict) else True):
        if not isinstance(entry, dict):
            continue
        if _size(entry.get("max_model_len")):
            return Window(entry["max_model_len"], "vLLM GET /v1/models (max_model_len)")
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        if _size(meta.get("n_ctx_train")):
            return Window(meta["n_ctx_train"], "llama.cpp GET /v1/models (meta.n_ctx_train)")
        for where, fields in (("", entry), ("meta.", meta),
                              ("metadata.", entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {})):
            for name in ("n_ctx", "context_length", "context_window"):
                if _size(fields.get(name)):
                    return Window(fields[name], f"GET /v1/models ({where}{name})")
    return None


def _from_ollama(body: dict | None) -> Window | None:
    if not body:
        return None
    found = _NUM_CTX.search(body.get("parameters") or "") if isinstance(body.get("parameters"), str) else None
    if found:
        return Window(int(found.group(1)), "Ollama POST /api/show (num_ctx)")
    info = body.get("model_info") if isinstance(body.get("model_info"), dict) else {}
    for name, value in info.items():
        if name.endswith(".context_length") and _size(value):
            return Window(value, "Ollama POST /api/show (the model's context_length; Ollama's num_ctx is not set)")
    return None


def _probe(base_url: str, model: str, api_key: str | None) -> Window | None:
    root = _root(base_url)
    return (_from_props(_request(root + "/props", api_key))
            or _from_models(_request(base_url.rstrip("/") + "/models", api_key), model)
            or _from_ollama(_request(root + "/api/show", api_key, {"model": model})))


#: How servers state their window in a request's error: OpenAI's and llama-cpp-python's words, llama-cpp-python's own
#: ValueError, vLLM's.
_STATED = re.compile(r"maximum context length is (\d+) tokens|exceed context window of (\d+)|"
                     r"max_model_len[ =]+(\d+)", re.I)
FROM_ERROR = "the server's context-length error (its server states the window nowhere else)"


def window_from_error(base_url: str | None, model: str, api_key: str | None, message: str) -> Window | None:
    """The window a server's context-length error states (remembered for this server and model, as
    ``detect_window`` gives it); None when the message states none."""
    found = _STATED.search(message or "")
    size = _size(int(next(g for g in found.groups() if g))) if found else None
    if not base_url or not size:
        return None
    window = Window(size, FROM_ERROR)
    with _lock:
        _windows.setdefault((base_url, model, api_key), window)
        return _windows[(base_url, model, api_key)]


def detect_window(base_url: str | None, model: str, api_key: str | None = None) -> Window | None:
    """The model's context window as the server at ``base_url`` reports it, with where it said it; None when there
    is no server, or it does not say (OpenAI's API does not)."""
    if not base_url or "api.openai.com" in base_url:
        return None
    key = (base_url, model, api_key)
    with _lock:
        if key not in _windows:
            found = _probe(base_url, model, api_key)
            if found is None:
                return None
            _windows[key] = found
        return _windows[key]


def context_window(base_url: str | None, model: str, api_key: str | None = None) -> int | None:
    """``detect_window``'s tokens (None: not reported)."""
    found = detect_window(base_url, model, api_key)
    return found.tokens if found else None


def _count(body: dict | None) -> int | None:
    if not body:
        return None
    if _size(body.get("count")):
        return body["count"]
    tokens = body.get("tokens")
    return len(tokens) if isinstance(tokens, list) and tokens else None


_TOKENIZE = (("/tokenize", lambda text, model: {"content": text, "prompt": text, "model": model}),  # llama.cpp, vLLM
             ("/extras/tokenize", lambda text, model: {"input": text, "model": model}))  # llama-cpp-python


def count_tokens(base_url: str | None, model: str, api_key: str | None, text: str) -> int | None:
    """The tokens of ``text`` by the model's tokenizer, from the server's tokenize endpoint; None when it has none
    (or there is no server, or it is OpenAI's)."""
    if not base_url or "api.openai.com" in base_url or not text:
        return None
    root = _root(base_url)

    def probe() -> str | None:
        for path, body in _TOKENIZE:
            if _count(_request(root + path, api_key, body("ok", model))):
                return path
        return None

    with _lock:
        path, at = _tokenizers.get((base_url, api_key), (None, 0.0))
        if path is None and time.monotonic() - at >= FORGET_S:
            path = probe()
            _tokenizers[(base_url, api_key)] = (path, time.monotonic())
    if path is None:
        return None
    return _count(_request(root + path, api_key, dict(_TOKENIZE)[path](text, model)))
