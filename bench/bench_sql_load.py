"""Load times of two DQA question databases into the SQL backends, median of several runs.

fresh: writing the data (SQLite: a new file; MySQL: drop, create and fill the database).
cached open: open_database once the content is loaded (SQLite: the process cache; MySQL: the completed-load
marker), including the new read-only connection.

Usage: python bench/bench_sql_load.py [runs]   (DQA_DIR and MYSQL_URL as for the app)
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.backends import mysql, sqlite  # noqa: E402
from core.dqa import DQA  # noqa: E402
from core.settings import DatabaseSettings, dqa_dir  # noqa: E402


def median_ms(action, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
        if hasattr(result, "close"):
            result.close()
    return statistics.median(times) * 1000


def main(runs: int = 7) -> None:
    root = dqa_dir()
    if root is None:
        sys.exit("DQA data not found: set DQA_DIR")
    dqa = DQA(root)
    settings = DatabaseSettings()
    databases = {"locating q1": dqa.database(dqa.question("locating", 1)),
                 "building USA1836": dqa.database(next(q for q in dqa.questions("building")
                                                       if q.database_ref == "USA1836"))}
    reason = mysql.unavailable(settings)
    print(f"median of {runs} runs, ms" + (f"; MySQL skipped: {reason}" if reason else ""))
    print(f"{'database':18} {'rows':>5} {'sqlite fresh':>13} {'sqlite cached':>14} {'mysql fresh':>12} "
          f"{'mysql cached':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, database in databases.items():
            rows = sum(len(t.rows) for t in database.tables)
            paths = iter(Path(tmp) / f"{label.replace(' ', '_')}_{i}.sqlite" for i in range(runs))
            lite_fresh = median_ms(lambda: sqlite.build_file(database.tables, next(paths)), runs)
            sqlite.database_file(database)
            lite_open = median_ms(lambda: sqlite.open_database(database, settings), runs)
            line = f"{label:18} {rows:>5} {lite_fresh:>13.1f} {lite_open:>14.2f}"
            if not reason:
                server_fresh = median_ms(lambda: mysql.load(database, settings, reload=True), runs)
                server_open = median_ms(lambda: mysql.open_database(database, settings), runs)
                line += f" {server_fresh:>12.1f} {server_open:>13.2f}"
            print(line)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
