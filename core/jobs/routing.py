"""Which queue of the team's job queue (core.jobs.queue) a job waits in, and which queues a worker takes jobs from:
runs; benchmark items of the demo and plugin scenarios; and the items of a DQA-format question set, DQA's own or a
generated one (python -m sims generate), in a queue of that set's own, taken only by the workers whose DQA folder
(DQA_DIR) holds that set. A worker so never takes an item it cannot run."""
from __future__ import annotations

import hashlib
import re

from core.config import settings as config
from core.scenarios.dqa.source import DQA_SET, DQAError, set_name

RUNS, BENCH = "runs", "bench"  # the queues a worker is asked for (--queues)
BENCH_DQA = "bench-dqa"  # the items of DQA's own question set
SET_QUEUE = "bench-set-"  # and a generated set's name: the items of that set


def set_queue(name: str | None) -> str:
    """The queue of the benchmark items of the DQA-format question set ``name`` (None: DQA's own): BENCH_DQA, or
    SET_QUEUE and the generated set's name (a hash of it when it is not a plain word of at most 80 characters)."""
    if name is None or name == DQA_SET:
        return BENCH_DQA
    if re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", name):
        return SET_QUEUE + name
    return SET_QUEUE + hashlib.sha256(name.encode()).hexdigest()[:24]


def item_queue(source: str, question_set: str | None = None) -> str:
    """The queue a benchmark item of question source ``source`` waits in (``question_set``: the DQA-format set's
    name, for the ``dqa`` source; None: DQA's own)."""
    return set_queue(question_set) if source == "dqa" else BENCH


def set_here() -> tuple[str | None, str | None]:
    """The DQA-format question set this machine has (its DQA folder): its name, or None and why it has none."""
    folder = config.dqa_dir()
    if folder is None or not folder.is_dir():
        return None, f"no DQA data here ({folder or 'DQA_DIR is not set'})"
    try:
        return set_name(folder), None
    except DQAError as e:
        return None, f"the question set in {folder} cannot be read ({e})"


def worker_queues(asked: list[str] | None) -> tuple[list[str], str | None]:
    """The queues a worker asked for ``asked`` (RUNS, BENCH; None: both) takes jobs from: BENCH brings the queue of
    the question set this machine has (set_here). With why DQA-format items are left to other workers (None when
    this one has a set)."""
    queues = list(asked or (RUNS, BENCH))
    if BENCH not in queues:
        return queues, None
    name, why = set_here()
    if name is None:
        return queues, f"{why}: DQA benchmark items are left to other workers"
    return [*queues, set_queue(name)], None
