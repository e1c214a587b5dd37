"""One mechanism keeping secrets out of what the project stores or prints: the API key (and any other secret
registered here) is replaced by ``***`` in error messages, traces, the run store, benchmark results, reports and
command-line output, whatever produced the text.

    register(settings.api_key)     # done where a model is opened
    scrub(text)                    # every text that is stored or printed

Only values long enough to be secrets are registered (at least MIN_LENGTH characters): a local server's dummy
key ``x`` must not turn "maximum context length" into "ma***imum". Whole occurrences are replaced, and the
masked echoes servers give (OpenAI's ``sk-CANAR******3456``: a prefix of the key, a run of ``*``, ``x``, ``.`` or
``…``, then optionally a suffix of the key) are replaced as well, and so is any run of key characters sharing
MIN_PARTIAL or more characters in a row with a secret (a key cut short or echoed in part).
"""
from __future__ import annotations

import re
import threading

MIN_LENGTH = 8  # shorter values are not secrets worth hiding (and replacing them would mangle text)
MIN_PREFIX = 4  # a masked echo shows at least this much of the key's start
MIN_PARTIAL = 12  # a run sharing this many characters in a row with a secret is part of it (words are shorter)
MASK = "***"
# A masked echo: visible start, a mask run of 3 or more, then maybe a visible end. Never crosses quotes,
# backslashes or spaces, so scrubbing JSON text keeps it valid.
_MASKED = re.compile(r"(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]{%d,}?)(?:\*{3,}|x{6,}|\.{3,}|…+)([A-Za-z0-9_\-]*)"
                     % MIN_PREFIX)

_MASK_MARKS = ("***", "xxxxxx", "...", "…")  # a cheap test before the regex
_RUN = re.compile(r"[A-Za-z0-9_\-]{%d,}" % MIN_PARTIAL)

_lock = threading.Lock()
_secrets: set[str] = set()


def is_secret(value: str | None) -> bool:
    """Whether ``value`` is long enough to be treated as a secret."""
    return bool(value) and len(value.strip()) >= MIN_LENGTH


def register(value: str | None) -> None:
    """Remember ``value`` as a secret of this process (ignored when too short to be one)."""
    if is_secret(value):
        with _lock:
            _secrets.add(value.strip())


def registered() -> frozenset[str]:
    with _lock:
        return frozenset(_secrets)


def scrub(text, secrets=None):
    """``text`` with every secret (the registered ones and ``secrets``) and its masked forms replaced by
    ``***``. Non-strings pass through unchanged."""
    if not isinstance(text, str) or not text:
        return text
    values = registered() | {s.strip() for s in (secrets or ()) if is_secret(s)}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    if values and any(mark in text for mark in _MASK_MARKS) and _MASKED.search(text):
        def masked(m: re.Match) -> str:
            start, end = m.group(1), m.group(2)
            for value in values:
                if value.startswith(start) and (not end or value.endswith(end)):
                    return MASK
            return m.group(0)

        text = _MASKED.sub(masked, text)
    return _scrub_partial(text, values)


def _scrub_partial(text: str, values) -> str:
    """``text`` with every run of key characters that shares MIN_PARTIAL characters in a row with one of
    ``values`` replaced."""
    parts = {v[i:i + MIN_PARTIAL] for v in values for i in range(len(v) - MIN_PARTIAL + 1)}
    found = [p for p in parts if p in text]
    if not found:
        return text
    return _RUN.sub(lambda m: MASK if any(p in m.group() for p in found) else m.group(), text)

