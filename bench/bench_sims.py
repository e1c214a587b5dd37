"""Print how fast the simulators are, on DQA and on synthetic networks and markets of growing size.

Targets (issue "Simulators"): ``python -m sims check --dqa DIR`` (301 questions, every candidate
ranked) <= 1.5 s wall on a 2-core machine; a synthetic 5,000-node trade network ranked for all
candidates <= 2 s. Figures are medians of 3 runs.

Usage: python bench/bench_sims.py [DQA_DIR]   (default: $DQA_DIR, else ../shared/dqa)
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sims import building, locating, synthetic  # noqa: E402
from sims.check import check_benchmark  # noqa: E402
from sims.sqldump import read_sql_dump  # noqa: E402


def median_seconds(action, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_dqa(root: Path) -> None:
    command = [sys.executable, "-m", "sims", "check", "--dqa", str(root)]
    wall = median_seconds(lambda: subprocess.run(command, cwd=ROOT, check=True, capture_output=True))
    print(f"python -m sims check (process wall, incl. start-up): {wall * 1000:.0f} ms (target 1500)")
    print(f"  in-process check: {median_seconds(lambda: check_benchmark(root)) * 1000:.0f} ms")
    loc = root / "locating/queries/SQL_format/q1.sql"
    bld = root / "building/queries/SQL_format/FRA1849.sql"
    for path in (loc, bld):
        print(f"  parse {path.name} ({path.stat().st_size // 1024} KB): "
              f"{median_seconds(lambda: read_sql_dump(path)) * 1000:.1f} ms")
    for mode in ("dqa", "rules"):
        report = check_benchmark(root, mode)
        print(f"  {mode} mode agrees with the labels: locating {report.locating.agree}/{report.locating.total}, "
              f"building {report.building.agree}/{report.building.total}")


def heaviest_country(net: locating.TradeNetwork, tables) -> tuple[str, int, int]:
    """The country whose ranking re-simulates the most: most rows upstream of home, then most ancestors."""
    def load(row):
        upstream = net.ancestors(net.index[row[1]])
        return sum((n, row[0]) in net.row_at for n in upstream), len(upstream)
    country = max(tables["country"].rows, key=load)
    return (country[0], *load(country))


def bench_trade_networks() -> None:
    print("synthetic trade networks (rank = every candidate, the heaviest country; target 2000 ms at 5000):")
    print(f"  {'nodes':>6} {'edges':>6} {'rows':>6} {'movers':>6} {'upstream':>8} "
          f"{'generate':>9} {'rank':>9} {'rank*':>9} {'what_if':>9}")
    for size in (80, 500, 5000):
        start = time.perf_counter()
        tables = synthetic.trade_network(size)
        generate = time.perf_counter() - start
        net = locating.TradeNetwork(tables)
        country, movers, upstream = heaviest_country(net, tables)
        rank = median_seconds(lambda: locating.rank(tables, country))
        rank_compiled = median_seconds(lambda: locating.rank(net, country))
        what_if = median_seconds(lambda: locating.what_if(net, country, [(country, net.names[0])]))
        print(f"  {size:>6} {len(tables['flow'].rows):>6} {len(tables['node_country'].rows):>6} {movers:>6} "
              f"{upstream:>8} {generate * 1000:>7.0f}ms {rank * 1000:>7.0f}ms {rank_compiled * 1000:>7.0f}ms "
              f"{what_if * 1000:>7.0f}ms")
    print("  rank* = on an already compiled TradeNetwork; movers = candidates that need a re-simulation")


def bench_markets() -> None:
    print("synthetic markets (52 goods; rank_all = every building for every goods):")
    print(f"  {'buildings':>9} {'rows':>6} {'rank_all':>9} {'what_if':>9}")
    for size in (100, 400, 1600):
        tables = synthetic.market(size)
        market = building.Market(tables)
        rows = len(tables["supply"].rows) + len(tables["demand"].rows)
        rank_all = median_seconds(lambda: building.rank_all(market))
        what_if = median_seconds(lambda: building.what_if(market, {market.building_ids[0]: 5}))
        print(f"  {size:>9} {rows:>6} {rank_all * 1000:>7.0f}ms {what_if * 1000:>7.1f}ms")


def main() -> None:
    default = os.environ.get("DQA_DIR") or ROOT.parent / "shared" / "dqa"
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(default)
    if (root / "locating").is_dir():
        bench_dqa(root)
    else:
        print(f"no DQA data at {root}: DQA figures skipped (pass DQA_DIR)")
    bench_trade_networks()
    bench_markets()


if __name__ == "__main__":
    main()
