"""Print what running the embedded engines in worker processes costs and how well it bounds a query (issue 12),
each figure with its target, and flag the misses:

- per-query overhead: the median time of small agent-like queries through the backend (worker process: JSON
  over a pipe) against the same engine code run in this process (what every query cost before the workers);
- a worker's start (paid once per open backend, at its first query, and again after a crash or kill);
- time past the timeout: how long after a 0.5 s limit the attacks of the issue return (SQLite function chains,
  Ladybug list building past the range guard, an engine that stops answering), target <= GRACE_S + 1 s.

Usage: python bench/bench_isolation.py [DQA_DIR]   (without DQA data: the demo Locating question)
"""
from __future__ import annotations

import os
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.scenarios import catalog  # noqa: E402
from core.backends import engines, ladybug, sqlite  # noqa: E402
from core.backends.base import QueryError  # noqa: E402
from core.backends.cypher_dialect import prepare, to_ladybug  # noqa: E402
from core.backends.registry import open_backend  # noqa: E402
from core.backends.sql_dialect import mysql_to_sqlite, one_statement  # noqa: E402
from core.backends.worker import GRACE_S  # noqa: E402

QUERIES = {"sqlite": ["SELECT COUNT(*) FROM node_country",
                      "SELECT trade_node, SUM(base_trading_power) AS p FROM node_country GROUP BY trade_node "
                      "ORDER BY p DESC LIMIT 5",
                      "SELECT * FROM flow LIMIT 20"],
           "ladybug": ["MATCH (n) RETURN count(n)",
                       "MATCH (a)-[r]->(b) RETURN a.name, b.name LIMIT 20",
                       "MATCH (c:Country) RETURN c.name LIMIT 10"]}
ATTACKS = {"sqlite": ("SELECT SUM(LENGTH(" + "replace(" * 16 + "printf('%.*c', 900000, country_name)"
                      + ", 'x', 'y')" * 16 + ")) AS n FROM node_country"),
           "ladybug": "RETURN list_sum(range(1, 100000000*2, 2))"}
misses: list[str] = []


def report(what: str, value: float, unit: str, high: float | None = None) -> None:
    ok = high is None or value <= high
    target = f" (target <= {high:g} {unit})" if high is not None else ""
    print(f"{what}: {value:.3f} {unit}{target}{'' if ok else '  MISS'}")
    if not ok:
        misses.append(what)


def median_ms(fn, runs: int = 30) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def in_process(name: str, path: Path):
    """The engine code of the worker, run in this process (the cost of a query before the workers)."""
    session = engines.SESSIONS[name](str(path), lambda *_: None)
    if name == "sqlite":
        return lambda text: session.run(mysql_to_sqlite(one_statement(text)), 10, 200)
    return lambda text: session.run(to_ladybug(prepare(text))[0], 10, 200)


def overhead(database) -> None:
    for name, build in (("sqlite", sqlite.database_file), ("ladybug", ladybug.database_file)):
        path = build(database)
        start = time.perf_counter()
        backend = open_backend(name, database)
        backend.query(QUERIES[name][0])
        report(f"{name}: open and first query (the worker starts)", time.perf_counter() - start, "s", 2.0)
        local = in_process(name, path)
        for text in QUERIES[name]:
            before = median_ms(lambda: local(text))
            after = median_ms(lambda: backend.query(text))
            report(f"{name}: {text[:50]!r}: in process {before:.2f} ms, in the worker {after:.2f} ms; overhead",
                   after - before, "ms", 2.0)
        backend.close()


def past_timeout(database, limit: float = 0.5) -> None:
    for name, text in ATTACKS.items():
        backend = open_backend(name, database)
        backend.query(QUERIES[name][0])
        start = time.perf_counter()
        try:
            backend.query(text, timeout_s=limit)
            outcome = "finished"
        except QueryError as e:
            outcome = f"{type(e).__name__}: {str(e)[:60]}"
        report(f"{name}: attack {text[:40]!r}... ({outcome}) returned past its {limit:g} s limit after",
               time.perf_counter() - start - limit, "s", GRACE_S + 1.0)
        worker = backend._worker
        backend.query(QUERIES[name][0])
        os.kill(worker.pid, signal.SIGSTOP)  # an engine that stops answering
        start = time.perf_counter()
        try:
            backend.query(QUERIES[name][0], timeout_s=limit)
        except QueryError:
            pass
        report(f"{name}: a worker that stopped answering, killed, returned past its {limit:g} s limit after",
               time.perf_counter() - start - limit, "s", GRACE_S + 1.0)
        backend.close()


def main() -> int:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if root is not None:
        os.environ["DQA_DIR"] = str(root)
    try:
        question = catalog.question("dqa", "locating", 1)
        print("database: DQA Locating question 1")
    except Exception:  # noqa: BLE001 - no DQA data: the demo question
        question = catalog.question("demo", "locating", 1)
        print("database: the demo Locating question 1 (no DQA data)")
    database = catalog.database(question)
    overhead(database)
    past_timeout(database)
    print(f"{len(misses)} missed: {', '.join(misses)}" if misses else "all figures within their targets")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
