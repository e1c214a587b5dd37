"""How numbers, moments and durations read, on every page and on the command line: one place to change them
(tests/test_architecture.py finds any other format in pages/, ui/, core/cli and the model checks, and any other time
format in core/store). The formatters live in core.model.quantities and core.model.moments, below every layer that
writes text, and are offered here together."""
from __future__ import annotations

from core.model.moments import CLOCK_FORMAT as CLOCK_FORMAT
from core.model.moments import TIME_FORMAT as TIME_FORMAT
from core.model.moments import clock as clock
from core.model.moments import timestamp as timestamp
from core.model.quantities import GAP as GAP
from core.model.quantities import duration as duration
from core.model.quantities import number as number
from core.model.quantities import percent as percent
from core.model.quantities import usd as usd


def spent(progress) -> str:
    """What the benchmark's model calls spent so far: tokens and estimated cost."""
    cost = progress.cost_usd
    return f"{number(progress.tokens, decimals=0)} tokens, " + ("cost unknown" if cost is None else usd(cost))
