"""Writes this scenario's data (data/*.csv) from a fixed seed: ``python assets/scenarios/depot/generate.py``.

A made-up region of 16 towns on a 100 km x 60 km plane (seed 16): roads join each town to its three nearest
neighbours (length = straight distance x 1.25, rounded to 0.1 km); one distribution centre is open already, six
towns have a candidate site with a weekly fixed cost; weekly parcel demand per town and season, coastal towns
(x > 70) busier in summer, inland ones in winter.
"""
from __future__ import annotations

import csv
import math
import random
from pathlib import Path

SEED = 16
NAMES = ["Ashford", "Brookmere", "Calder", "Dunmore", "Eastwick", "Fairholt", "Glenrow", "Harwick", "Ivybridge",
         "Juniper", "Kelso", "Lynmouth", "Marlow", "Northam", "Oakham", "Penrith"]
SEASONS = ("winter", "summer", "peak")


def main(out: Path = Path(__file__).parent / "data") -> None:
    rng = random.Random(SEED)
    towns = [(n, round(rng.uniform(0, 100), 1), round(rng.uniform(0, 60), 1)) for n in NAMES]
    roads = set()
    for name, x, y in towns:
        near = sorted((math.hypot(x - x2, y - y2), n2) for n2, x2, y2 in towns if n2 != name)[:3]
        for _, other in near:
            roads.add(tuple(sorted((name, other))))
    where = {n: (x, y) for n, x, y in towns}
    road_rows = [(a, b, round(1.25 * math.dist(where[a], where[b]), 1)) for a, b in sorted(roads)]
    open_town = min(towns, key=lambda t: t[1])[0]  # the westmost town has the existing centre
    candidates = rng.sample([n for n in NAMES if n != open_town], 6)
    sites = [(f"DC-{open_town[:3].upper()}", open_town, "open", 0.0)]
    sites += [(f"DC-{t[:3].upper()}", t, "candidate", float(rng.randrange(1500, 4000, 100))) for t in candidates]
    demand = []
    for name, x, _ in towns:
        base = rng.randrange(200, 900, 10)
        coastal = x > 70
        factor = {"winter": 0.7 if coastal else 1.2, "summer": 1.6 if coastal else 0.8, "peak": 1.5}
        demand += [(name, s, round(base * factor[s])) for s in SEASONS]
    out.mkdir(exist_ok=True)
    files = {"town": (("town", "x_km", "y_km"), towns), "road": (("town_a", "town_b", "km"), road_rows),
             "site": (("site", "town", "status", "weekly_fixed_cost"), sites),
             "demand": (("town", "season", "parcels"), demand), "tariff": (("cost_per_parcel_km",), [(0.09,)])}
    for name, (header, rows) in files.items():
        with (out / f"{name}.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)


if __name__ == "__main__":
    main()
