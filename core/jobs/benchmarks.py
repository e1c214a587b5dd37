"""Benchmarks as jobs (core.jobs.job): a page starts one and any rerun of it (or another page) follows its progress;
one job per results directory at a time. Its events are its results as the result store keeps them, in the order
they finished; ``bench.progress`` tells how far it is."""
from __future__ import annotations

import threading
from pathlib import Path
from dataclasses import replace
from typing import TYPE_CHECKING

from core.auth.gate import asked_by, authorize
from core.auth.roles import Identity
from core.benchmark.config import BenchConfig
from core.benchmark.items import BenchError
from core.config import settings as config
from core.jobs import queue
from core.jobs.job import Job, JobBusy, all_jobs, get, launch
from core.config.settings import PROJECT_ROOT
from core.llm.client import REPLAY_PREFIX, replay_path

if TYPE_CHECKING:
    from core.benchmark.runner import Bench


class BenchJob(Job):
    """A Bench running in a thread; ``error`` is what stopped it outside the items (None when it ran to the end or
    was stopped)."""

    kind = "benchmark"

    def __init__(self, bench: Bench):
        super().__init__(str(bench.directory.resolve()))
        self.bench = bench
        self._stop = threading.Event()

    def _work(self) -> None:
        from core.jobs import bench_items  # heavy: the runner loads LangGraph (a page imports this module)

        bench_items.drive(self.bench, stop=self._stop, on_result=lambda *_: self.changed())

    def events(self, after: int = 0) -> list[dict]:
        """The benchmark's stored results after the first ``after``, in the order they finished."""
        return sorted(self.bench.results(), key=lambda r: r.get("finished") or 0)[after:]

    def stop(self, by: str = "") -> str:
        """Start no more items; those in flight finish and are stored (asked by ``stop(job, who=...)``)."""
        self._stop.set()
        return self.status()


def start(config: BenchConfig, *, who: Identity, usual_root: str | Path | None = None) -> BenchJob:
    """Prepare the benchmark (raising its errors: BenchError, LLMError, ValueError, DQAError) and start it for
    ``who``, as the gate allows: ``benchmark_start``, ``benchmark_rerun`` into a results set that has results, and
    ``server_paths`` for a question set other than ``usual_root`` (the session's DQA folder) or a replay other than
    the shipped transcripts."""
    from core.benchmark.runner import Bench  # heavy: LangGraph, loaded when a benchmark starts

    authorize(who, "benchmark_start")
    if (config.dqa_root and str(config.dqa_root) != str(usual_root or "")) or _named_replay(config.llm):
        authorize(who, "server_paths")
    bench = Bench(replace(config, started_by=who.name, asked=asked_by(who, "benchmark_start")))
    if bench.results():
        authorize(who, "benchmark_rerun")
        bench.config = replace(bench.config, asked=asked_by(who, "benchmark_rerun"))
    job = BenchJob(bench)
    busy = BenchError(f"a benchmark is already running into {job.bench.directory}; wait for it or stop it")
    running = get(BenchJob.kind, job.key)
    if running is not None and not running.done:
        raise busy
    if queue.enabled():  # the workers share its items with any other command running it
        return launch(job)
    job.bench.claim()  # BenchBusy when another process runs a benchmark into the directory
    try:
        return launch(job)
    except JobBusy:
        job.bench.lock.release()
        raise busy from None


def elsewhere() -> list[dict]:
    """The benchmarks another process (another app, a ``core bench`` command, the queue's workers) runs into the
    team store now, as ``core.benchmark.results.standing`` says each, with ``waiting`` and ``in_flight`` items of
    the job queue (0 without it); [] without a team store. This process's own benchmarks are left out."""
    from core.benchmark.results import held_benchmarks, standing  # heavy: the result store's imports

    url = config.database_url()
    if not url:
        return []
    mine = {job.bench.directory.name for job in jobs() if not job.done}
    in_queue = queue.bench_in_queue() if queue.enabled() else {}
    names = sorted((set(held_benchmarks(url)) | set(in_queue)) - mine)
    return [{**row, **in_queue.get(row["name"], {"waiting": 0, "in_flight": 0})} for row in standing(url, names)]


def _named_replay(model: str) -> bool:
    """Whether ``model`` is a replay of a file or folder a person named (not one of the shipped transcripts)."""
    if not model.startswith(REPLAY_PREFIX):
        return False
    shipped = (PROJECT_ROOT / "assets" / "replays").resolve()
    return not Path(replay_path(model)).resolve().is_relative_to(shipped)


def stop(job: BenchJob, *, who: Identity) -> str:
    """Stop the benchmark ``job`` for ``who``; its status after the request."""
    authorize(who, "benchmark_stop")
    return job.stop(who.name)


def jobs() -> list[BenchJob]:
    """This process's benchmark jobs, running or ended, newest last."""
    return all_jobs(BenchJob.kind)
