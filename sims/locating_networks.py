"""Locating networks for generated questions: a DAG of trade nodes with countries in DQA's proportions, and the
questions' countries planted among them with the knobs' upstream presence; the stored state is one merchant-free
pass, as in ``sims.synthetic``. Everything is drawn from the ``random.Random`` given."""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from string import ascii_uppercase

from sims import synthetic
from sims.tables import Tables

#: Short words Cypher reserves (or reads as values): a country tag is also a Cypher variable in the graph files.
RESERVED = {"ADD", "ALL", "AND", "ANY", "ASC", "END", "FOR", "NEW", "NOT", "SET", "USE", "XOR", "NAN", "INF",
            "CALL", "CASE", "DESC", "DROP", "ELSE", "FROM", "INTO", "LOAD", "NODE", "NONE", "NULL", "ONLY", "OPEN",
            "SHOW", "SKIP", "THEN", "TRUE", "WHEN", "WITH", "CONSTRAINT"}
#: Presence nodes of an ordinary country besides its home (about DQA's 2.2 rows per country).
PRESENCE = (0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 3, 5)


class NoRoom(ValueError):
    """No node of the network has the upstream nodes a planted country needs."""


@lru_cache(maxsize=2)
def all_tags(letters: int) -> tuple[str, ...]:
    return tuple(t for t in map("".join, product(ascii_uppercase, repeat=letters)) if t not in RESERVED)


def tags(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct country tags (three letters, four past 5,000 countries), none a Cypher keyword."""
    return rng.sample(all_tags(3 if n <= 5000 else 4), n)


def distances(sources: list[list[int]], home: int, limit: int) -> dict[int, int]:
    """Hops upstream from ``home`` (shortest), up to ``limit``."""
    dist, frontier = {home: 0}, [home]
    for hop in range(1, limit + 1):
        reached = []
        for node in frontier:
            for s in sources[node]:
                if s not in dist:
                    dist[s] = hop
                    reached.append(s)
        frontier = reached
    return dist


@dataclass
class Plant:
    """A country planted for a question: its home, its rows and, per live candidate, the hops to home."""

    tag: str
    degenerate: bool
    home: int
    presence: list[int]
    hops: dict[int, int]


def unreachable(sources: list[list[int]], home: int) -> list[int]:
    """The nodes from which ``home`` cannot be reached (home excluded)."""
    n = len(sources)
    return sorted(set(range(n)) - set(synthetic.nearest_upstream(sources, home, n)) - {home})


def plant(rng: random.Random, sources: list[list[int]], tag: str, degenerate: bool, candidates: tuple[int, int],
          hops: tuple[int, int]) -> Plant:
    """Choose the home and rows of a question's country: for a degenerate question, rows only where no merchant
    can reach home; else ``--candidates`` rows ``--hops`` upstream of home, and 0-2 rows where none can."""
    n = len(sources)
    homes = rng.sample(range(n), n)
    if degenerate:  # every candidate then scores the no-merchant profit
        home = homes[0]
        elsewhere = unreachable(sources, home)
        return Plant(tag, True, home, rng.sample(elsewhere, min(len(elsewhere), rng.randint(0, 2))), {})
    want = rng.randint(*candidates)
    lo, hi = hops
    for home in homes:
        dist = distances(sources, home, hi)
        eligible = sorted(m for m, d in dist.items() if lo <= d <= hi)
        if len(eligible) >= want:
            live = rng.sample(eligible, want)
            others = unreachable(sources, home)
            extra = rng.sample(others, min(len(others), rng.randint(0, 2)))  # rows that cannot move the profit
            return Plant(tag, False, home, live + extra, {m: dist[m] for m in live})
    raise NoRoom(f"no trade node of a {n}-node network has {want} upstream nodes {lo}-{hi} hops away")


def trade_network(rng: random.Random, size: int, countries: int, kinds: list[bool], candidates: tuple[int, int],
                  hops: tuple[int, int]) -> tuple[Tables, list[Plant], list[str]]:
    """A Locating database of ``size`` nodes and ``countries`` countries, with one planted country per
    entry of ``kinds`` (True: degenerate). Node i flows only to later nodes (as in sims.synthetic); names and
    table order are shuffled so neither gives the flow direction away. Returns the tables, the plants and the node
    names by index."""
    n = size
    width = len(str(n - 1))
    names = [f"node_{k:0{width}d}" for k in rng.sample(range(n), n)]
    n_end, window = max(3, n // 27), max(4, n // 20)
    dests: list[list[int]] = [[] for _ in range(n)]
    sources: list[list[int]] = [[] for _ in range(n)]
    for i in range(n - n_end):
        ahead = range(i + 1, min(n, i + 1 + window))
        for j in rng.sample(ahead, min(len(ahead), rng.choice((1, 2, 2, 3)))):
            dests[i].append(j)
            sources[j].append(i)
    tags_ = tags(rng, countries)
    plants = [plant(rng, sources, tags_[i], degenerate, candidates, hops) for i, degenerate in enumerate(kinds)]
    rows: dict[tuple[int, str], tuple[bool, float]] = {}
    development = {}
    for p in plants:
        development[p.tag] = round(rng.uniform(5, 400), 3)
        rows[(p.home, p.tag)] = (True, round(rng.uniform(5, 80), 3))
        for node in p.presence:
            rows[(node, p.tag)] = (False, round(rng.uniform(0.5, 40), 3))
    homes = {p.tag: p.home for p in plants}
    nearest: dict[tuple[int, int], list[int]] = {}  # (home, limit) -> nearest upstream nodes: shared by countries
    for tag in tags_[len(plants):]:
        large = rng.random() < 0.02  # a trade power: homed at an end node, present on many nodes
        home = n - 1 - rng.randrange(n_end) if large else rng.randrange(n // 11 + 1, n)
        homes[tag], development[tag] = home, round(rng.uniform(5, 400), 3)
        rows[(home, tag)] = (True, round(rng.uniform(5, 80), 3))
        presence = max(8, n // 20) if large else rng.choice(PRESENCE)
        key = (home, 4 * presence)
        upstream = nearest.get(key) or nearest.setdefault(key, synthetic.nearest_upstream(sources, home, key[1]))
        for node in rng.sample(upstream, min(presence, len(upstream))):
            rows[(node, tag)] = (False, round(rng.uniform(0.5, 40), 3))
    order = rng.sample(range(n), n)  # table order of the nodes
    position = {node: i for i, node in enumerate(order)}
    country_order = rng.sample(tags_, len(tags_))
    country_position = {t: i for i, t in enumerate(country_order)}
    node_rows = sorted(rows.items(), key=lambda item: (position[item[0][0]], country_position[item[0][1]]))
    total = [round(rng.uniform(5, 60), 3) for _ in range(n)]  # the node's own power, then its rows' added
    local = [round(rng.uniform(0.5, 12), 3) for _ in range(n)]
    inland = [rng.random() < 0.3 for _ in range(n)]
    for (node, _), (_, power) in node_rows:
        total[node] += power
    flows = []
    for node in order:
        flows += [(names[node], names[d], 0.0) for d in rng.sample(dests[node], len(dests[node]))]
    tables = Tables({
        "country": synthetic.make_table("country", "country_name:VARCHAR home_node:VARCHAR development:FLOAT",
                                        ("country_name",),
                                        [(t, names[homes[t]], development[t]) for t in country_order]),
        "trade_node": synthetic.make_table("trade_node", "trade_node:VARCHAR local_value:FLOAT is_inland:BOOLEAN "
                                           "total_power:FLOAT outgoing:FLOAT ingoing:FLOAT", ("trade_node",),
                                           [(names[i], local[i], inland[i], total[i], 0.0, 0.0) for i in order]),
        "flow": synthetic.make_table("flow", "source:VARCHAR dest:VARCHAR flow:FLOAT", ("source", "dest"), flows),
        "node_country": synthetic.make_table(
            "node_country", "trade_node:VARCHAR country_name:VARCHAR is_home:BOOLEAN has_merchant:BOOLEAN "
            "base_trading_power:FLOAT calculated_trading_power:FLOAT", ("trade_node", "country_name"),
            [(names[node], tag, home, False, p, p) for (node, tag), (home, p) in node_rows]),
    })
    synthetic.store_first_pass(tables)
    return tables, plants, names
