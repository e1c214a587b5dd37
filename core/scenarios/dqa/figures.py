"""Plotly figures of a DQA question's database: the trade network (Locating) and the market around the asked goods
(Building), with the decision target, the best decision and a pick highlighted and, optionally, a what-if effect
drawn on the network.

Pure functions of the scenario model (and of simulator results) to ``plotly.graph_objects.Figure``. Every node
marker carries a node id in ``customdata`` (``trade_node:NAME``, ``goods:NAME`` or ``building:ID``);
``node_rows(database, node_id)`` gives the database rows of a clicked node.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import plotly.graph_objects as go

from core.scenarios.labels import declutter
from core.scenarios.network_view import depths, layered_layout, neighbourhood, neighbours, order_columns
from core.scenarios.drawing import (BEST, CONSUMER, EDGE, FADED_TEXT, FAINT_EDGE, FOCUS, GOODS, HOME,
                                  LABEL_SIZE, LEGEND, LESS, MORE, OTHER, PICK, PRESENT, SUPPLIER, TEXT,
                                  TOP_MARGIN)
from core.model.question import Database, Question
from sims.tables import Table

WIDTH_BUCKETS = 5
CURVE_STEPS = 12  # points along a bent edge
NEIGHBOURHOOD_HOPS = 3  # upstream of the centre of a Locating neighbourhood
NEIGHBOURHOOD_LIMIT = 45  # nodes, about
BIG_NETWORK = 400  # shown nodes above which a network is drawn with WebGL, labelled only at the marked nodes
TINY = 1e-12



# --- node ids and their rows ---------------------------------------------------------------------------------

def node_rows(database: Database, node_id: str) -> dict[str, Table]:
    """The database rows of a figure node, as tables: a trade node's trade_node, flow and node_country rows; a
    goods' goods, supply and demand rows; a building's building, supply and demand rows. Empty for an id that
    names nothing in the database."""
    kind, _, key = str(node_id).partition(":")
    t = database.tables
    if kind == "trade_node" and "trade_node" in t:
        tests = {"trade_node": lambda r: r["trade_node"] == key, "flow": lambda r: key in (r["source"], r["dest"]),
                 "node_country": lambda r: r["trade_node"] == key}
    elif kind == "goods" and "goods" in t:
        code = next((r["code"] for r in t["goods"].records() if r["goods_name"] == key), None)
        tests = {"goods": lambda r: r["code"] == code, "supply": lambda r: r["goods_id"] == code,
                 "demand": lambda r: r["goods_id"] == code}
    elif kind == "building" and "building" in t and key.isdigit():
        tests = {"building": lambda r: r["id"] == int(key), "supply": lambda r: r["building_id"] == int(key),
                 "demand": lambda r: r["building_id"] == int(key)}
    else:
        return {}
    found = {name: Table(name, t[name].columns, t[name].primary_key,
                         [row for row, record in zip(t[name].rows, t[name].records()) if test(record)])
             for name, test in tests.items()}
    return found if found[kind].rows else {}


def building_title(name: str) -> str:
    """A building type for labels: ``building_maize_farmlevel`` (DQA spelling) -> ``maize farm``,
    ``building_furniture_manufacturies`` -> ``furniture manufactories``."""
    name = name.removeprefix("building_")
    title = name.removesuffix("level").replace("_", " ").strip() or name
    return title.replace("manufacturies", "manufactories")  # the game's internal spelling, as displayed in it


# --- shared drawing parts ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Edge:
    start: tuple[float, float]
    end: tuple[float, float]
    value: float  # drives the width
    text: str  # hover text
    bend: float = 0.0  # how far (in rows) the middle of the edge bows away from the straight line

    def at(self, t: float) -> tuple[float, float]:
        """The point a share ``t`` along the edge (a quadratic Bézier curve when it bends)."""
        (x0, y0), (x1, y1) = self.start, self.end
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2 + 2 * self.bend
        u = 1 - t
        return u * u * x0 + 2 * u * t * cx + t * t * x1, u * u * y0 + 2 * u * t * cy + t * t * y1

    def points(self) -> list[tuple[float, float]]:
        return [self.start, self.end] if not self.bend else [self.at(i / CURVE_STEPS) for i in range(CURVE_STEPS + 1)]


def _edge_traces(edges: list[_Edge], color: str, biggest: float, arrows: bool = True) -> list:
    """Edges as a few line traces (one per width bucket), arrowheads at 60% of each edge pointing along it, and
    invisible markers there carrying the hover text; without ``arrows`` (big networks) one WebGL line trace."""
    if not arrows:  # arrays (NaN between edges) pass plotly's validation quickly
        xy = np.full((3 * len(edges), 2), np.nan)
        for i, e in enumerate(edges):
            xy[3 * i], xy[3 * i + 1] = e.start, e.end
        return [go.Scattergl(x=xy[:, 0], y=xy[:, 1], mode="lines", line=dict(width=0.6, color=color),
                             hoverinfo="skip", showlegend=False)]
    buckets: dict[int, tuple[list, list]] = {}
    arrows_x, arrows_y, mids_x, mids_y = [], [], [], []
    for e in edges:
        b = 0 if biggest <= 0 else min(WIDTH_BUCKETS - 1, int(WIDTH_BUCKETS * abs(e.value) / biggest))
        xs, ys = buckets.setdefault(b, ([], []))
        for x, y in e.points():
            xs.append(x)
            ys.append(y)
        xs.append(None)
        ys.append(None)
        (ax, ay), (mx, my) = e.at(0.5), e.at(0.6)
        arrows_x += [ax, mx, None]
        arrows_y += [ay, my, None]
        mids_x.append(mx)
        mids_y.append(my)
    traces = [go.Scatter(x=xs, y=ys, mode="lines", line=dict(width=0.7 + 1.5 * b, color=color), hoverinfo="skip",
                         showlegend=False) for b, (xs, ys) in sorted(buckets.items())]
    traces.append(go.Scatter(x=arrows_x, y=arrows_y, mode="markers", hoverinfo="skip", showlegend=False,
                             marker=dict(symbol="arrow", angleref="previous", color=color,
                                         size=[0, 9, 0] * len(edges))))
    traces.append(go.Scatter(x=mids_x, y=mids_y, mode="markers", marker=dict(size=10, opacity=0),
                             hovertext=[e.text for e in edges], hoverinfo="text", showlegend=False))
    return traces


def _highlights(pos: dict, ids: dict, pick, best, pick_label: str, title=str) -> list:
    """A ring around the pick and a star on the best decision, drawn over the nodes (clickable like them); when
    the pick is the best the ring stays around the star, so both marks show."""
    traces = []
    if pick is not None and pick in pos:
        traces.append(go.Scatter(x=[pos[pick][0]], y=[pos[pick][1]], mode="markers", name=pick_label,
                                 marker=dict(symbol="circle-open", size=32, color=PICK, line=dict(width=3)),
                                 customdata=[ids[pick]], hovertext=[f"{pick_label}: {title(pick)}"],
                                 hoverinfo="text"))
    if best is not None and best in pos:
        traces.append(go.Scatter(x=[pos[best][0]], y=[pos[best][1]], mode="markers", name="best decision",
                                 marker=dict(symbol="star", size=17, color=BEST, line=dict(width=1, color=PICK)),
                                 customdata=[ids[best]], hovertext=[f"best decision: {title(best)}"],
                                 hoverinfo="text"))
    return traces


def _focus_ring(pos: dict, ids: dict, node, label: str) -> list:
    """A ring marking the node the view is centred on (found by name or chosen to explore from)."""
    if node is None or node not in pos:
        return []
    return [go.Scatter(x=[pos[node][0]], y=[pos[node][1]], mode="markers", name=label, customdata=[ids[node]],
                       marker=dict(symbol="circle-open", size=40, color=FOCUS, line=dict(width=2, dash="dot")),
                       hovertext=[label], hoverinfo="text")]


def _legend_entry(label: str, color: str, symbol: str = "circle") -> go.Scatter:
    return go.Scatter(x=[None], y=[None], mode="markers", marker=dict(size=10, color=color, symbol=symbol),
                      name=label, hoverinfo="skip")


def _style(fig: go.Figure, height: int) -> go.Figure:
    """Layout of a network figure. Clicking a node selects it: it keeps its colour and the other nodes fade (their
    labels stay readable)."""
    for trace in fig.data:
        if "text" in (trace.mode or ""):
            trace.cliponaxis = False  # a label at the plot's edge runs into the margin, not cut off ("cape of go…")
        if "markers" in (trace.mode or "") and trace.marker.opacity != 0:
            trace.selected = dict(marker=dict(opacity=1))
            trace.unselected = dict(marker=dict(opacity=0.3))
            if "text" in trace.mode:
                trace.selected.textfont = dict(color="#000000")
                trace.unselected.textfont = dict(color=FADED_TEXT)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), plot_bgcolor="white",
                      paper_bgcolor="white", clickmode="event+select", dragmode="pan", hovermode="closest",
                      xaxis=dict(visible=False), yaxis=dict(visible=False), font=dict(size=LABEL_SIZE),
                      legend=LEGEND)
    return fig


# --- Locating --------------------------------------------------------------------------------------------------

def _bend(start: tuple[float, float], end: tuple[float, float]) -> float:
    """How far an edge bows: edges spanning more than one column curve, so that they never lie on top of the
    edges and nodes of the columns they cross (a → c over a → b → c on one row)."""
    span = abs(end[0] - start[0])
    return 0.0 if span <= 1 else min(0.6, 0.25 + 0.08 * (span - 2))


@lru_cache(maxsize=32)
def _trade_layout(shown: tuple[str, ...], edges: tuple[tuple[str, str], ...],
                  names: tuple[str, ...], all_edges: tuple[tuple[str, str], ...]) -> dict[str, tuple[float, float]]:
    """Trade flows run left to right: a node's column is the longest path from it to an end node (a node without
    dests), over the whole network, keeping only the columns of the shown nodes."""
    return layered_layout(list(shown), list(edges), depths(names, all_edges))


def trade_view(question: Question, database: Database, *, scope: str = "neighbourhood", around: str | None = None,
               marked: tuple = (), changed: tuple = ()) -> tuple[list[str], str]:
    """The trade nodes a Locating figure shows, and a sentence saying which: the whole network, or the
    neighbourhood of ``around`` (else of the home node: its upstream nodes within NEIGHBOURHOOD_HOPS, the nodes
    where the country trades and the ``marked`` and ``changed`` nodes, each with its path down to the rest)."""
    t = database.tables
    names = [r["trade_node"] for r in t["trade_node"].records()]
    if scope == "all":
        return names, f"The whole network: {len(names)} trade nodes."
    edges = [(r["source"], r["dest"]) for r in t["flow"].records()]
    known = set(names)
    present = [r["trade_node"] for r in t["node_country"].records() if r["country_name"] == question.country]
    centre = around if around in known else question.home
    also = [n for n in dict.fromkeys([question.home, *marked, *(present if centre == question.home else ()),
                                      *changed]) if n in known and n != centre]
    shown = neighbourhood(edges, [centre], also, NEIGHBOURHOOD_HOPS, NEIGHBOURHOOD_LIMIT)
    what = f"its upstream nodes within {NEIGHBOURHOOD_HOPS} hops" + (
        f" and the nodes where {question.country} trades" if centre == question.home else "")
    home = f" ({question.country}'s home)" if centre == question.home else ""
    return shown, (f"The neighbourhood of {centre.replace('_', ' ')}{home}: {what}"
                   f"{', what the decision changes' if changed else ''}, each with its path there; "
                   f"{len(shown)} of {len(names)} trade nodes.")


def trade_network(question: Question, database: Database, *, pick: str | None = None, best: str | None = None,
                  pick_label: str = "agent's pick", flows: dict[tuple[str, str], float] | None = None,
                  flow_change: dict[tuple[str, str], float] | None = None, scope: str = "neighbourhood",
                  around: str | None = None) -> go.Figure:
    """The Locating trade network (``scope`` "neighbourhood", see trade_view, or "all"): the home node and the
    nodes where the country trades highlighted, node size by value, edge width by flow (the stored ``flows``, or a
    what-if state's), or by ``flow_change`` (a what-if minus no decision). ``around`` centres the neighbourhood on
    another node (ringed). ``layout.meta["caption"]`` says what is shown."""
    # node value: local + ingoing; networks above BIG_NETWORK shown nodes are drawn with WebGL, labelled only at the
    # marked nodes
    t = database.tables
    records = {n["trade_node"]: n for n in t["trade_node"].records()}
    flow_rows = t["flow"].records()
    edges = [(r["source"], r["dest"]) for r in flow_rows]
    flows = flows or {(r["source"], r["dest"]): r["flow"] for r in flow_rows}
    changed = tuple(dict.fromkeys(n for (s, d), v in (flow_change or {}).items() if abs(v) > TINY for n in (s, d)))
    shown, caption = trade_view(question, database, scope=scope, around=around,
                                marked=tuple(n for n in (pick, best) if n is not None), changed=changed)
    keep = set(shown)
    shown_edges = [(s, d) for s, d in edges if s in keep and d in keep]
    pos = _trade_layout(tuple(shown), tuple(shown_edges), tuple(records), tuple(edges))
    big = len(shown) > BIG_NETWORK
    fig = go.Figure()
    fig.add_traces(_flow_traces(shown_edges, pos, flows, flow_change, big))
    present = {r["trade_node"] for r in t["node_country"].records() if r["country_name"] == question.country}
    fig.add_traces(_trade_node_traces(question, shown, records, present, pos, big,
                                      labelled=[n for n in dict.fromkeys([question.home, *present, pick, best, around])
                                                if n in keep]))
    fig.add_traces([_legend_entry(f"home node ({question.home})", HOME),
                    _legend_entry(f"{question.country} trades here", PRESENT), _legend_entry("other node", OTHER)])
    ids = {n: f"trade_node:{n}" for n in shown}
    fig.add_traces(_focus_ring(pos, ids, around if around != question.home else None,
                               f"centred on {around}"))
    fig.add_traces(_highlights(pos, ids, pick, best, pick_label))
    tallest = max(Counter(x for x, _ in pos.values()).values(), default=1)  # nodes in the fullest column
    rows = max(tallest, len(shown) / 8)  # a long chain of short columns needs height for its bows too
    fig = _style(fig, 760 if big else max(440, min(640, round(160 + 80 * rows))))
    fig.layout.meta = {"caption": caption, "shown": len(shown), "total": len(records)}
    if scope == "all" and around in pos:  # zoom to the node looked for; the toolbar's autoscale shows all
        _zoom(fig, [pos[around]], margin=3.0, least=(8.0, 12.0))
    elif flow_change is not None and scope == "all":  # zoom to what changed
        _zoom(fig, [pos[n] for n in changed + (question.home, pick, best) if n in pos])
    return declutter(fig, first=[ids[n] for n in (pick, best, question.home, around) if n in ids])


def _flow_traces(shown_edges, pos, flows, flow_change, big: bool) -> list:
    """The trade network's edges: width by flow, or (with ``flow_change``) coloured and sized by the change."""
    def edge(s, d, value, text):
        return _Edge(pos[s], pos[d], value, text, 0.0 if big else _bend(pos[s], pos[d]))

    if flow_change is None:
        return _edge_traces([edge(s, d, flows.get((s, d), 0.0), f"{s} → {d}: flow {flows.get((s, d), 0.0):.4g}")
                             for s, d in shown_edges], EDGE, max([abs(v) for v in flows.values()] + [TINY]),
                            arrows=not big)
    traces = []
    biggest = max([abs(v) for v in flow_change.values()] + [TINY])
    for color, keep_edge in ((EDGE, lambda v: abs(v) <= TINY), (MORE, lambda v: v > TINY),
                             (LESS, lambda v: v < -TINY)):
        drawn = [edge(s, d, v, f"{s} → {d}: flow {v:+.4g}" if abs(v) > TINY else f"{s} → {d}: unchanged")
                 for s, d in shown_edges if keep_edge(v := flow_change.get((s, d), 0.0))]
        if drawn:
            traces += _edge_traces(drawn, color, biggest if color != EDGE else 0.0, arrows=not big)
    return traces + [_legend_entry(label, color, "line-ew-open") for label, color in (("more flow", MORE),
                                                                                      ("less flow", LESS))]


def _trade_node_traces(question: Question, shown: list[str], records: dict, present: set, pos, big: bool,
                       labelled: list[str]) -> list:
    """The trade network's nodes: coloured home / trades here / other, sized by value (local + ingoing); a big
    network's as WebGL markers with only the ``labelled`` nodes named."""
    value = {n: r["local_value"] + r["ingoing"] for n, r in records.items()}
    biggest = max(list(value.values()) + [TINY])
    columns = sorted({x for x, _ in pos.values()})

    def colour(name):
        return HOME if name == question.home else PRESENT if name in present else OTHER

    nodes = dict(
        x=[pos[n][0] for n in shown], y=[pos[n][1] for n in shown], showlegend=False,
        customdata=[f"trade_node:{n}" for n in shown],
        marker=dict(size=[(5 if big else 9) + (12 if big else 24) * (max(value[n], 0) / biggest) ** 0.5 for n in shown],
                    color=[colour(n) for n in shown], line=dict(width=1, color="white")),
        hovertext=[f"<b>{n}</b><br>local value {r['local_value']:.4g}<br>ingoing {r['ingoing']:.4g}"
                   f"<br>total power {r['total_power']:.4g}{'<br>inland' if r['is_inland'] else ''}"
                   for n in shown for r in (records[n],)], hoverinfo="text")
    if not big:
        return [go.Scatter(
            mode="markers+text", text=[n.replace("_", " ") for n in shown],
            textfont=dict(size=LABEL_SIZE, color=TEXT),
            textposition=["top center" if columns.index(pos[n][0]) % 2 == 0 else "bottom center" for n in shown],
            **nodes)]
    # WebGL markers (arrays, quick to validate); labels only where a person looks first
    nodes = {**nodes, "x": np.array(nodes["x"]), "y": np.array(nodes["y"]),
             "customdata": np.array(nodes["customdata"], dtype=object),
             "hovertext": np.array([f"<b>{n}</b><br>value {value[n]:.3g}" for n in shown], dtype=object),
             "marker": {**nodes["marker"], "size": np.array(nodes["marker"]["size"]),
                        "color": np.array(nodes["marker"]["color"], dtype=object)}}
    return [go.Scattergl(mode="markers", **nodes),
            go.Scatter(x=[pos[n][0] for n in labelled], y=[pos[n][1] for n in labelled], mode="text",
                       text=[n.replace("_", " ") for n in labelled], textposition="top center",
                       textfont=dict(size=LABEL_SIZE, color=TEXT), hoverinfo="skip", showlegend=False)]


def _zoom(fig: go.Figure, points: list[tuple[float, float]], margin: float = 0.7,
          least: tuple[float, float] = (6.0, 4.0)) -> None:
    """Set the axes to the box around ``points``, widened by ``margin`` and to at least ``least`` (x, y) units."""
    for i, axis in enumerate(("xaxis", "yaxis")):
        low, high = min(p[i] for p in points) - margin, max(p[i] for p in points) + margin
        grow = max(0.0, least[i] - (high - low)) / 2
        fig.layout[axis].range = [low - grow, high + grow]


# --- Building --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _MarketLinks:
    """The supply (building -> goods) and demand (goods -> building) links of a market, with their amounts."""

    supply: list[tuple[int, str, float]]  # building, goods, current_output
    demand: list[tuple[str, int, float]]  # goods, building, current_input

    @classmethod
    def of(cls, database: Database) -> _MarketLinks:
        t = database.tables
        name = {r["code"]: r["goods_name"] for r in t["goods"].records()}
        return cls([(r["building_id"], name[r["goods_id"]], r["current_output"]) for r in t["supply"].records()],
                   [(name[r["goods_id"]], r["building_id"], r["current_input"]) for r in t["demand"].records()])

    def columns(self, goods: str, hops: int) -> dict[str, int]:
        """Column of each node id around ``goods`` (column 0): its suppliers at -1, their inputs at -2, the
        buildings making those at -3; its consumers at +1, their outputs at +2. A node keeps the column nearest
        to the goods (upstream first)."""
        makers: dict[str, list[int]] = {}
        users: dict[str, list[int]] = {}
        inputs: dict[int, list[str]] = {}
        outputs: dict[int, list[str]] = {}
        for b, g, _ in self.supply:
            makers.setdefault(g, []).append(b)
            outputs.setdefault(b, []).append(g)
        for g, b, _ in self.demand:
            users.setdefault(g, []).append(b)
            inputs.setdefault(b, []).append(g)
        column = {f"goods:{goods}": 0}
        up, down = [goods], [goods]
        for depth in range(1, max(1, min(hops, 3)) + 1):
            if depth % 2:  # buildings: makers of the goods upstream, users downstream
                up = [b for g in up for b in makers.get(g, [])]
                down = [b for g in down for b in users.get(g, [])] if depth == 1 else []
                kind = "building"
            else:
                up = [g for b in up for g in inputs.get(b, [])]
                down = [g for b in down for g in outputs.get(b, [])]
                kind = "goods"
            for side, found in ((-1, up), (1, down)):
                for key in found:
                    column.setdefault(f"{kind}:{key}", side * depth)
        return column


@dataclass(frozen=True)
class _MarketView:
    """What a market figure shows: node ids with their column and position, the edges between them (from, to,
    amount, hover text) and, per column, how many buildings were left out."""

    column: dict[str, int]
    pos: dict[str, tuple[float, float]]
    edges: list[tuple[str, str, float, str]]
    hidden: dict[int, int]
    notes: dict[str, str] = field(default_factory=dict)  # node id -> more hover text


def _market_view(question: Question, links: _MarketLinks, names: dict[int, str], hops: int,
                 max_per_column: int | None, keep: set) -> _MarketView:
    column = links.columns(question.goods, hops)
    edges = [(f"building:{b}", f"goods:{g}", v, f"{b} supplies {g}: output {v:.4g}") for b, g, v in links.supply]
    edges += [(f"goods:{g}", f"building:{b}", v, f"{b} uses {g}: input {v:.4g}") for g, b, v in links.demand]
    edges = [e for e in edges if e[0] in column and e[1] in column]
    hidden: dict[int, int] = {}
    if max_per_column:
        inward: dict[str, float] = {}  # a building's flow to or from the column next to it on the goods' side
        for a, b, v, _ in edges:
            for node, other in ((a, b), (b, a)):
                if node.startswith("building:") and column[node] - column[other] == (1 if column[node] > 0 else -1):
                    inward[node] = inward.get(node, 0.0) + abs(v)
        by_column: dict[int, list[str]] = {}
        for node, c in column.items():
            if node.startswith("building:"):
                by_column.setdefault(c, []).append(node)
        for c, nodes in by_column.items():
            shown = {n for n in nodes if n in keep}
            shown |= set(sorted(nodes, key=lambda n: -inward.get(n, 0.0))[:max(0, max_per_column - len(shown))])
            if len(nodes) > len(shown):
                hidden[c] = len(nodes) - len(shown)
                for n in set(nodes) - shown:
                    del column[n]
        edges = [e for e in edges if e[0] in column and e[1] in column]
    columns = [sorted((n for n, c in column.items() if c == x),
                      key=lambda n: (names[int(n[9:])], int(n[9:])) if n.startswith("building:") else (n, 0))
               for x in range(min(column.values()), max(column.values()) + 1)]
    row = order_columns(columns, neighbours(column, edges).__getitem__, spread=True)
    return _MarketView(column, {n: (float(column[n]), -row[n]) for n in column}, edges, hidden)


def _what_if_view(question: Question, links: _MarketLinks, names: dict[int, str], decision: int,
                  max_per_column: int | None, keep: set) -> _MarketView:
    """A what-if around the simulated ``decision`` as a tree, left to right: the decision, the goods it produces and
    consumes and the asked goods, and their markets, each other building drawn once beside the goods it trades most
    here (so no edges cross), at most ``max_per_column`` in all (those in ``keep`` always)."""
    me = f"building:{decision}"
    goods = {g for b, g, _ in links.supply if b == decision} | {g for g, b, _ in links.demand if b == decision}
    goods.add(question.goods)
    column = {me: -1} | {f"goods:{g}": 0 for g in goods}
    edges = [(f"building:{b}", f"goods:{g}", v, f"{b} supplies {g}: output {v:.4g}") for b, g, v in links.supply
             if g in goods]
    edges += [(f"goods:{g}", f"building:{b}", v, f"{b} uses {g}: input {v:.4g}") for g, b, v in links.demand
              if g in goods]
    trades: dict[str, dict[str, float]] = {}  # other building -> goods node -> flow
    for a, b, v, _ in edges:
        other, node = (a, b) if a.startswith("building:") else (b, a)
        if other != me:
            trades.setdefault(other, {})[node] = trades.get(other, {}).get(node, 0.0) + abs(v)
    asked = f"goods:{question.goods}"
    home = {n: asked if asked in t else max(t, key=lambda g: (t[g], g)) for n, t in trades.items()}
    markets: dict[str, list[str]] = {}
    for n in sorted(trades, key=lambda n: -trades[n][home[n]]):
        markets.setdefault(home[n], []).append(n)
    share = max(1, (max_per_column or len(trades)) // max(1, len(markets)))
    shown = [n for n in trades if n in keep]
    for traders in markets.values():
        room = share - sum(1 for n in shown if n in traders)
        shown += [n for n in traders if n not in keep][:max(0, room)]
    column |= dict.fromkeys(shown, 1)
    hidden = {1: len(trades) - len(shown)} if len(trades) > len(shown) else {}
    edges = [e for e in edges if e[0] == me or e[1] == me or home.get(e[0]) == e[1] or home.get(e[1]) == e[0]]
    edges = [e for e in edges if e[0] in column and e[1] in column]
    notes = {n: "also trades " + ", ".join(sorted(g[6:] for g in trades[n] if g != home[n]))
             for n in shown if len(trades[n]) > 1}
    columns = [sorted((n for n, c in column.items() if c == x),
                      key=lambda n: (names[int(n[9:])], int(n[9:])) if n.startswith("building:") else (n, 0))
               for x in (-1, 0, 1)]
    row = order_columns(columns, neighbours(column, edges).__getitem__, spread=True)
    return _MarketView(column, {n: (float(column[n]), -row[n]) for n in column}, edges, hidden, notes)


def _clear_of_marks(label: str, left: bool, marked: bool) -> str:
    """A building's label, moved clear of the star and the ring drawn over a marked node (an em space is about
    as wide as the font is high)."""
    pad = "\u2003\u2003" if marked else ""
    return label + pad if left else pad + label


def market(question: Question, database: Database, *, hops: int = 1, max_per_column: int | None = None,
           pick: int | None = None, best: int | None = None, pick_label: str = "agent's pick",
           price_change: dict[str, float] | None = None) -> go.Figure:
    """The Building market around the asked goods, upstream to the left and downstream to the right, in ``hops``
    (1-3, kinds.MARKET_DETAIL), at most ``max_per_column`` buildings a column. ``price_change`` (a what-if
    minus no decision) labels and colours goods by it; with a ``pick`` (the simulated decision) the figure is laid
    out around it (``_what_if_view``)."""
    # a column keeps the buildings with the largest flows towards the goods, the pick and the best always, and says
    # how many it leaves out; node size by level, edge width by current output or input
    t = database.tables
    links = _MarketLinks.of(database)
    buildings = {r["id"]: r for r in t["building"].records()}
    names, keep = {b: r["name"] for b, r in buildings.items()}, {f"building:{pick}", f"building:{best}"}
    what_if = price_change is not None and pick in buildings
    if what_if:
        view = _what_if_view(question, links, names, pick, max_per_column, keep)
    else:
        view = _market_view(question, links, names, hops, max_per_column, keep)
    pos, column = view.pos, view.column
    fig = go.Figure()
    fig.add_traces(_edge_traces([_Edge(pos[a], pos[b], v, text) for a, b, v, text in view.edges], FAINT_EDGE,
                                max([abs(e[2]) for e in view.edges] + [TINY])))
    suppliers = {b for b, g, _ in links.supply if g == question.goods}
    consumers = {b for g, b, _ in links.demand if g == question.goods}
    bnodes = sorted(int(n[9:]) for n in column if n.startswith("building:"))
    top_level = max([buildings[b]["level"] for b in bnodes] + [1])

    def colour(b):
        return SUPPLIER if b in suppliers else CONSUMER if b in consumers else OTHER

    def title(b):
        return f"{b} {building_title(buildings[b]['name'])}"

    fig.add_trace(go.Scatter(
        x=[pos[f"building:{b}"][0] for b in bnodes], y=[pos[f"building:{b}"][1] for b in bnodes],
        mode="markers+text", showlegend=False, customdata=[f"building:{b}" for b in bnodes],
        text=[_clear_of_marks(title(b), column[f"building:{b}"] < 0, b in (pick, best)) for b in bnodes],
        textfont=dict(size=LABEL_SIZE, color=TEXT),
        textposition=["middle left" if column[f"building:{b}"] < 0 else "middle right" for b in bnodes],
        marker=dict(size=[7 + 11 * (max(buildings[b]["level"], 0) / top_level) ** 0.5 for b in bnodes],
                    color=[colour(b) for b in bnodes], line=dict(width=1, color="white")),
        hovertext=[f"<b>{title(b)}</b><br>{buildings[b]['name']}, level {buildings[b]['level']}"
                   + (f"<br>{view.notes[f'building:{b}']}" if f"building:{b}" in view.notes else "") for b in bnodes],
        hoverinfo="text"))
    prices = {r["goods_name"]: r["current_price"] for r in t["goods"].records()}
    gnodes = sorted(n[6:] for n in column if n.startswith("goods:"))
    change = price_change or {}

    def goods_colour(g):
        c = change.get(g, 0.0)
        return LESS if c > TINY else SUPPLIER if c < -TINY else HOME if g == question.goods else GOODS

    fig.add_trace(go.Scatter(
        x=[pos[f"goods:{g}"][0] for g in gnodes], y=[pos[f"goods:{g}"][1] for g in gnodes], mode="markers+text",
        showlegend=False, customdata=[f"goods:{g}" for g in gnodes],
        textposition="middle left" if what_if else "top center",  # a what-if's markets are on the right
        text=[f"<b>{g}</b>" + (f" {change[g]:+.3g}" if abs(change.get(g, 0.0)) > TINY else "") for g in gnodes],
        textfont=dict(size=12, color=TEXT),
        marker=dict(symbol="diamond", size=[24 if g == question.goods else 16 for g in gnodes],
                    color=[goods_colour(g) for g in gnodes], line=dict(width=1, color="white")),
        hovertext=[f"<b>{g}</b><br>stored price {prices[g]:.4g}"
                   + (f"<br>what-if price change {change.get(g, 0.0):+.4g}" if price_change else "")
                   for g in gnodes], hoverinfo="text"))
    if view.hidden:  # text points, not annotations: the axis ranges and the label placement count them
        below = {c: min(y for x, y in pos.values() if x == c) - 1 for c in view.hidden}
        fig.add_trace(go.Scatter(x=list(below), y=list(below.values()), mode="text", name="left out",
                                 text=[f"+{n} more buildings" for n in view.hidden.values()],
                                 textfont=dict(size=10, color="#718096"), hoverinfo="skip", showlegend=False))
    roles = {colour(b) for b in bnodes}
    goods_legend = ((f"asked goods ({question.goods})", HOME), ("other goods", GOODS)) if not price_change else (
        ("price falls", SUPPLIER), ("price rises", LESS), ("price unchanged", GOODS))
    legend = [*((label, c, "diamond") for label, c in goods_legend),
              *((label, c, "circle") for label, c in ((f"supplies {question.goods}", SUPPLIER),
                                                      (f"uses {question.goods}", CONSUMER), ("other building", OTHER))
                if c in roles)]
    fig.add_traces([_legend_entry(*entry) for entry in legend])
    fig.add_traces(_highlights({b: pos[f"building:{b}"] for b in bnodes}, {b: f"building:{b}" for b in bnodes},
                               pick, best, pick_label, title))
    left, right = min(column.values()), max(column.values())
    room = {True: 1.0, False: 0.35}  # building columns (odd) have their labels outside
    fig = _style(fig, max(480, min(1200, 110 + 24 * max(Counter(column.values()).values()))))
    fig.layout.meta = {"shown": len(column), "total": len(buildings) + len(prices)}
    if what_if:
        others = sum(1 for g, c in change.items() if abs(c) > TINY and f"goods:{g}" not in column)
        fig.layout.meta["caption"] = (
            "Around the simulated decision: the goods it makes and uses, and each goods' biggest other traders (a "
            "building trading several is linked to the asked goods, else to the one it trades most; hover for the "
            "others)."
            + (f" {others} other goods change price too (the table below)." if others else ""))
    fig.update_xaxes(range=[left - room[left % 2 == 1], right + room[right % 2 == 1]])
    return declutter(fig, first=[f"building:{b}" for b in (pick, best)] + [f"goods:{question.goods}"])
