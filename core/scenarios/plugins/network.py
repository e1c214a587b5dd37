"""The network view of a plugin scenario's data: the nodes of one table (placed by its x/y columns, else a spring
layout), the edges of another (width by their weight column), the candidates marked, the best decision starred,
a pick ringed, and a what-if's change per node coloured. Every marker carries its node id in ``customdata``.
Sites of the candidates' table that are not candidates (an existing centre) are marked as existing.
A view can be centred on one node (its neighbourhood: the nodes within a few edges, either way); a network of more
than WHOLE_LIMIT nodes opens on its candidates' neighbourhood."""
from __future__ import annotations

import networkx as nx
import plotly.graph_objects as go

from core.scenarios.labels import declutter
from core.scenarios.drawing import LABEL_SIZE, LEGEND, TOP_MARGIN
from core.scenarios.network_view import upstream

WHOLE_LIMIT = 300  # nodes: a bigger network opens on its candidates' neighbourhood
AROUND_HOPS, AROUND_LIMIT = 2, 120  # a neighbourhood: the nodes within 2 edges, at most about 120

NODE, CANDIDATE, BEST, PICK, EDGE, TEXT = "#a0aec0", "#3182ce", "#d69e2e", "#1a202c", "#cbd5e0", "#2d3748"
EXISTING = "#2d3748"
MORE, LESS = "#c53030", "#38a169"


def neighbourhood(links: list[tuple], centres: list[str], hops: int = AROUND_HOPS,
                  limit: int = AROUND_LIMIT) -> list[str]:
    """The centres and the nodes within ``hops`` edges of them (either direction), nearest first, about ``limit``
    at most."""
    adjacent: dict[str, list[str]] = {}
    for a, b, *_ in links:
        adjacent.setdefault(a, []).append(b)
        adjacent.setdefault(b, []).append(a)
    shown = dict.fromkeys(centres)
    for c in centres:
        shown.update(dict.fromkeys(upstream(adjacent, c, hops, max(2, limit // max(1, len(centres))))))
    return list(shown)


def node_key(table, nodes: dict) -> str:
    """The column naming a node: the declared key, else the table's primary key, else its first column."""
    return nodes.get("key") or (table.primary_key[0] if table.primary_key else table.column_names[0])


def _centred(recs: list[dict], links: list[tuple], key: str, centres: list[str], around, marked: list):
    """The node rows and links of the centres' neighbourhood, with the ``marked`` nodes (best, pick) kept, and a
    caption saying what is shown."""
    within = set(neighbourhood(links, centres))
    kept = list(dict.fromkeys(str(v) for v in marked if v is not None and str(v) not in within))
    shown = within | set(kept)
    total = len(recs)
    recs = [r for r in recs if str(r[key]) in shown]
    links = [link for link in links if link[0] in shown and link[1] in shown]
    what = f"the neighbourhood of {around}" if around is not None else "the candidates' neighbourhood"
    caption = (f"Showing {what}: the nodes within {AROUND_HOPS} edges"
               + (f" and {', '.join(kept)} (marked)" if kept else "") + f"; {len(recs)} of {total} nodes"
               + ("" if around is not None else f" (the whole network has over {WHOLE_LIMIT})") + ".")
    return recs, links, caption


def draw(tables, nodes: dict, edges: dict, *, pick=None, best=None, pick_label: str = "agent's pick",
         change: dict | None = None, candidates: set = frozenset(), around: str | None = None,
         existing: set = frozenset()) -> go.Figure:
    """The figure (see the module doc). ``nodes``: table, key, optional x, y, label, size columns; ``edges``:
    table, source, target, optional weight column; ``around``: a node to centre the view on; ``existing``: nodes
    holding what is there already (a square)."""
    nt, et = tables[nodes["table"]], tables[edges["table"]]
    key = node_key(nt, nodes)
    recs = nt.records()
    links = [(str(r[edges["source"]]), str(r[edges["target"]]), float(r[edges["weight"]]) if edges.get("weight")
              else 1.0) for r in et.records()]
    caption = None
    centres = [str(around)] if around is not None else (sorted(candidates) if len(recs) > WHOLE_LIMIT else [])
    if centres:
        recs, links, caption = _centred(recs, links, key, centres, around, [best, pick])
    ids = [str(r[key]) for r in recs]
    if nodes.get("x") and nodes.get("y"):
        pos = {i: (float(r[nodes["x"]]), float(r[nodes["y"]])) for i, r in zip(ids, recs)}
    else:
        graph = nx.Graph()
        graph.add_nodes_from(ids)
        graph.add_edges_from((a, b) for a, b, _ in links if a in set(ids) and b in set(ids))
        pos = {n: tuple(p) for n, p in nx.spring_layout(graph, seed=7).items()}
    fig = go.Figure()
    xs, ys, mx, my, hover = [], [], [], [], []
    for a, b, w in links:
        if a in pos and b in pos:
            xs += [pos[a][0], pos[b][0], None]
            ys += [pos[a][1], pos[b][1], None]
            mx.append((pos[a][0] + pos[b][0]) / 2)
            my.append((pos[a][1] + pos[b][1]) / 2)
            hover.append(f"{a} – {b}" + (f": {edges['weight']} {w:.4g}" if edges.get("weight") else ""))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(width=1.5, color=EDGE), hoverinfo="skip",
                             showlegend=False))
    fig.add_trace(go.Scatter(x=mx, y=my, mode="markers", marker=dict(size=8, opacity=0), hovertext=hover,
                             hoverinfo="text", showlegend=False))
    change = {str(k): v for k, v in (change or {}).items()}

    def colour(n):
        c = change.get(n)
        if c is not None and abs(c) > 1e-12:
            return MORE if c > 0 else LESS
        return CANDIDATE if n in candidates else EXISTING if n in existing else NODE

    label = nodes.get("label") or key
    size = nodes.get("size")
    top = (max((abs(float(r[size])) for r in recs), default=1.0) or 1.0) if size else 1.0
    fig.add_trace(go.Scatter(
        x=[pos[i][0] for i in ids], y=[pos[i][1] for i in ids], mode="markers+text", showlegend=False,
        customdata=ids, text=[str(r[label]) for r in recs], textposition="top center",
        textfont=dict(size=LABEL_SIZE, color=TEXT),
        marker=dict(size=[10 + (14 * (abs(float(r[size])) / top) ** 0.5 if size else 4) for r in recs],
                    color=[colour(i) for i in ids], line=dict(width=1, color="white"),
                    symbol=["square" if i in existing else "circle" for i in ids]),
        hovertext=["<br>".join(f"{k}: {v}" for k, v in r.items())
                   + (f"<br>change: {change[i]:+.4g}" if i in change else "") for i, r in zip(ids, recs)],
        hoverinfo="text"))
    keys = (("candidate", CANDIDATE, "circle"),) + ((("existing", EXISTING, "square"),) if existing else ()) + (
        ("other", NODE, "circle"),) + ((("rises", MORE, "circle"), ("falls", LESS, "circle")) if change else ())
    for name, color, symbol in keys:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=name, hoverinfo="skip",
                                 marker=dict(size=10, color=color, symbol=symbol)))
    best, pick = (None if v is None else str(v) for v in (best, pick))
    if best in pos:
        fig.add_trace(go.Scatter(x=[pos[best][0]], y=[pos[best][1]], mode="markers", name="best decision",
                                 customdata=[best], marker=dict(symbol="star", size=18, color=BEST,
                                                                line=dict(width=1, color=PICK)),
                                 hovertext=[f"best decision: {best}"], hoverinfo="text"))
    if pick in pos:
        fig.add_trace(go.Scatter(x=[pos[pick][0]], y=[pos[pick][1]], mode="markers", name=pick_label,
                                 customdata=[pick], marker=dict(symbol="circle-open", size=30, color=PICK,
                                                                line=dict(width=3)),
                                 hovertext=[f"{pick_label}: {pick}"], hoverinfo="text"))
    for trace in fig.data:
        if "markers" in (trace.mode or "") and trace.marker.opacity != 0:
            trace.unselected = dict(marker=dict(opacity=1), textfont=dict(color=TEXT))
            if "text" in trace.mode:
                trace.cliponaxis = False  # a label at the plot's edge runs into the margin, not cut
    fig.update_layout(height=520, margin=dict(l=10, r=10, t=TOP_MARGIN, b=10), plot_bgcolor="white",
                      paper_bgcolor="white", clickmode="event+select", dragmode="pan", hovermode="closest",
                      xaxis=dict(visible=False), yaxis=dict(visible=False, scaleanchor="x"), legend=LEGEND,
                      meta={"caption": caption} if caption else None)
    return declutter(fig, first=[v for v in (pick, best) if v is not None] + sorted(existing))
