"""Named model endpoints, defined by an admin in the server's secrets file and chosen by name on the pages:

    [planrag.endpoints.team-llama]
    base_url = "http://gpu1:8000/v1"     # omit for OpenAI's API
    model = "llama-3.3-70b"
    key_env = "TEAM_LLAMA_KEY"           # the key: this environment variable of the server (or key = "...")

The key is read on the server when a model is opened and goes only to that endpoint's base URL; the pages show
whether it is set, never the key. A run records its endpoint's name; resuming it, by anyone, uses that endpoint's
own key (or fails saying the endpoint is gone)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from core.auth import config
from core.auth.config import ConfigError
from core.llm.client import LLMNotConfigured
from core.config.settings import LLMSettings


class UnknownEndpoint(LLMNotConfigured):
    """A run or a choice naming an endpoint the server does not have (any more)."""


@dataclass(frozen=True)
class Endpoint:
    name: str
    model: str
    base_url: str | None = None
    key_env: str | None = None
    key: str | None = field(default=None, repr=False)

    def api_key(self) -> str | None:
        """The key, read on the server now (the environment variable, else the secrets file's value)."""
        return (os.environ.get(self.key_env) or None) if self.key_env else self.key

    def key_state(self) -> str:
        """Whether the key is set, as the pages say it (never the key)."""
        if self.key_env:
            return f"key from ${self.key_env}: " + ("set" if self.api_key() else "NOT SET on this server")
        return "key in the secrets file" if self.key else "no key"

    def llm_settings(self, base: LLMSettings | None = None) -> LLMSettings:
        """``base`` (timeouts, retries, reply cap) with this endpoint's model, URL and key, the key bound to the URL."""
        return replace(base or LLMSettings(), model=self.model, base_url=self.base_url, api_key=self.api_key(),
                       key_url=self.base_url, endpoint=self.name)


def endpoints(planrag: dict | None = None) -> dict[str, Endpoint]:
    """The configured endpoints by name; ConfigError for one without a model or with a bad entry."""
    table = (config.planrag() if planrag is None else planrag).get("endpoints", {})
    found = {}
    for name, entry in table.items():
        if not isinstance(entry, dict) or not entry.get("model"):
            raise ConfigError(f"[planrag.endpoints.{name}] needs a model")
        unknown = set(entry) - {"model", "base_url", "key_env", "key"}
        if unknown:
            raise ConfigError(f"[planrag.endpoints.{name}] has unknown entries: {', '.join(sorted(unknown))}")
        found[name] = Endpoint(name, entry["model"], entry.get("base_url") or None, entry.get("key_env") or None,
                               entry.get("key") or None)
    return found


def get(name: str) -> Endpoint:
    """The endpoint ``name``; UnknownEndpoint saying so when the server has none of that name."""
    found = endpoints()
    if name not in found:
        raise UnknownEndpoint(f"model endpoint {name!r} is not configured on this server (its admin defines "
                              "endpoints in [planrag.endpoints] of the secrets file)"
                              + (f"; configured: {', '.join(found)}" if found else ""))
    return found[name]
