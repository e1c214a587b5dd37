"""Plotly figures of a question's database: the trade network (Locating) and the goods/buildings market
(Building), with the decision target highlighted and, optionally, a what-if effect drawn on it.

Pure functions from the scenario model (and simulator states) to ``plotly.graph_objects.Figure``; every node
marker carries its id in ``customdata`` so a page can show the rows of a clicked node.
"""
from __future__ import annotations

from functools import lru_cache

import networkx as nx
import plotly.graph_objects as go

from core.scenario import Database, Question

HOME, CANDIDATE, OTHER, PICK, BEST = "#c0392b", "#2b6cb0", "#a0aec0", "#d69e2e", "#2f855a"
GOODS, SUPPLIER, CONSUMER = "#805ad5", "#2f855a", "#dd6b20"
WIDTH_BUCKETS = 5


def _layered_layout(graph: nx.DiGraph) -> dict:
    """Nodes in columns by topological generation (sources left, sinks right), spread within a column."""
    pos = {}
    for x, generation in enumerate(nx.topological_generations(graph)):
        generation = sorted(generation)
        for i, node in enumerate(generation):
            pos[node] = (x, (i - (len(generation) - 1) / 2) * 1.0)
    return pos


@lru_cache(maxsize=32)
def _trade_layout(key: str, edges: tuple[tuple[str, str], ...], nodes: tuple[str, ...]) -> dict:
    graph = nx.DiGraph(list(edges))
    graph.add_nodes_from(nodes)
    if nx.is_directed_acyclic_graph(graph):
        return _layered_layout(graph)
    return nx.spring_layout(graph, seed=7)


def _edge_traces(segments: list[tuple[tuple, tuple, float, str]], color: str, max_value: float) -> list[go.Scatter]:
    """Edges as a few line traces, one per width bucket, plus invisible midpoints carrying the hover text."""
    buckets: dict[int, list] = {}
    mids_x, mids_y, texts = [], [], []
    for (x0, y0), (x1, y1), value, text in segments:
        b = 0 if max_value <= 0 else min(WIDTH_BUCKETS - 1, int(WIDTH_BUCKETS * abs(value) / max_value))
        xs, ys = buckets.setdefault(b, ([], []))
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        mids_x.append(x0 + (x1 - x0) * 0.6)
        mids_y.append(y0 + (y1 - y0) * 0.6)
        texts.append(text)
    traces = [go.Scatter(x=xs, y=ys, mode="lines", line=dict(width=0.6 + 1.6 * b, color=color), hoverinfo="skip",
                         showlegend=False) for b, (xs, ys) in sorted(buckets.items())]
    traces.append(go.Scatter(x=mids_x, y=mids_y, mode="markers", marker=dict(size=6, color=color, symbol="triangle-right"),
                             hovertext=texts, hoverinfo="text", showlegend=False))
    return traces


def trade_network(question: Question, database: Database, *, pick: str | None = None, best: str | None = None,
                  flows: dict[tuple[str, str], float] | None = None,
                  flow_change: dict[tuple[str, str], float] | None = None) -> go.Figure:
    """The Locating trade network: home node and candidates highlighted, node size by value
    (local + ingoing), edge width by flow. ``flow_change`` (e.g. a what-if minus the baseline) colours edges
    by the change instead."""
    nodes = database.tables["trade_node"].records()
    edges = [(r["source"], r["dest"]) for r in database.tables["flow"].records()]
    stored = {(r["source"], r["dest"]): r["flow"] for r in database.tables["flow"].records()}
    flows = flows or stored
    pos = _trade_layout(database.key, tuple(edges), tuple(n["trade_node"] for n in nodes))
    present = {r["trade_node"] for r in database.tables["node_country"].records()
               if r["country_name"] == question.country}
    fig = go.Figure()
    if flow_change is not None:
        up = [(pos[s], pos[d], v, f"{s} → {d}: {v:+.4g}") for (s, d), v in flow_change.items() if v > 1e-12]
        down = [(pos[s], pos[d], v, f"{s} → {d}: {v:+.4g}") for (s, d), v in flow_change.items() if v < -1e-12]
        same = [(pos[s], pos[d], 0.0, f"{s} → {d}: unchanged") for (s, d) in edges
                if abs(flow_change.get((s, d), 0.0)) <= 1e-12]
        biggest = max([abs(v) for v in flow_change.values()] + [1e-12])
        for segs, color in ((same, "#e2e8f0"), (up, BEST), (down, HOME)):
            if segs:
                fig.add_traces(_edge_traces(segs, color, biggest))
    else:
        segs = [(pos[s], pos[d], flows.get((s, d), 0.0), f"{s} → {d}: flow {flows.get((s, d), 0.0):.4g}")
                for s, d in edges]
        fig.add_traces(_edge_traces(segs, "#718096", max([abs(v) for v in flows.values()] + [1e-12])))

    def colour(name: str) -> str:
        if name == question.home:
            return HOME
        if name == pick:
            return PICK
        if name == best:
            return BEST
        return CANDIDATE if name in present else OTHER

    values = [n["local_value"] + n["ingoing"] for n in nodes]
    biggest = max(values + [1e-12])
    fig.add_trace(go.Scatter(
        x=[pos[n["trade_node"]][0] for n in nodes], y=[pos[n["trade_node"]][1] for n in nodes],
        mode="markers+text", text=[n["trade_node"] for n in nodes], textposition="top center",
        textfont=dict(size=9), customdata=[n["trade_node"] for n in nodes],
        marker=dict(size=[8 + 26 * (v / biggest) ** 0.5 for v in values], color=[colour(n["trade_node"]) for n in nodes],
                    line=dict(width=1, color="white")),
        hovertext=[f"<b>{n['trade_node']}</b><br>local value {n['local_value']:.4g}<br>ingoing {n['ingoing']:.4g}"
                   f"<br>total power {n['total_power']:.4g}{'<br>inland' if n['is_inland'] else ''}" for n in nodes],
        hoverinfo="text", showlegend=False))
    for label, color in (("home node", HOME), (f"{question.country} present", CANDIDATE), ("other node", OTHER),
                         *((("agent's pick", PICK),) if pick else ()), *((("best decision", BEST),) if best else ())):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=dict(size=10, color=color), name=label))
    return _style(fig)


def market(question: Question, database: Database, *, hops: int = 1, pick: int | None = None,
           best: int | None = None, price_change: dict[str, float] | None = None) -> go.Figure:
    """The Building market around the asked goods: its suppliers and consumers (``hops`` = 1), plus their other
    goods and those goods' buildings for each further hop. ``price_change`` labels goods with a what-if's
    price change."""
    t = database.tables
    goods_name = {r["code"]: r["goods_name"] for r in t["goods"].records()}
    buildings = {r["id"]: r for r in t["building"].records()}
    supply = [(r["building_id"], goods_name[r["goods_id"]], r["current_output"]) for r in t["supply"].records()]
    demand = [(goods_name[r["goods_id"]], r["building_id"], r["current_input"]) for r in t["demand"].records()]
    keep_goods, keep_buildings = {question.goods}, set()
    for _ in range(max(1, hops)):
        keep_buildings |= {b for b, g, _ in supply if g in keep_goods} | {b for g, b, _ in demand if g in keep_goods}
        keep_goods |= {g for b, g, _ in supply if b in keep_buildings} | {g for g, b, _ in demand if b in keep_buildings}
    graph = nx.DiGraph()
    graph.add_nodes_from(f"g:{g}" for g in keep_goods)
    graph.add_nodes_from(f"b:{b}" for b in keep_buildings)
    edges = [(f"b:{b}", f"g:{g}", v) for b, g, v in supply if b in keep_buildings and g in keep_goods]
    edges += [(f"g:{g}", f"b:{b}", v) for g, b, v in demand if b in keep_buildings and g in keep_goods]
    graph.add_edges_from((a, b) for a, b, _ in edges)
    pos = nx.spring_layout(graph, seed=3, k=1.6 / max(1, len(graph)) ** 0.5)
    fig = go.Figure()
    biggest = max([abs(v) for *_, v in edges] + [1e-12])
    fig.add_traces(_edge_traces([(pos[a], pos[b], v, f"{a[2:]} → {b[2:]}: {v:.4g}") for a, b, v in edges],
                                "#a0aec0", biggest))
    suppliers = {b for b, g, _ in supply if g == question.goods}
    prices = {r["goods_name"]: r["current_price"] for r in t["goods"].records()}
    gnodes = sorted(keep_goods)
    fig.add_trace(go.Scatter(
        x=[pos[f"g:{g}"][0] for g in gnodes], y=[pos[f"g:{g}"][1] for g in gnodes], mode="markers+text",
        marker=dict(symbol="diamond", size=[22 if g == question.goods else 14 for g in gnodes], color=GOODS),
        text=[g if not price_change else f"{g} ({price_change.get(g, 0):+.3g})" for g in gnodes],
        textposition="top center", customdata=[f"goods:{g}" for g in gnodes],
        hovertext=[f"<b>{g}</b><br>price {prices[g]:.4g}" for g in gnodes], hoverinfo="text", name="goods"))

    def colour(b: int) -> str:
        if b == pick:
            return PICK
        if b == best:
            return BEST
        return SUPPLIER if b in suppliers else CONSUMER

    bnodes = sorted(keep_buildings)
    fig.add_trace(go.Scatter(
        x=[pos[f"b:{b}"][0] for b in bnodes], y=[pos[f"b:{b}"][1] for b in bnodes], mode="markers+text",
        marker=dict(size=[8 + 2 * min(buildings[b]["level"], 10) for b in bnodes], color=[colour(b) for b in bnodes]),
        text=[str(b) for b in bnodes], textposition="bottom center", textfont=dict(size=9),
        customdata=[f"building:{b}" for b in bnodes],
        hovertext=[f"<b>{b}</b> {buildings[b]['name']}<br>level {buildings[b]['level']}" for b in bnodes],
        hoverinfo="text", name="buildings", showlegend=False))
    for label, color in ((f"supplies {question.goods}", SUPPLIER), ("other building", CONSUMER),
                         *((("agent's pick", PICK),) if pick is not None else ()),
                         *((("best decision", BEST),) if best is not None else ())):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=dict(size=10, color=color), name=label))
    return _style(fig)


def _style(fig: go.Figure) -> go.Figure:
    fig.update_layout(height=560, margin=dict(l=10, r=10, t=10, b=10), plot_bgcolor="white", clickmode="event+select",
                      xaxis=dict(visible=False), yaxis=dict(visible=False), dragmode="pan",
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
