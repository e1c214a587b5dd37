"""Decision check: the simulator's ranking of every candidate of the current question, the best decision, the
agent's (or a chosen) pick with its rank and regret, and what any decision changes, drawn on the network."""
import streamlit as st

from core import decision, figures
from core.grading import place
from core.scenario import default_mode, ranking
from pages.common import current_question
from sims.ranking import MODES, InputError

st.title("Decision check")
question, database = current_question()
st.markdown(f"**{question.id}**: {question.target}")

mode = st.segmented_control("Simulation mode", MODES, default=default_mode(question), required=True,
                            help="The question's source is labelled by the default mode.")
st.caption(f"**{mode}** {decision.MODE_NOTES[mode]}.")
try:
    ranked = ranking(question, database, mode)
except InputError as e:
    st.info(f"The simulator cannot rank this question: {e}", icon=":material/block:")
    st.stop()
if not ranked.entries:
    st.info("This question has no candidate decisions.")
    st.stop()
names = decision.candidate_names(question, database)

pick, run_id = None, st.session_state.get("run_id")
if run_id:
    from_run = decision.run_pick(run_id, question)
    pick = from_run.decision
    st.caption(f"The agent's pick comes from run `{run_id}`." if pick is not None
               else f"No agent pick to mark: {from_run.note}.")
if pick is None:
    pick = st.selectbox("Pick a candidate", list(names), index=None, format_func=names.get,
                        placeholder="Choose a decision to check against the best")

best = ranked.best
unit = decision.score_name(question)
placed = place(pick, ranked)
cells = st.columns(4)
cells[0].metric("Best decision", str(best.candidate), f"{ranked.gain(best.candidate):+.4g} over no decision",
                delta_color="off", delta_arrow="off", help=names[best.candidate])
cells[1].metric("Benchmark label", str(question.answer) if question.answer is not None else "none",
                help="The question's labelled answer; the simulator's label in this mode is "
                     f"{ranked.label() if ranked.label() is not None else 'none'}.")
if placed:
    cells[2].metric("Pick", str(pick), f"rank {placed.rank} of {placed.of}", delta_color="off", delta_arrow="off",
                    help=names[pick])
    cells[3].metric("Regret", f"{placed.regret:.4g}", f"{ranked.relative_regret(pick):.2f}% worse than the best",
                    delta_color="off", delta_arrow="off", help=f"How much worse than the best, in {unit}.")
st.caption(f"Score: {unit}. Best: {names[best.candidate]}, {best.score:.6g} (no decision: {ranked.baseline:.6g})."
           + (f" Pick: {names[pick]}, {ranked.score_of(pick):.6g}." if placed else ""))

st.subheader("Ranking")
top = st.slider("Best candidates shown", 1, max(2, len(ranked.entries)), min(15, len(ranked.entries)))
st.plotly_chart(figures.ranking_bars(ranked, names, top, pick), config={"displaylogo": False})
with st.expander(f"All {len(ranked.entries)} candidates", expanded=True):
    st.dataframe(decision.ranking_table(ranked, names), hide_index=True, height=320,
                 column_config={c: st.column_config.NumberColumn(format="%.6g") for c in ("score", "gain", "regret")}
                 | {"regret %": st.column_config.NumberColumn(format="%.2f")})

st.subheader("What if")
options = list(names)
start = pick if pick in names else best.candidate
chosen = st.selectbox("Decision to simulate", options, index=options.index(start), format_func=names.get)
effect = decision.what_if(question, database, chosen, mode)
before, after = st.columns(2)
before.metric(f"{effect.target}, no decision", f"{effect.before:.4g}")
after.metric(f"{effect.target}, with {names[chosen]}", f"{effect.after:.4g}", f"{effect.after - effect.before:+.4g}",
             delta_color="normal" if question.scenario == "locating" else "inverse")
if effect.note:
    st.caption(effect.note)
if question.scenario == "locating":
    figure = figures.trade_network(question, database, pick=chosen, best=best.candidate,
                                   pick_label="simulated decision", flow_change=effect.deltas)
    st.caption("Zoomed to the flows the decision changes; the chart toolbar's autoscale shows the whole network.")
else:
    figure = figures.market(question, database, hops=2, max_per_column=20, pick=chosen, best=best.candidate,
                            pick_label="simulated decision", price_change=effect.deltas)
st.plotly_chart(figure, config={"displaylogo": False, "scrollZoom": True})
biggest = effect.biggest(10)
if biggest.empty:
    st.info(f"{names[chosen]} changes nothing in the simulation.")
else:
    st.caption(f"The biggest {effect.measure} changes against no decision")
    st.dataframe(biggest, hide_index=True, column_config={"change %": st.column_config.NumberColumn(format="%.2f")})
