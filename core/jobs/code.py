"""Which code a process runs: a worker takes only the jobs queued by the same code (core.jobs.queue)."""
from __future__ import annotations

import hashlib
from functools import cache

from core.config import settings as config


@cache
def code_version() -> str:
    """A digest of this checkout's Python code (core, sims)."""
    digest = hashlib.sha256()
    for package in ("core", "sims"):
        for path in sorted((config.PROJECT_ROOT / package).rglob("*.py")):
            digest.update(str(path.relative_to(config.PROJECT_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]
