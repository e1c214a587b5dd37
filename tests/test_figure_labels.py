"""Networks that can be read (issue 28 section 3): at a 1440x900 screen no two node labels overlap, on a sample of
20 DQA questions of each scenario (neighbourhood, whole network, what-if views) and on every depot question; the
decision, the best and the home node (or asked goods) are labelled inside the plot without zooming; the depot map
marks the existing centre."""
import random

import pytest

from core import scenarios
from core.analysis import decision
from core.scenarios import catalog, labels
from core.scenarios.labels import Box


def _sample(dqa, scenario: str, n: int = 20) -> list:
    questions = dqa.questions(scenario)
    picked = random.Random(28).sample(questions, min(n, len(questions)))
    named = {q.number: q for q in questions}
    return list({q.id: q for q in picked + [named[k] for k in (1, 57) if k in named]}.values())


def _check(fig, must: set[str], if_drawn: set[str] = frozenset()):
    """No two labels overlap; the ``must`` nodes, and those of ``if_drawn`` that the figure draws, are labelled
    inside the plot."""
    assert labels.overlapping(fig) == []
    drawn = {c for t in fig.data if t.customdata is not None and "text" in (t.mode or "") for c in t.customdata}
    must = set(must) | (set(if_drawn) & drawn)
    shown = {fig.data[label.trace].customdata[label.point] for label in labels.visible(fig)
             if fig.data[label.trace].customdata is not None}
    assert must <= shown, f"not labelled in view: {must - shown}"


def test_label_boxes_follow_position_font_and_axes():
    import plotly.graph_objects as go
    fig = go.Figure(go.Scatter(x=[0, 10], y=[0, 0], mode="markers+text", text=["aaaa", "bbbb"],
                               textposition="top center", textfont=dict(size=10), marker=dict(size=10)))
    fig.update_layout(height=200, margin=dict(l=0, r=0, t=0, b=0), xaxis_range=[0, 10], yaxis_range=[-1, 1])
    to_px, size = labels.transform(fig, 100)
    assert size == (100, 200) and to_px(10, 1) == (100, 0)
    box = labels.labels(fig)[0].box(to_px)
    assert box.bottom == pytest.approx(100 - 5 - labels.GAP) and box.right - box.left == pytest.approx(
        4 * labels.CHAR_WIDTH * 10) and box.left < 0 < box.right
    assert Box(0, 0, 10, 10).overlaps(Box(5, 5, 15, 15)) and not Box(0, 0, 10, 10).overlaps(Box(10, 0, 20, 10))
    crowded = go.Figure(go.Scatter(x=[0, 0.01, 0.02], y=[0, 0, 0], mode="markers+text", text=["one", "two", "six"],
                                   customdata=["a", "b", "c"], textposition="top center"))
    crowded.update_layout(height=300, margin=dict(l=0, r=0, t=0, b=0), xaxis_range=[-1, 1], yaxis_range=[-1, 1])
    assert labels.overlapping(crowded)  # drawn as given they collide
    labels.declutter(crowded, first=["c"])
    assert labels.overlapping(crowded) == [] and crowded.data[0].text[2] == "six"  # the named one kept


@pytest.mark.parametrize("scope", ["neighbourhood", "all"])
def test_locating_labels_never_overlap(dqa, scope):
    kind = scenarios.get("locating")
    for q in _sample(dqa, "locating"):
        db = dqa.database(q)
        fig = kind.network(q, db, best=q.answer, scope=scope)
        _check(fig, {f"trade_node:{q.home}", f"trade_node:{q.answer}"})


def test_locating_what_if_labels_never_overlap(dqa):
    kind = scenarios.get("locating")
    for q in _sample(dqa, "locating", 6):
        db = dqa.database(q)
        pick = scenarios.candidates(q, db)[-1]
        effect = decision.what_if(q, db, pick, scenarios.default_mode(q))
        fig = kind.network(q, db, pick=pick, best=q.answer, change=effect.deltas, pick_label="simulated decision")
        _check(fig, {f"trade_node:{q.home}", f"trade_node:{q.answer}", f"trade_node:{pick}"})


def test_building_labels_never_overlap(dqa):
    kind = scenarios.get("building")
    for q in _sample(dqa, "building"):
        db = dqa.database(q)
        pick = scenarios.candidates(q, db)[-1]
        for hops in (1, 2, 3):
            fig = kind.network(q, db, best=int(q.answer), pick=pick, hops=hops)
            _check(fig, {f"goods:{q.goods}"}, {f"building:{q.answer}", f"building:{pick}"})


@pytest.mark.parametrize("which", ["first candidate", "best"])
def test_building_what_if_is_laid_out_around_the_decision(dqa, which):
    """Building q1's what-if was a fan of crossing edges (every input goods to every supplier): it reads left to
    right, the simulated decision alone on the left, the goods it makes and uses (and the asked goods) next, the
    other buildings trading them on the right, so that the decision's edges fan out of one node; no labels
    overlap and the decision and the asked goods are labelled."""
    kind = scenarios.get("building")
    for q in _sample(dqa, "building"):
        db = dqa.database(q)
        pick = scenarios.candidates(q, db)[0] if which == "first candidate" else int(q.answer)
        effect = decision.what_if(q, db, pick, scenarios.default_mode(q))
        fig = kind.network(q, db, pick=pick, best=int(q.answer), change=effect.deltas, pick_label="simulated decision")
        _check(fig, {f"goods:{q.goods}", f"building:{pick}"}, {f"building:{q.answer}"})
        x = {c: xx for t in fig.data if t.customdata is not None and "text" in (t.mode or "")
             for c, xx in zip(t.customdata, t.x)}
        goods = {c for c in x if c.startswith("goods:")}
        made_or_used = {f"goods:{r['goods_id']}" for table in ("supply", "demand")
                        for r in db.tables[table].records() if r["building_id"] == pick}
        names = {f"goods:{r['code']}": f"goods:{r['goods_name']}" for r in db.tables["goods"].records()}
        assert goods == {names[g] for g in made_or_used} | {f"goods:{q.goods}"}
        assert [c for c in x if x[c] < 0] == [f"building:{pick}"]
        assert {x[g] for g in goods} == {0} and all(x[c] > 0 for c in x if c.startswith("building:") and c in x
                                                     and c != f"building:{pick}")
        assert _crossings(fig) == 0


def _crossings(fig) -> int:
    """How many pairs of straight edges between the same two columns cross (edges are line traces, None between
    them)."""
    segments = []
    for t in fig.data:
        if t.mode == "lines":
            points = list(zip(t.x, t.y))
            for i in range(len(points) - 1):
                (x0, y0), (x1, y1) = points[i], points[i + 1]
                if None not in (x0, x1) and x0 != x1:
                    segments.append(((x0, y0), (x1, y1)) if x0 < x1 else ((x1, y1), (x0, y0)))
    return sum(1 for i, (a0, a1) in enumerate(segments) for b0, b1 in segments[i + 1:]
               if a0[0] == b0[0] and a1[0] == b1[0] and (a0[1] - b0[1]) * (a1[1] - b1[1]) < 0)


def test_depot_map_labels_never_overlap_and_mark_the_existing_centre():
    kind = scenarios.get("depot")
    for q in catalog.questions("scenario", "depot"):
        db = catalog.database(q)
        fig = kind.network(q, db, best=q.answer, pick="DC-BRO")
        _check(fig, set())
        nodes = next(t for t in fig.data if t.mode == "markers+text")
        at = list(nodes.customdata).index("Eastwick")
        assert nodes.marker.symbol[at] == "square" and nodes.text[at] == "Eastwick"
        assert "existing" in {t.name for t in fig.data}
