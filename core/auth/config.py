"""The server's access configuration: the ``[planrag]`` table of the secrets file Streamlit reads for sign-in
(``[auth]``), so one file, never committed, holds the provider, the roles and the model endpoints.

The file is ``PLANRAG_SECRETS`` when set, else ``.streamlit/secrets.toml`` in the project (Streamlit's own place;
start Streamlit with ``--secrets.files`` naming the same file when it is elsewhere). A missing file is an empty
configuration: single-user mode."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from core.config.settings import PROJECT_ROOT


class ConfigError(ValueError):
    """A secrets file that cannot be read, or a ``[planrag]`` entry that makes no sense."""


def secrets_file() -> Path:
    value = os.environ.get("PLANRAG_SECRETS")
    return Path(value).expanduser() if value else PROJECT_ROOT / ".streamlit" / "secrets.toml"


def load(path: Path | None = None) -> dict:
    """The whole secrets file as a dict (empty when there is none); ConfigError when it is no TOML."""
    path = path or secrets_file()
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"the secrets file {path} cannot be read: {e}") from None


def planrag(data: dict | None = None) -> dict:
    """The ``[planrag]`` table (roles, role claim, endpoints, allowed hosts)."""
    value = (load() if data is None else data).get("planrag", {})
    if not isinstance(value, dict):
        raise ConfigError("[planrag] in the secrets file must be a table")
    return value

