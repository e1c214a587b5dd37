"""The depot scenario's simulator: the weekly delivery cost of a season with the open centres plus one candidate.

Each town's parcels go by road from the nearest open centre (shortest path over ``road``, both directions); the cost
is parcels x km x ``tariff.cost_per_parcel_km``, summed over towns, plus the new site's weekly fixed cost.
The workbench calls ``score`` for every candidate, ``baseline`` for no decision and ``what_if`` for the Decision
check's map (the cost of serving each town, before and after).
"""
from __future__ import annotations

import heapq


def _roads(tables) -> dict[str, list[tuple[str, float]]]:
    graph: dict[str, list[tuple[str, float]]] = {}
    for r in tables["road"].records():
        graph.setdefault(r["town_a"], []).append((r["town_b"], float(r["km"])))
        graph.setdefault(r["town_b"], []).append((r["town_a"], float(r["km"])))
    return graph


def _distances(graph, sources: list[str]) -> dict[str, float]:
    """Shortest road distance from the nearest of ``sources`` to every town (Dijkstra)."""
    best = {s: 0.0 for s in sources}
    queue = [(0.0, s) for s in sources]
    while queue:
        d, town = heapq.heappop(queue)
        if d > best.get(town, float("inf")):
            continue
        for other, km in graph.get(town, ()):
            if d + km < best.get(other, float("inf")):
                best[other] = d + km
                heapq.heappush(queue, (d + km, other))
    return best


def town_costs(tables, question, candidate: str | None) -> dict[str, float]:
    """The weekly cost of serving each town in the question's season, with ``candidate`` open too (or not)."""
    sites = {r["site"]: r for r in tables["site"].records()}
    centres = [r["town"] for r in sites.values() if r["status"] == "open"]
    if candidate is not None:
        if candidate not in sites or sites[candidate]["status"] != "candidate":
            raise ValueError(f"{candidate!r} is not a candidate site")
        centres.append(sites[candidate]["town"])
    rate = float(tables["tariff"].records()[0]["cost_per_parcel_km"])
    km = _distances(_roads(tables), centres)
    season = question.parameters["season"]
    return {r["town"]: r["parcels"] * rate * km.get(r["town"], float("inf"))
            for r in tables["demand"].records() if r["season"] == season}


def _fixed(tables, candidate) -> float:
    return next(float(r["weekly_fixed_cost"]) for r in tables["site"].records() if r["site"] == candidate)


def score(tables, question, candidate: str) -> float:
    """Weekly cost (delivery + the new site's fixed cost) with ``candidate`` open: lower is better."""
    return sum(town_costs(tables, question, candidate).values()) + _fixed(tables, candidate)


def baseline(tables, question) -> float:
    """Weekly delivery cost with no new site."""
    return sum(town_costs(tables, question, None).values())


def what_if(tables, question, candidate: str) -> dict[str, tuple[float, float]]:
    """Per town, the weekly cost of serving it before and after opening ``candidate``."""
    before, after = town_costs(tables, question, None), town_costs(tables, question, candidate)
    return {t: (before[t], after[t]) for t in before}
