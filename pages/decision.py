"""Decision check: the simulator's ranking of every candidate of the current question, the best decision, the
agent's (or a chosen) pick with its rank and regret, and what any decision changes, drawn on the network; nothing of
it while the session hides answers."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)

import streamlit as st

from core.analysis import decision, evidence
from core.scenarios import drawing
from core import scenarios
from core.analysis.grading import place
from core.scenarios import default_mode, ranking
from ui.common import answers_hidden, current_question, decision_metric, linked_run, show_run_in_url
from core.analysis.format import number, percent
from ui.untrusted import md, md_code
from sims.ranking import InputError

st.title("Decision check")
question, database = current_question()
kind = scenarios.get(question.scenario)
st.markdown(f"**{md(question.id)}**: {md(scenarios.target(question))}")
if answers_hidden():
    st.info("Answers are hidden in this session (demos, blind review): the check shows the best decision and how "
            "every candidate ranks. Turn **Hide answers** off in the sidebar to see it.", icon=":material/visibility_off:")
    st.stop()
if not kind.can_check:
    st.info(f"{md(kind.title)} declares no simulator, so its decisions cannot be checked; runs still record their "
            "answers (Run, History).", icon=":material/block:")
    st.stop()

if len(kind.modes) > 1:
    mode = st.segmented_control("Simulation mode", kind.modes, default=default_mode(question), required=True,
                                help="The question's source is labelled by the default mode.")
else:
    mode = kind.modes[0]
if mode in kind.mode_notes:
    st.caption(f"**{mode}** {kind.mode_notes[mode]}.")
try:
    ranked = ranking(question, database, mode)
except InputError as e:
    st.info(f"The simulator cannot rank this question: {md(e)}", icon=":material/block:")
    st.stop()
if not ranked.entries:
    st.info("This question has no candidate decisions.")
    st.stop()
names = decision.candidate_names(question, database)

pick, run_id = None, linked_run()
show_run_in_url(run_id)
if run_id:
    from_run = decision.run_pick(run_id, question)
    pick = from_run.decision
    st.caption((f"The agent's pick comes from run {md_code(run_id)}" + (
        f", as read by {md(from_run.overridden_by)} (grade overridden)."
        if from_run.overridden_by else ".")) if pick is not None else f"No agent pick to mark: {md(from_run.note)}.")
if pick is None:
    pick = st.selectbox("Pick a candidate", list(names), index=None, format_func=names.get,
                        placeholder="Choose a decision to check against the best")

best = ranked.best
unit = decision.score_name(question)
placed = place(pick, ranked)
cells = st.columns([3, 2, 3, 2])  # room for a decision's type beside its id
decision_metric(cells[0], "Best decision", kind, question, best.candidate, database,
                delta=f"{number(ranked.gain(best.candidate), sign=True)} over no decision",
                delta_color="off", delta_arrow="off", help=md(names[best.candidate]))
label_help = ("The question's labelled answer; the simulator's label in this mode is "
              f"{md(ranked.label()) if ranked.label() is not None else 'none'}.")
if question.answer is None:
    cells[1].metric("Benchmark label", "none", help=label_help)
else:
    decision_metric(cells[1], "Benchmark label", kind, question, question.answer, database, help=label_help)
if placed:
    decision_metric(cells[2], "Pick", kind, question, pick, database, delta=f"rank {placed.text()}",
                    delta_color="off", delta_arrow="off", help=md(names[pick]))
    cells[3].metric("Regret", number(placed.regret),
                    f"{percent(ranked.relative_regret(pick), decimals=2)} worse than the best",
                    delta_color="off", delta_arrow="off", help=f"How much worse than the best, in {unit}; 0 for a pick "
                                                               "tied with the best.")
if ranked.all_tied:
    st.warning("Every candidate ties in the simulator: no decision is better than another here.",
               icon=":material/balance:")
elif ranked.tied(best.candidate) > 1:
    st.caption(f"{ranked.tied(best.candidate)} candidates tie for the best score: any of them is a best decision.")
st.caption(f"Score: {md(unit)}. Best: {md(names[best.candidate])}, {number(best.score)} (no decision: "
           f"{number(ranked.baseline)})." + (f" Pick: {md(names[pick])}, {number(ranked.score_of(pick))}."
                                              if placed else ""))

st.subheader("Evidence")
deciding = evidence.deciding_values(question, database, mode)
if not deciding:
    st.caption("No database value moves the best decision's score in this mode.")
else:
    record = decision.run_record(run_id) if run_id and from_run.decision is not None else None
    if record is not None:
        covered = evidence.coverage(deciding, record.events)
        text = covered.text().capitalize()
        if covered.complete:
            st.success(f"{text}.", icon=":material/fact_check:")
        else:
            st.warning(f"{text}; missing: {', '.join(md(m) for m in covered.missing)}.", icon=":material/search_off:")
    st.caption(f"The {len(deciding)} values that decide this question: those whose change (+10%) moves the "
               "simulator's score of the best decision or its nearest rival (docs/evidence.md).")
    st.dataframe(evidence.values_table(deciding, covered.seen if record is not None else None), hide_index=True)

st.subheader("Ranking")
top = st.slider("Best candidates shown", 1, max(2, len(ranked.entries)), min(15, len(ranked.entries)))
st.plotly_chart(drawing.ranking_bars(ranked, names, top, pick, number=number), config={"displaylogo": False})
with st.expander(f"All {len(ranked.entries)} candidates", expanded=True):
    st.dataframe(decision.ranking_table(ranked, names), hide_index=True, height=320,
                 column_config={c: st.column_config.NumberColumn(format="%.6g") for c in ("score", "gain", "regret")}
                 | {"regret %": st.column_config.NumberColumn(format="%.2f")})

st.subheader("What if")
options = list(names)
start = pick if pick in names else best.candidate
chosen = st.selectbox("Decision to simulate", options, index=options.index(start), format_func=names.get)
effect = decision.what_if(question, database, chosen, mode)
if effect is None:
    st.info(f"{md(kind.title)} declares no what-if: the simulator scores decisions but does not say what they change.")
    st.stop()
# One baseline on the page: where the what-if measures the ranking's score but its own run without a decision
# differs from the ranking's baseline (DQA's code), the ranking's is the one compared with; the simulation's own
# is shown beside it, labelled, never as a second "no decision".
two = effect.target == unit and abs(effect.before - ranked.baseline) > 1e-9 * max(1.0, abs(ranked.baseline))
base = ranked.baseline if two else effect.before
cells = st.columns(3 if two else 2)
cells[0].metric(f"{md(effect.target)}, no decision", number(base),
                help="The ranking's baseline (as Score above)" if two else None)
change = effect.after - base
cells[1].metric(f"{md(effect.target)}, with {md(names[chosen])}", number(effect.after),
                number(change, sign=True) if change else "no change",  # no green arrow for nothing changed
                delta_color=("normal" if ranked.higher_is_better else "inverse") if change else "off",
                delta_arrow="auto" if change else "off")
if two:
    cells[2].metric("this simulation run without a decision", number(effect.before),
                    number(effect.after - effect.before, sign=True), delta_color="off", delta_arrow="off",
                    help="Not the baseline compared with: " + md(effect.note or "the simulation differs from it"))
    st.caption(f"Changes are against no decision as the ranking takes it ({number(base)}). {md(effect.note or '')} "
               f"The map and the table below show what the simulation changes against its own run "
               f"({number(effect.before)}).")
elif effect.note:
    st.caption(md(effect.note))
figure = kind.network(question, database, pick=chosen, best=best.candidate, pick_label="simulated decision",
                      change=effect.deltas)
if figure is not None:
    meta = figure.layout.meta if isinstance(figure.layout.meta, dict) else {}
    caption = " ".join(c for c in (meta.get("caption"), kind.change_caption) if c)
    if caption:
        st.caption(md(caption))
    st.plotly_chart(figure, config={"displaylogo": False, "scrollZoom": False})
biggest = effect.biggest(10)
if biggest.empty:
    st.info(f"{md(names[chosen])} changes nothing in the simulation.")
else:
    st.caption(f"The biggest {md(effect.measure)} changes against no decision")
    st.dataframe(biggest, hide_index=True, column_config={"change %": st.column_config.NumberColumn(format="%.2f")})
