"""How numbers and durations read, on every page, on the command line and in the model checks: a number
(``number``), a percentage (``percent``), an amount in US dollars (``usd``), a duration (``duration``) and the
empty cell (``GAP``). Kept here, at the bottom, so every layer formats numbers alike; core.analysis.format offers
them with the moments' formatters."""
from __future__ import annotations

GAP = "–"  # a table cell with nothing to show (Streamlit's tables would show "None")


def number(value: float, sign: bool = False, digits: int = 4, decimals: int | None = None) -> str:
    """A number as it reads: whole, with thousands separators, from ``10 ** (digits - 1)`` on (``28,807``, never
    ``2.881e+04``), else ``digits`` significant digits (scores, gains: 4; a query's values: 6); ``decimals``: always
    that many decimals instead (seconds: 1); ``sign``: with its sign (``+28,807``)."""
    plus = "+" if sign else ""
    if decimals is not None:
        return f"{value:{plus},.{decimals}f}"
    return f"{value:{plus},.0f}" if abs(value) >= 10 ** (digits - 1) else f"{value:{plus},.{digits}g}"


def percent(value: float, decimals: int = 1) -> str:
    """A percentage: ``73.3%``."""
    return f"{number(value, decimals=decimals)}%"


def usd(cost: float) -> str:
    """An amount in US dollars, to a hundredth of a cent: ``$0.0123``."""
    return f"${number(cost, decimals=4)}"


def duration(seconds: float | None) -> str:
    """A duration: ``3.7 s``, ``2 min 05 s`` (``–`` when unknown)."""
    if seconds is None:
        return GAP
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds) // 60} min {int(seconds) % 60:02d} s"
