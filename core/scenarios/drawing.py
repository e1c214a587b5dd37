"""What every scenario's figures share: the colours and label size of the network views, and the decision check's
chart of the candidates' gains (a plotly Figure)."""
from __future__ import annotations

import plotly.graph_objects as go

from sims.ranking import Ranking

HOME, PRESENT, OTHER = "#c53030", "#3182ce", "#a0aec0"  # the decision target's node; nodes present / others
GOODS, SUPPLIER, CONSUMER = "#805ad5", "#38a169", "#dd6b20"  # a market's goods, suppliers, consumers
BEST, PICK = "#ecc94b", "#1a202c"  # a star on the best decision, a ring around the pick
MORE, LESS, EDGE = "#2b6cb0", "#dd6b20", "#a0aec0"  # what-if edge changes; edges without one
FAINT_EDGE = "rgba(160, 174, 192, 0.55)"  # market edges, under many labels
FOCUS = "#d53f8c"  # a ring around the node a view is centred on
TEXT, FADED_TEXT = "#2d3748", "#a0aec0"
LABEL_SIZE = 12  # node labels, px
TINY = 1e-12
#: A figure's legend: one line above the plot, at its left, in a top margin (TOP_MARGIN px) tall enough that the
#: chart's toolbar (plotly's modebar, at the figure's top right, shown on hover) sits above the legend, not over it.
LEGEND = dict(orientation="h", yanchor="bottom", y=1.0, x=0, itemclick=False, itemdoubleclick=False)
TOP_MARGIN = 64


# --- Decision check --------------------------------------------------------------------------------------------

def ranking_bars(ranking: Ranking, names: dict, top: int, pick=None, *, number) -> go.Figure:
    """Gain over no decision of the ``top`` best candidates, best first, plus the pick when it ranks lower; the
    best decisions (no regret) and the pick coloured; scores and gains written by ``number`` (the pages' formatter,
    core.analysis.format.number, which this layer may not import)."""
    shown = list(ranking.entries[:max(1, top)])
    rank_of_pick = ranking.position_of(pick) if pick is not None else None
    if rank_of_pick and rank_of_pick > len(shown):
        shown.append(ranking.entries[rank_of_pick - 1])
    labels = [f"{ranking.rank_of(e.candidate)}{' (tied)' if ranking.tied(e.candidate) > 1 else ''}. "
              f"{names.get(e.candidate, e.candidate)}" for e in shown]
    gains = [ranking.gain(e.candidate) for e in shown]

    def colour(candidate):
        return PICK if candidate == pick else BEST if ranking.regret(candidate) <= TINY else PRESENT

    fig = go.Figure(go.Bar(
        x=gains, y=labels, orientation="h", marker_color=[colour(e.candidate) for e in shown], showlegend=False,
        text=[number(g, sign=True) if abs(g) > TINY else "no gain" for g in gains], textposition="outside",
        cliponaxis=False,
        hovertext=[f"<b>{label}</b><br>score {number(e.score)}<br>gain {number(g, sign=True)}"
                   for label, e, g in zip(labels, shown, gains)],
        hoverinfo="text"))
    fig.add_vline(x=0, line_width=1, line_color="#4a5568")
    low, high = min(gains + [0.0]), max(gains + [0.0])
    room = 0.22 * ((high - low) or 1.0)  # for the value labels outside the bars
    span = [low - room if low < 0 else 0.0, high + room if high > 0 or low == high else 0.0]
    for label, color in (("best decision", BEST), *((("pick", PICK),) if rank_of_pick else ()), ("other", PRESENT)):
        fig.add_trace(go.Bar(x=[None], y=[None], marker_color=color, name=label, hoverinfo="skip"))
    fig.update_layout(height=90 + 24 * len(shown), margin=dict(l=10, r=40, t=TOP_MARGIN, b=30), plot_bgcolor="white",
                      paper_bgcolor="white", barmode="overlay", bargap=0.25,
                      xaxis=dict(title="gain over no decision", zeroline=False, gridcolor="#edf2f7",
                                 range=span),
                      yaxis=dict(autorange="reversed", automargin=True),
                      legend=LEGEND)
    return fig
