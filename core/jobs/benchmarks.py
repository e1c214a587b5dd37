"""Benchmarks run in background threads for the app: a page starts one and any rerun of it (or another page)
follows its progress; one job per results directory at a time. Jobs live as long as the process; their results
stay in the directory."""
from __future__ import annotations

import threading

from core import scenarios

from core.benchmark.items import BenchError
from core.benchmark.runner import Bench, BenchConfig

_jobs: dict[str, BenchJob] = {}
_lock = threading.Lock()


class BenchJob:
    """A Bench running in a thread. ``bench.progress`` tells how far it is; ``error`` is what stopped it
    outside the items (None when it ran to the end or was stopped)."""

    def __init__(self, bench: Bench):
        self.bench = bench
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=scenarios.in_context(self._run), name=f"bench-{bench.directory.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.bench.run(stop=self._stop)
        except Exception as e:  # noqa: BLE001 - shown on the page
            self.error = e

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Start no more items; those in flight finish and are stored."""
        self._stop.set()


def start(config: BenchConfig) -> BenchJob:
    """Prepare the benchmark (raising its errors: BenchError, LLMError, ValueError, DQAError) and start it."""
    bench = Bench(config)
    key = str(bench.directory.resolve())
    with _lock:
        if key in _jobs and not _jobs[key].done:
            raise BenchError(f"a benchmark is already running into {bench.directory}; wait for it or stop it")
        bench.claim()  # BenchBusy when another process runs a benchmark into the directory
        job = _jobs[key] = BenchJob(bench)
        job._thread.start()
    return job


def jobs() -> list[BenchJob]:
    """This process's benchmark jobs, running or ended, newest last."""
    with _lock:
        return list(_jobs.values())
