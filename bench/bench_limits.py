"""Print the speed figures the tests check only in kind (no test asserts wall-clock time), each with its target,
and flag the misses: how soon a query's time limit stops a runaway query on each backend, and that the query
really runs past a longer limit; how fast a question's database opens again from its cached file; how soon an
unreachable Neo4j server is reported; how the benchmark's rate limiter spaces calls.

Usage: python bench/bench_limits.py [DQA_DIR]     (exit status 1 when a figure misses its target)
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.backends import ladybug, sqlite  # noqa: E402
from core.backends.base import QueryTimeout  # noqa: E402
from core.backends.registry import open_backend, unavailable  # noqa: E402
from core.benchmark.runner import RateLimiter  # noqa: E402
from core.scenarios.dqa.source import DQA  # noqa: E402
from core.config.settings import DatabaseSettings, dqa_dir  # noqa: E402

# The same runaway queries as tests/test_backends_sql.py and tests/test_backends_graph.py.
RUNAWAY = {"sql": ("SELECT COUNT(*) AS n FROM node_country a, node_country b, node_country c "
                   "WHERE a.base_trading_power + b.base_trading_power < c.base_trading_power"),
           "cypher": ("MATCH (a:Country), (b:Country), (c:Country), (d:Country) WHERE a.development + b.development > "
                      "c.development + d.development RETURN count(*)")}
misses: list[str] = []


def report(what: str, seconds: float, low: float | None = None, high: float | None = None) -> None:
    """One figure with its target; a miss is flagged and remembered."""
    ok = (low is None or seconds >= low) and (high is None or seconds <= high)
    target = " and ".join(t for t in (f">= {low:g} s" if low is not None else "",
                                      f"<= {high:g} s" if high is not None else "") if t)
    print(f"{what}: {seconds:.3f} s (target {target}){'' if ok else '  MISS'}")
    if not ok:
        misses.append(what)


def time_timeout(backend, text: str, limit: float) -> float | None:
    start = time.perf_counter()
    try:
        backend.query(text, timeout_s=limit)
    except QueryTimeout:
        return time.perf_counter() - start
    return None  # finished within the limit


def limits(database) -> None:
    for name, stop_within in (("sqlite", 3.0), ("mysql", 3.0), ("ladybug", 2.5)):
        reason = unavailable(name)
        if reason:
            print(f"{name}: skipped ({reason})")
            continue
        backend = open_backend(name, database)
        try:
            text = RUNAWAY[backend.language]
            for limit, low, high in ((0.5, None, stop_within), (2.0, 2.0, None)):
                seconds = time_timeout(backend, text, limit)
                if seconds is None:
                    print(f"{name}: the runaway query finished within {limit} s  MISS")
                    misses.append(f"{name} runaway")
                else:
                    report(f"{name}: runaway query stopped by a {limit:g} s limit after", seconds, low, high)
        finally:
            backend.close()


def cached_opens(database, runs: int = 5) -> None:
    for name, module, high in (("sqlite", sqlite, 0.1), ("ladybug", ladybug, 0.3)):
        module.database_file(database)  # built once
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            backend = open_backend(name, database)
            backend.query("SELECT 1" if name == "sqlite" else "RETURN 1")  # its worker process starts here
            backend.close()
            times.append(time.perf_counter() - start)
        report(f"{name}: open again from the cached file and answer a first query (median of {runs})",
               statistics.median(times), high=high)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        sqlite.build_file(database.tables, Path(folder) / "fresh.sqlite")
        report("sqlite: build a Locating database file", time.perf_counter() - start, high=0.5)


def neo4j_dead_port() -> None:
    from core.backends import neo4j

    start = time.perf_counter()
    reason = neo4j.unavailable(DatabaseSettings(neo4j_uri="bolt://127.0.0.1:7", neo4j_password="x"))
    report(f"neo4j: an unreachable server reported ({(reason or '')[:60]}...) after", time.perf_counter() - start,
           high=3.0)


def rate_limiter() -> None:
    limit = RateLimiter(600)  # one call every 0.1 s
    start = time.monotonic()
    for _ in range(4):
        limit()
    report("rate limiter: 4 calls at 600 a minute took", time.monotonic() - start, 0.28, 1.0)


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else dqa_dir()
    if root is None or not (Path(root) / "locating").is_dir():
        print("no DQA directory: pass it or set DQA_DIR", file=sys.stderr)
        return 2
    dqa = DQA(root)
    database = dqa.database(dqa.question("locating", 1))
    limits(database)
    cached_opens(database)
    neo4j_dead_port()
    rate_limiter()
    print(f"{len(misses)} missed: {', '.join(misses)}" if misses else "all figures within their targets")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
