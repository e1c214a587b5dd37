"""The editable cost table: USD per million prompt and completion tokens, per model name. The defaults are list
prices at the time of writing; ``DATA_HOME/bench/prices.json`` (written with the defaults on first use) is the
table to edit. A model matches its exact name, else the longest name it starts with (``gpt-4o-2024-08-06`` uses
``gpt-4o``); replays cost nothing; a model with no entry has no cost (shown as unknown, never as 0)."""
from __future__ import annotations

import json
from pathlib import Path

from core.config import settings
from core.config.files import write_atomic
from core.llm.client import REPLAY_PREFIX
from sims.files import FileRefused, read_text

#: model -> [USD per 1M prompt tokens, USD per 1M completion tokens]
DEFAULT_PRICES: dict[str, list[float]] = {
    "gpt-4": [30.0, 60.0],
    "gpt-4-turbo": [10.0, 30.0],
    "gpt-4o": [2.5, 10.0],
    "gpt-4o-mini": [0.15, 0.6],
    "gpt-4.1": [2.0, 8.0],
    "gpt-4.1-mini": [0.4, 1.6],
    "gpt-4.1-nano": [0.1, 0.4],
    "gpt-3.5-turbo": [0.5, 1.5],
    "o3-mini": [1.1, 4.4],
}


def prices_path() -> Path:
    return settings.DATA_HOME / "bench" / "prices.json"


def load_prices(path: str | Path | None = None) -> dict[str, list[float]]:
    """The cost table of ``path`` (default prices_path(), created with the defaults when missing). A file that is
    not a table of two prices per model raises ValueError saying where."""
    path = Path(path) if path else prices_path()
    if not path.exists():  # written whole: a run starting beside this one may read it now
        write_atomic(path, json.dumps(DEFAULT_PRICES, indent=1) + "\n")
        return dict(DEFAULT_PRICES)
    try:
        table = json.loads(read_text(path, "price table"))
    except (json.JSONDecodeError, UnicodeDecodeError, FileRefused) as e:
        raise ValueError(f"price table {path} is not JSON ({e})") from None
    bad = [k for k, v in table.items() if not (isinstance(v, list) and len(v) == 2
                                               and all(isinstance(x, (int, float)) for x in v))] \
        if isinstance(table, dict) else ["(the file)"]
    if bad:
        raise ValueError(f"price table {path}: {', '.join(bad)} must be [prompt USD, completion USD] per 1M tokens")
    return table


def price_of(model: str, table: dict[str, list[float]]) -> list[float] | None:
    """[prompt, completion] USD per 1M tokens for a model name (``name @ base URL`` uses the name)."""
    if model.startswith(REPLAY_PREFIX):
        return [0.0, 0.0]
    name = model.split(" @ ")[0].strip()
    if name in table:
        return table[name]
    prefixes = [k for k in table if name.startswith(k)]
    return table[max(prefixes, key=len)] if prefixes else None


def cost(model: str, prompt_tokens: int, completion_tokens: int, table: dict[str, list[float]]) -> float | None:
    """USD for the tokens, None when the model has no price."""
    price = price_of(model, table)
    return None if price is None else (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def model_price(model: str) -> list[float] | None:
    """The price of a model in the editable table (None: not in it, or the table cannot be read)."""
    try:
        return price_of(model, load_prices())
    except (OSError, ValueError):
        return None
