"""Synthetic databases in the DQA schemas, for benchmarks and tests at sizes the benchmark lacks.

``trade_network`` builds a Locating database: a DAG of trade nodes flowing towards a few end
nodes, countries with a home node and presence upstream of it, and a stored state made
consistent by one merchant-free pass. ``market`` builds a Building database whose stored prices
are the result of the base run. ``dump_sql`` writes either in the DQA SQL dump format.
"""
from __future__ import annotations

import random
from pathlib import Path

from sims import building, locating
from sims.tables import Column, Table, Tables


def make_table(name: str, columns: str, primary_key: tuple[str, ...], rows: list[tuple]) -> Table:
    """A Table from a column spec such as ``"name:VARCHAR level:INT"``."""
    cols = tuple(Column(*c.split(":")) for c in columns.split())
    return Table(name, cols, primary_key, rows)


def trade_network(n_nodes: int, seed: int = 0, n_countries: int | None = None) -> Tables:
    """A Locating database with ``n_nodes`` trade nodes (node i flows only to later nodes).

    About 1 in 11 nodes is a top node, 3 or more are end nodes, each other node has 1-3 dests within
    a window ahead. Countries (default n_nodes // 2) have a home node, presence on 1-8 nodes
    upstream of it (2% are trade powers: homed at an end node, present on 5% of all nodes) and
    development 5-400.
    """
    rng = random.Random(seed)
    names = [f"node_{i:05d}" for i in range(n_nodes)]
    n_end = max(3, n_nodes // 27)
    window = max(4, n_nodes // 20)
    edges = []
    for i in range(n_nodes - n_end):
        ahead = range(i + 1, min(n_nodes, i + 1 + window))
        edges += [(i, j) for j in sorted(rng.sample(ahead, min(len(ahead), rng.choice((1, 2, 2, 3)))))]
    sources: list[list[int]] = [[] for _ in names]
    for s, d in edges:
        sources[d].append(s)
    n_countries = n_countries or max(2, n_nodes // 2)
    countries, rows = [], {}
    for c in range(n_countries):
        tag = f"C{c:04d}"
        large = rng.random() < 0.02  # a trade power: homed at an end node, present on 5% of the nodes
        home = n_nodes - 1 - rng.randrange(n_end) if large else rng.randrange(n_nodes // 11 + 1, n_nodes)
        countries.append((tag, names[home], round(rng.uniform(5, 400), 3)))
        rows[(home, tag)] = (True, round(rng.uniform(5, 80), 3))
        presence = max(8, n_nodes // 20) if large else rng.randint(1, 8)
        upstream = nearest_upstream(sources, home, 4 * presence)
        for node in rng.sample(upstream, min(presence, len(upstream))):
            rows[(node, tag)] = (False, round(rng.uniform(0.5, 40), 3))
    node_rows = sorted(rows.items())
    own_power = [round(rng.uniform(5, 60), 3) for _ in names]  # the node's power besides the rows
    total = own_power[:]
    for (n, _), (_, p) in node_rows:
        total[n] += p
    tables = Tables({
        "country": make_table("country", "country_name:VARCHAR home_node:VARCHAR development:FLOAT",
                          ("country_name",), countries),
        "trade_node": make_table("trade_node", "trade_node:VARCHAR local_value:FLOAT is_inland:BOOLEAN "
                             "total_power:FLOAT outgoing:FLOAT ingoing:FLOAT", ("trade_node",),
                             [(n, round(rng.uniform(0.5, 30), 3), rng.random() < 0.3, total[i], 0.0, 0.0)
                              for i, n in enumerate(names)]),
        "flow": make_table("flow", "source:VARCHAR dest:VARCHAR flow:FLOAT", ("source", "dest"),
                       [(names[s], names[d], 0.0) for s, d in edges]),
        "node_country": make_table("node_country", "trade_node:VARCHAR country_name:VARCHAR is_home:BOOLEAN "
                               "has_merchant:BOOLEAN base_trading_power:FLOAT calculated_trading_power:FLOAT",
                               ("trade_node", "country_name"),
                               [(names[n], c, home, False, p, p) for (n, c), (home, p) in node_rows]),
    })
    store_first_pass(tables)
    return tables


def nearest_upstream(sources: list[list[int]], node: int, limit: int) -> list[int]:
    """Up to ``limit`` ancestors of ``node``, nearest first (breadth-first)."""
    found, queue = [], [node]
    seen = {node}
    for current in queue:
        for s in sources[current]:
            if s not in seen and len(found) < limit:
                seen.add(s)
                found.append(s)
                queue.append(s)
    return found


def store_first_pass(tables: Tables) -> None:
    """Make the stored total_power/outgoing/ingoing those of one merchant-free pass from a fresh state."""
    state = locating.what_if(tables, tables["country"].rows[0][0], mode="rules")
    nodes = tables["trade_node"]
    nodes.rows = [(n, lv, inland, state.nodes[n].total_power, state.nodes[n].outgoing, state.nodes[n].ingoing)
                  for n, lv, inland, *_ in nodes.rows]
    flows = tables["flow"]
    flows.rows = [(s, d, state.flows[(s, d)]) for s, d, _ in flows.rows]


def market(n_buildings: int, n_goods: int = 52, seed: int = 0, consumer_share: float = 0.0,
           supply_scale: float = 1.0) -> Tables:
    """A Building database: ``n_buildings`` buildings (levels 1-20) with 0-3 inputs and 1-2 outputs each; a share
    ``consumer_share`` of the goods are no building's input; each output's max_supply is up to 30 *
    ``supply_scale`` per level. The stored current_output, current_input and current_price are the base run's
    (rules mode, no level change), as in the DQA databases.
    """
    # as in DQA: many goods are consumer goods, and markets supply about twice the buildings' demand
    rng = random.Random(seed)
    goods = [(f"goods_{g:02d}", g, float(rng.choice((20, 30, 40, 50, 60, 80, 100))), 0.0,
              round(rng.uniform(0, 3000), 3) if rng.random() < 0.6 else 0.0) for g in range(n_goods)]
    consumer = set(rng.sample(range(n_goods), round(consumer_share * n_goods))) if consumer_share else set()
    buildings, supply, demand = [], [], []
    for b in range(n_buildings):
        bid, level = 1000 + b, rng.randint(1, 20)
        buildings.append((bid, f"building_type_{rng.randrange(40)}", level))
        outputs = rng.sample(range(n_goods), rng.choice((1, 1, 2)))
        pool = [g for g in range(n_goods) if g not in outputs and g not in consumer]
        inputs = rng.sample(pool, min(len(pool), rng.choice((0, 1, 2, 2, 3))))
        demand += [(g, bid, level * round(rng.uniform(1, 20), 2), 0.0, level) for g in inputs]
        for g in outputs:
            max_supply = level * round(rng.uniform(1, 30) * supply_scale, 2)
            supply.append((g, bid, max_supply, max_supply, level))
    tables = Tables({
        "goods": make_table("goods", "goods_name:VARCHAR code:INT base_price:FLOAT current_price:FLOAT pop_demand:FLOAT",
                           ("code",), goods),
        "building": make_table("building", "id:INT name:VARCHAR level:INT", ("id",), buildings),
        "supply": make_table("supply", "goods_id:INT building_id:INT max_supply:FLOAT current_output:FLOAT level:INT",
                            ("goods_id", "building_id"), supply),
        "demand": make_table("demand", "goods_id:INT building_id:INT max_demand:FLOAT current_input:FLOAT level:INT",
                            ("goods_id", "building_id"), demand),
    })
    state = building.what_if(tables, {}, mode="rules")
    tables["goods"].rows = [(g, c, bp, state.goods[g].price, pop) for g, c, bp, _, pop in goods]
    names = [g[0] for g in goods]
    tables["supply"].rows = [(g, b, ms, state.outputs[(b, names[g])], lv) for g, b, ms, _, lv in supply]
    tables["demand"].rows = [(g, b, md, state.inputs[(b, names[g])], lv) for g, b, md, _, lv in demand]
    return tables


def _sql_value(value, column: Column) -> str:
    if column.type == "BOOLEAN":
        return "TRUE" if value else "FALSE"
    if column.type == "VARCHAR":
        return '"' + str(value).replace('"', '""') + '"'
    return repr(value)


def dump_sql(tables: Tables) -> str:
    """The tables as a DQA-format SQL dump: CREATE TABLE statements, then one INSERT a line."""
    lines = []
    for t in tables:
        cols = ", ".join(f"{c.name} {c.type}" for c in t.columns)
        key = f", PRIMARY KEY ({', '.join(t.primary_key)})" if t.primary_key else ""
        lines.append(f"CREATE TABLE {t.name}( {cols}{key});")
    for t in tables:
        head = f"INSERT INTO {t.name}({','.join(t.column_names)}) VALUES ("
        lines += [head + ", ".join(_sql_value(v, c) for v, c in zip(row, t.columns)) + ");" for row in t.rows]
    return "\n".join(lines) + "\n"


def write_sql(tables: Tables, path: str | Path) -> Path:
    """Write ``dump_sql(tables)`` to ``path``."""
    path = Path(path)
    path.write_text(dump_sql(tables), encoding="utf-8")
    return path
