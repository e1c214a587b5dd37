"""How moments read, on every page, on the command line and in the stores' messages: the one time format
(``TIME_FORMAT``), a moment (``timestamp``), its time of day (``clock``) and a moment in a file's name
(``file_stamp``). Kept here, below the store, so every layer formats moments alike; core.analysis.format offers them
with the number formatters."""
from __future__ import annotations

import time
from datetime import datetime

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"  # every moment shown (``timestamp``)
CLOCK_FORMAT = TIME_FORMAT.split()[-1]  # the time of day alone, within a run or a review (``clock``)
FILE_STAMP = "%Y%m%d-%H%M%S"  # a moment in a file's name (``file_stamp``)


def timestamp(at: float | datetime) -> str:
    """A moment (seconds since the epoch, or a datetime) as every page shows it: ``2026-11-23 14:05:09``."""
    if isinstance(at, datetime):
        at = at.timestamp()
    return datetime.fromtimestamp(at).strftime(TIME_FORMAT)


def clock(at: float) -> str:
    """The time of day of a moment: ``14:05:09``."""
    return datetime.fromtimestamp(at).strftime(CLOCK_FORMAT)


def file_stamp(at: float | None = None) -> str:
    """A moment (default now) in a file's name: ``20261123-140509``."""
    return time.strftime(FILE_STAMP, time.localtime(at))
