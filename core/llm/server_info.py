"""What an OpenAI-compatible server says about its model, when it says it cheaply: the context window, from vLLM's
``GET /v1/models`` (``max_model_len``), llama.cpp's ``GET /props`` (``default_generation_settings.n_ctx``) or its
``/v1/models`` (``meta.n_ctx_train``). A few short requests per server and model; a size found is remembered for
the process (a server that said nothing, or was down, is asked again next time)."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

TIMEOUT_S = 2.0
_lock = threading.Lock()
_known: dict[tuple[str, str, str | None], int] = {}  # (base URL, model, key) -> context window


def _get(url: str, api_key: str | None) -> dict | None:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key or 'unused'}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _from_models(body: dict | None, model: str) -> int | None:
    entries = (body or {}).get("data") or []
    if not isinstance(entries, list):
        return None
    for entry in sorted(entries, key=lambda e: e.get("id") != model if isinstance(e, dict) else True):
        if not isinstance(entry, dict):
            continue
        size = entry.get("max_model_len") or (entry.get("meta") or {}).get("n_ctx_train")
        if isinstance(size, int) and size > 0:
            return size
    return None


def _probe(base_url: str, model: str, api_key: str | None) -> int | None:
    base = base_url.rstrip("/")
    props = _get(base.removesuffix("/v1") + "/props", api_key)  # llama.cpp: the context it runs with
    n_ctx = ((props or {}).get("default_generation_settings") or {}).get("n_ctx")
    if isinstance(n_ctx, int) and n_ctx > 0:
        return n_ctx
    return _from_models(_get(base + "/models", api_key), model)


def context_window(base_url: str | None, model: str, api_key: str | None = None) -> int | None:
    """The model's context window in tokens as the server at ``base_url`` reports it; None when there is no
    server, or it does not say (OpenAI's API does not)."""
    if not base_url or "api.openai.com" in base_url:
        return None
    with _lock:
        key = (base_url, model, api_key)
        if key not in _known:
            size = _probe(base_url, model, api_key)
            if size is None:
                return None
            _known[key] = size
        return _known[key]
