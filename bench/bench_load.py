"""Print how long it takes to import DQA and to load a question's database into each backend.

Targets (issue "Foundation"): import of all 301 questions <= 5 s; a Locating database into SQLite <= 50 ms,
Ladybug <= 400 ms, MariaDB <= 500 ms. Fresh loads are timed by clearing each backend's content cache.

Usage: python bench/bench_load.py [DQA_DIR]
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.backends.registry import BACKENDS, open_backend, unavailable  # noqa: E402
from core.dqa import DQA  # noqa: E402
from core.scenario import SCENARIOS  # noqa: E402
from core.settings import dqa_dir  # noqa: E402


def time_import(root) -> float:
    start = time.perf_counter()
    dqa = DQA(root)
    for scenario in SCENARIOS:
        for q in dqa.questions(scenario):
            dqa.database(q)
    return time.perf_counter() - start


def time_load(name: str, database, runs: int = 5) -> tuple[float, float]:
    """Median fresh load (content cache cleared) and median cached open, in seconds."""
    import importlib

    module = importlib.import_module(BACKENDS[name][1])
    fresh, cached = [], []
    for _ in range(runs):
        module.forget(database.key)
        start = time.perf_counter()
        open_backend(name, database).close()
        fresh.append(time.perf_counter() - start)
        start = time.perf_counter()
        open_backend(name, database).close()
        cached.append(time.perf_counter() - start)
    return statistics.median(fresh), statistics.median(cached)


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else dqa_dir()
    if root is None:
        sys.exit("no DQA directory: pass it or set DQA_DIR")
    print(f"import all 301 questions and their databases: {time_import(root) * 1000:.0f} ms (target 5000)")
    dqa = DQA(root)
    targets = {"sqlite": 50, "mysql": 500, "ladybug": 400, "neo4j": None}
    for scenario, number in (("locating", 1), ("building", 1)):
        q = dqa.question(scenario, number)
        db = dqa.database(q)
        for name in BACKENDS:
            reason = unavailable(name)
            if reason:
                print(f"{scenario} {q.database_ref} -> {name}: skipped ({reason})")
                continue
            fresh, cached = time_load(name, db)
            target = f" (target {targets[name]})" if targets[name] and scenario == "locating" else ""
            print(f"{scenario} {q.database_ref} -> {name}: load {fresh * 1000:.0f} ms{target}, "
                  f"cached open {cached * 1000:.1f} ms")


if __name__ == "__main__":
    main()
