"""Print how long it takes to import DQA and to load a question's database into each backend.

Targets (issue "Foundation"): import of all 301 questions <= 5 s; a Locating database into SQLite <= 50 ms,
Ladybug <= 400 ms, MariaDB <= 500 ms. Fresh loads are timed by clearing each backend's content cache.

Neo4j is timed on the server NEO4J_URI names, else on the local graph server (core.backends.graph_server) started for the
bench when it is installed: a fresh load clears the database and loads the graph, a cached open checks the
server's marker of the loaded graph, and a switch is a query whose graph another question's open replaced (the
reload included), as on a single-database server.

Usage: python bench/bench_load.py [DQA_DIR]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.backends.registry import BACKENDS, open_backend, unavailable  # noqa: E402
from core.scenarios.dqa.source import DQA  # noqa: E402
from core.scenarios.dqa.source import SCENARIOS  # noqa: E402
from core.config.settings import dqa_dir  # noqa: E402


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


def time_switch(first, second, runs: int = 3) -> float:
    """Neo4j: median time of a query on ``first`` right after ``second`` was opened in the same database."""
    a, times = open_backend("neo4j", first), []
    for _ in range(runs):
        open_backend("neo4j", second).close()
        start = time.perf_counter()
        a.query("MATCH (n) RETURN count(n)")
        times.append(time.perf_counter() - start)
    a.close()
    return statistics.median(times)


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
    if not unavailable("neo4j"):
        first, second = (dqa.database(dqa.question(s, 1)) for s in ("locating", "building"))
        print(f"neo4j, one database: a Locating query after a Building open (reload included): "
              f"{time_switch(first, second) * 1000:.0f} ms (median of 3)")


def with_graph_server() -> None:
    """Run ``main`` with the local graph server when NEO4J_URI is unset and the server is installed."""
    from core.backends import graph_server

    if os.environ.get("NEO4J_URI") or not graph_server.installed():
        return main()
    server = graph_server.start(0, 0, die_with_parent=True)
    os.environ.update(server.env())
    try:
        main()
    finally:
        graph_server.stop(server)


if __name__ == "__main__":
    with_graph_server()
