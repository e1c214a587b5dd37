"""Which code a process runs (a worker takes only the jobs queued by the same code, core.jobs.queue), and how
the queue's records name the process (host:pid, as the run store knows a run's owner)."""
from __future__ import annotations

import hashlib
import os
import socket
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


def process_name() -> str:
    """This process as a worker's messages and logs name it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"
