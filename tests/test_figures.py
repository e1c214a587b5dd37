"""core.scenarios.dqa.figures: network figures carry node ids, highlight the target, the best and the pick, draw a what-if, cap
the market view; node ids give the node's rows; the ranking bars show the top N and the pick."""
import pytest

from core.analysis.format import number
from core.scenarios import catalog
from core.scenarios import drawing
from core.scenarios.dqa import figures
from core.scenarios.dqa.kinds import MARKET_DETAIL
from core.scenarios import ranking


def _demo(scenario, number=1):
    q = catalog.question("demo", scenario, number)
    return q, catalog.database(q)


def _node_ids(fig) -> set:
    return {c for t in fig.data if t.customdata is not None for c in t.customdata}


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def _x(fig, node_id) -> float:
    for t in fig.data:
        if t.customdata is not None and node_id in t.customdata:
            return t.x[list(t.customdata).index(node_id)]
    raise KeyError(node_id)


def test_trade_network_ids_highlights_and_flow_direction():
    q, db = _demo("locating")
    fig = figures.trade_network(q, db, pick="ceylon", best=q.answer, scope="all")
    assert _node_ids(fig) == {f"trade_node:{n}" for n in db.tables["trade_node"].column("trade_node")}
    nodes = next(t for t in fig.data if t.mode == "markers+text")
    assert nodes.marker.color[list(nodes.customdata).index(f"trade_node:{q.home}")] == figures.HOME
    assert list(_trace(fig, "best decision").customdata) == [f"trade_node:{q.answer}"]
    assert list(_trace(fig, "agent's pick").customdata) == ["trade_node:ceylon"]
    for source, dest in zip(db.tables["flow"].column("source"), db.tables["flow"].column("dest")):
        assert _x(fig, f"trade_node:{source}") < _x(fig, f"trade_node:{dest}")  # trade flows left to right


def test_trade_network_draws_flow_changes():
    q, db = _demo("locating")
    edges = list(zip(db.tables["flow"].column("source"), db.tables["flow"].column("dest")))
    fig = figures.trade_network(q, db, flow_change={edges[0]: 0.5, edges[1]: -0.25}, pick="ceylon",
                                pick_label="simulated decision", scope="all")
    colours = {t.line.color for t in fig.data if t.mode == "lines"}
    assert {figures.MORE, figures.LESS, figures.EDGE} <= colours
    assert "simulated decision" in {t.name for t in fig.data}
    low, high = fig.layout.xaxis.range  # zoomed to the changed edges
    assert low <= _x(fig, f"trade_node:{edges[0][0]}") < _x(fig, f"trade_node:{edges[0][1]}") <= high


def _labels(fig) -> dict:
    """Node id -> label font size of the nodes drawn with a label."""
    return {c: t.textfont.size for t in fig.data if t.mode == "markers+text" for c in t.customdata}


def test_trade_network_of_a_dqa_question_opens_on_the_neighbourhood(dqa):
    q = dqa.question("locating", 1)
    db = dqa.database(q)
    fig = figures.trade_network(q, db, best=q.answer)
    present = {r["trade_node"] for r in db.tables["node_country"].records() if r["country_name"] == q.country}
    shown = _node_ids(fig)
    assert {f"trade_node:{n}" for n in present | {q.home, q.answer}} <= shown
    assert len(shown) < len(db.tables["trade_node"].rows)  # not the 79-node tangle
    assert set(_labels(fig).values()) == {figures.LABEL_SIZE} and figures.LABEL_SIZE >= 12
    assert f"{len(shown)} of {len(db.tables['trade_node'].rows)} trade nodes" in fig.layout.meta["caption"]
    whole = figures.trade_network(q, db, best=q.answer, scope="all")  # one click away
    assert len(_node_ids(whole)) == len(db.tables["trade_node"].rows)


def test_edges_skipping_columns_bow_and_changes_stay_visible():
    """A → C drawn over A → B → C on one row hid B's changes (doab → deccan vs deccan → gujarat): an edge that
    skips a column is a curve, so no two edges share a line; the best pick keeps its ring and its star."""
    q, db = _demo("locating")
    edges = list(zip(db.tables["flow"].column("source"), db.tables["flow"].column("dest")))
    fig = figures.trade_network(q, db, flow_change={e: 0.1 * (i + 1) * (-1) ** i for i, e in enumerate(edges)},
                                pick=q.answer, best=q.answer, pick_label="simulated decision", scope="all")
    xs = {_x(fig, f"trade_node:{n}") for e in edges for n in e}
    lines = [t for t in fig.data if t.mode == "lines"]
    segments = []
    for t in lines:
        points = list(zip(t.x, t.y))
        run = []
        for p in points + [(None, None)]:
            if p[0] is None:
                segments += [run] if run else []
                run = []
            else:
                run.append(p)
    assert len(xs) > 2 and all(len(s) >= 2 for s in segments)
    long = [s for s in segments if abs(s[-1][0] - s[0][0]) > 1]
    assert long and all(len(s) > 2 for s in long)  # bowed
    assert {"simulated decision", "best decision"} <= {t.name for t in fig.data}
    names = [t.name for t in fig.data]
    assert names.index("best decision") > names.index("simulated decision")  # the star drawn inside the ring


def test_a_5000_node_network_opens_on_a_neighbourhood_and_finds_a_node():
    from core.model.question import Database, Question
    from sims import synthetic

    tables = synthetic.trade_network(5000)
    country = tables["country"].records()[0]
    q = Question("locating", "synthetic", 1, 1, "", "", "", country["country_name"], home=country["home_node"])
    db = Database("synthetic-5000", "locating", tables, None, [])
    fig = figures.trade_network(q, db)
    assert f"trade_node:{q.home}" in _node_ids(fig) and len(_node_ids(fig)) <= 2 * figures.NEIGHBOURHOOD_LIMIT
    found = figures.trade_network(q, db, around="node_04000")
    assert "trade_node:node_04000" in _node_ids(found) and "centred on node_04000" in {t.name for t in found.data}
    whole = figures.trade_network(q, db, scope="all")
    assert len(_node_ids(whole)) == 5000 and any(t.type == "scattergl" for t in whole.data)
    assert all(len(t.text or ()) < 100 for t in whole.data if t.mode and "text" in t.mode)  # key labels only


def test_market_detail_levels_grow_and_keep_the_goods():
    q, db = _demo("building")
    sizes = [len(_node_ids(figures.market(q, db, hops=h))) for h in MARKET_DETAIL]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert f"goods:{q.goods}" in _node_ids(figures.market(q, db, hops=1))


def test_market_caps_columns_but_keeps_pick_and_best(dqa):
    q = dqa.question("building", 1)
    db = dqa.database(q)
    full = figures.market(q, db, hops=3)
    buildings = {i for i in _node_ids(full) if i.startswith("building:")}
    pick = min(int(i[9:]) for i in buildings)
    capped = figures.market(q, db, hops=3, max_per_column=5, pick=pick, best=q.answer)
    shown = {i for i in _node_ids(capped) if i.startswith("building:")}
    assert {f"building:{pick}", f"building:{q.answer}"} <= shown < buildings
    hidden = sum(int(text.split()[0][1:]) for t in capped.data if t.name == "left out" for text in t.text)
    assert len(shown) + hidden == len(buildings)


def test_market_labels_price_changes():
    q, db = _demo("building")
    fig = figures.market(q, db, hops=2, price_change={q.goods: -1.5})
    goods = next(t for t in fig.data if t.marker.symbol == "diamond" and t.customdata is not None)
    label = goods.text[list(goods.customdata).index(f"goods:{q.goods}")]
    assert "-1.5" in label


@pytest.mark.parametrize("scenario,node,tables", [
    ("locating", "trade_node:{home}", {"trade_node": 1, "flow": None, "node_country": None}),
    ("building", "goods:{goods}", {"goods": 1, "supply": None, "demand": None}),
])
def test_node_rows(scenario, node, tables):
    q, db = _demo(scenario)
    rows = figures.node_rows(db, node.format(home=q.home, goods=q.goods))
    assert set(rows) == set(tables)
    for name, count in tables.items():
        assert rows[name].column_names == db.tables[name].column_names
        assert count is None or len(rows[name].rows) == count
    if scenario == "locating":
        assert all(q.home in (r[0], r[1]) for r in rows["flow"].rows)


def test_building_rows_and_unknown_ids():
    q, db = _demo("building")
    building = db.tables["building"].rows[0][0]
    rows = figures.node_rows(db, f"building:{building}")
    assert [r[0] for r in rows["building"].rows] == [building]
    assert all(r[1] == building for r in rows["supply"].rows + rows["demand"].rows)
    for unknown in ("building:999999", "building:x", "goods:nothing", "trade_node:nowhere", "nonsense", ""):
        assert figures.node_rows(db, unknown) == {}


def test_building_title():
    assert figures.building_title("building_maize_farmlevel") == "maize farm"
    assert figures.building_title("building_logging_camp") == "logging camp"


def test_ranking_bars_top_n_and_a_lower_pick():
    q, db = _demo("building")
    r = ranking(q, db)
    last = r.entries[-1].candidate
    fig = drawing.ranking_bars(r, {}, 3, pick=last, number=number)
    bars = fig.data[0]
    def label(c):  # a tie group's rank, marked "(tied)"
        return f"{r.rank_of(c)}{' (tied)' if r.tied(c) > 1 else ''}. {c}"

    assert list(bars.y[:3]) == [label(e.candidate) for e in r.entries[:3]]
    assert r.tied(r.entries[2].candidate) > 1 and bars.y[2].startswith("3 (tied). ")  # demo building 1: a tie for 3rd
    assert bars.y[-1] == label(last) and len(bars.y) == 4
    assert bars.marker.color[0] == figures.BEST and bars.marker.color[-1] == figures.PICK
    assert list(bars.x) == [r.gain(c) for c in [e.candidate for e in r.entries[:3]] + [last]]


def test_a_bar_of_no_gain_reads_no_gain():
    """Issue 40: 13 of 15 ranking bars read "3 (tied) +0"."""
    q, db = _demo("locating")
    r = ranking(q, db)
    fig = drawing.ranking_bars(r, {}, len(r.entries), number=number)
    texts = dict(zip(fig.data[0].y, fig.data[0].text))
    flat = [label for label, gain in zip(fig.data[0].y, fig.data[0].x) if gain == 0]
    assert flat and all(texts[label] == "no gain" for label in flat) and "+0" not in texts.values()


def test_legends_clear_the_toolbar_and_labels_at_the_edge_are_not_cut():
    """Issue 40: a chart's legend lay under its toolbar (plotly's modebar, at the figure's top right), and a node
    label at the plot's edge was cut ("cape of go…")."""
    from core.scenarios import get

    q, db = _demo("locating")
    r = ranking(q, db)
    depot = catalog.question("scenario", "depot", 1)
    figs = [figures.trade_network(q, db, scope="all"), figures.market(*_demo("building")),
            drawing.ranking_bars(r, {}, 5, number=number), get("depot").network(depot, catalog.database(depot))]
    for fig in figs:
        assert fig.layout.legend.y == 1.0 and fig.layout.legend.yanchor == "bottom"  # above the plot ...
        assert fig.layout.margin.t >= drawing.TOP_MARGIN  # ... in a margin with room for the toolbar above it
    for fig in (figs[0], figs[1], figs[3]):
        labelled = [t for t in fig.data if "text" in (t.mode or "")]
        assert labelled and all(t.cliponaxis is False for t in labelled)


def test_depths_are_longest_paths_to_an_end_with_a_cycle_as_one_node():
    """network_view.depths (plain Python since networkx's import held the first figure back) against networkx's
    condensation on random graphs, with and without cycles; a path of 20,000 nodes needs no recursion."""
    import random

    import networkx as nx

    from core.scenarios.network_view import depths, neighbours

    rng = random.Random(7)
    for trial in range(200):
        nodes = tuple(f"n{i}" for i in range(rng.randint(1, 40)))
        edges = tuple(sorted({(rng.choice(nodes), rng.choice(nodes)) for _ in range(rng.randint(0, 3 * len(nodes)))}))
        if trial % 2:
            edges = tuple((a, b) for a, b in edges if int(a[1:]) < int(b[1:]))
        graph = nx.DiGraph(list(edges))
        graph.add_nodes_from(nodes)
        dag = nx.condensation(graph)
        deep: dict = {}
        for c in reversed(list(nx.topological_sort(dag))):
            deep[c] = max((deep[d] + 1 for d in dag.successors(c)), default=0)
        assert depths(nodes, edges) == {n: deep[c] for n, c in dag.graph["mapping"].items()}
        undirected = nx.Graph(list(edges))
        undirected.add_nodes_from(nodes)
        assert {n: sorted(m) for n, m in neighbours(nodes, edges).items()} == {
            n: sorted(undirected.neighbors(n)) for n in nodes}
    assert depths(("a", "b", "c", "d"), (("a", "b"), ("b", "c"), ("c", "b"), ("c", "d"))) == {
        "a": 2, "b": 1, "c": 1, "d": 0}
    chain = tuple(f"c{i}" for i in range(20_000))
    assert depths(chain, tuple(zip(chain, chain[1:])))["c0"] == 19_999
