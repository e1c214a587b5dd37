"""How numbers and durations read on screen and on the command line."""
from __future__ import annotations


def duration(seconds: float | None) -> str:
    """``1m 05s``, ``42s``, or ``?`` for None."""
    if seconds is None:
        return "?"
    minutes, s = divmod(round(seconds), 60)
    return f"{minutes}m {s:02d}s" if minutes else f"{s}s"


def spent(progress) -> str:
    """What the benchmark's model calls spent so far: tokens and estimated cost."""
    cost = progress.cost_usd
    return f"{progress.tokens:,} tokens, " + ("cost unknown" if cost is None else f"${cost:.4f}")
