"""Where a run's time went (core.analysis.timeline), shown under a run: the seconds in LLM calls, queries and waits
for review, the spans on the run's clock, and the spans as a table to sort."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.analysis.format import GAP, duration, number
from core.analysis.timeline import KINDS, LLM, QUERY, REVIEW, Timeline, timeline
from core.store.runs import RunRecord
from ui.kept import kept

COLOURS = {LLM: "#4C78A8", QUERY: "#F58518", REVIEW: "#9D755D"}


def figure(line: Timeline):
    """The spans as bars on the run's clock, one row per kind."""
    import plotly.graph_objects as go  # heavy: plotly, for this figure only

    fig = go.Figure()
    for kind in KINDS:
        spans = [s for s in line.spans if s.kind == kind]
        if not spans:
            continue
        fig.add_bar(y=[kind] * len(spans), x=[max(s.seconds, line.total_s / 400) for s in spans],
                    base=[s.start for s in spans], orientation="h", marker_color=COLOURS[kind], name=kind,
                    hovertext=[f"{s.label}: {number(s.seconds, decimals=2)} s from {number(s.start, decimals=2)} s"
                               + (f", {number(s.tokens)} tokens" if s.tokens else "") for s in spans],
                    hoverinfo="text", showlegend=False)
    fig.update_layout(height=70 + 40 * len({s.kind for s in line.spans}), margin=dict(l=10, r=20, t=10, b=40),
                      plot_bgcolor="white", barmode="overlay", bargap=0.3,
                      xaxis=dict(title="seconds since the run began", range=[0, max(line.total_s, 0.001)],
                                 gridcolor="#e2e8f0", fixedrange=True),
                      yaxis=dict(categoryorder="array", categoryarray=list(reversed(KINDS)), fixedrange=True))
    return fig


#: The timeline expander's key: its open state (Streamlit's lazy expander), kept for the session (ui.kept).
OPEN = "run_timeline"


def show_timeline(record: RunRecord) -> None:
    """The run's timeline in an expander, drawn only while it is open (nothing for a run with no events). Closed, it
    sends no chart: an ended run opened by its link in a new tab loaded Plotly's 4.7 MB of JavaScript for this
    hidden chart (3.8 s to the outcome's "Check the decision" instead of 2.6 s, and 1.8 s more CPU, on 2 cores)."""
    line = timeline(record.events)
    if not line.spans:
        return
    box = st.expander(":material/timeline: Where the time went", key=kept(OPEN), on_change="rerun")
    if not box.open:
        return
    with box:
        cells = st.columns(4)
        cells[0].metric("In LLM calls", duration(line.seconds(LLM)),
                        f"{line.count(LLM)} calls, {number(line.tokens)} tokens", delta_color="off", delta_arrow="off")
        cells[1].metric("In queries", duration(line.seconds(QUERY)), f"{line.count(QUERY)} queries",
                        delta_color="off", delta_arrow="off")
        cells[2].metric("Waiting for review", duration(line.seconds(REVIEW)), f"{line.count(REVIEW)} reviews",
                        delta_color="off", delta_arrow="off")
        cells[3].metric("Other", duration(line.other_s), "the agent's own work, restarts", delta_color="off",
                        delta_arrow="off", help="The run's time (first event to last) outside these spans.")
        st.plotly_chart(figure(line), config={"displaylogo": False, "scrollZoom": False, "displayModeBar": False})
        st.dataframe(pd.DataFrame([{"from (s)": s.start, "seconds": s.seconds, "what": s.kind, "detail": s.label,
                                    "tokens": GAP if s.tokens is None else number(s.tokens)} for s in line.spans]),
                     hide_index=True,
                     height=min(320, 38 + 35 * len(line.spans)),
                     column_config={"from (s)": st.column_config.NumberColumn(format="%.2f"),
                                    "seconds": st.column_config.NumberColumn(format="%.2f")})
