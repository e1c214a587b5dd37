"""Learned plans: the versions of a scenario's AutoPlan plan, each with its steps, what changed from another
version, the reflections that produced it, and the accuracy of its training iterations."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)


import pandas as pd
import streamlit as st

from core.scenarios import catalog
from core import scenarios
from core.model.technique import DEFAULT, TECHNIQUES
from core.store.plans import training_setting
from core.store.plans import LearnedPlan, PlanStore, diff_steps
from core.scenarios.dqa.source import DQAError
from core.model.numbers import spans
from core.analysis.format import GAP, percent, timestamp
from ui.common import DEFAULT_QUESTION, dqa_root, kept
from ui.untrusted import md, md_code


def batch_accuracy(iteration: dict) -> str:
    """``3 of 4 (75%)``: an iteration's correct answers out of its batch, with its n."""
    correct, total = iteration["correct"], iteration["total"]
    return f"{correct} of {total} ({percent(100 * correct / total, decimals=0)})"


def run_question(plan: LearnedPlan) -> tuple[tuple | None, str]:
    """The question ``plan`` opens the Run page on, and why when it is not the session's: the session's question
    when it is of the plan's scenario and not one it was trained on, else the first of its scenario it was not
    trained on (None: every one was)."""
    ref = st.session_state.get("question_ref")
    if ref and ref[1] == plan.scenario and not (ref[0] == plan.source and ref[2] in plan.train):
        return ref, ""
    try:
        numbers = [q.number for q in catalog.questions(plan.source, plan.scenario, dqa_root())]
    except DQAError:
        numbers = []
    number = next((n for n in numbers if n not in plan.train), None)
    target = None if number is None else (plan.source, plan.scenario, number)
    if not ref:
        return target, ""
    mine = "/".join(map(str, ref))
    why = (f"your question {mine} is one v{plan.version} was trained on" if ref[1] == plan.scenario else
           f"your question {mine} is of another scenario")
    return target, why


def use_in_run(plan: LearnedPlan) -> None:
    """Open the Run page set to start from ``plan``: a technique that takes a learned plan, on ``run_question``
    (saying there why it is not the session's question, when it is not)."""
    target, why = run_question(plan)
    if target is None:
        st.session_state["plans_use_error"] = (f"Every {plan.source} {plan.scenario} question here is a training "
                                               f"question of v{plan.version}: pick another on Scenarios.")
        return
    chosen = TECHNIQUES.get(st.session_state.get(kept("run_technique")))
    if chosen is None or not chosen.trains_plans:
        st.session_state["run_technique"] = DEFAULT
    st.session_state[kept("run_plan_version")] = plan.version
    if why:
        st.session_state["run_notice"] = (f"Learned plan v{plan.version} opens on question {'/'.join(map(str, target))}: "
                                          f"{why}.")
    st.session_state["question_ref"] = target
    st.switch_page("pages/run.py")


DIFF = {"same": "{}", "removed": ":red[~~{}~~]", "added": ":green[{}]"}
VERDICT = {True: ":green[correct]", False: ":red[wrong]", None: "unlabelled"}

st.title("Learned plans")
current = (st.session_state.get("question_ref") or DEFAULT_QUESTION)[1]  # the scenario of the session's question
names = scenarios.names()
scenario = st.segmented_control("Scenario", names, format_func=lambda n: md(scenarios.get(n).title), required=True,
                                default=current if current in names else names[0], key=kept("plans_scenario"))
store = PlanStore()
try:
    plans = {p.version: p for p in store.all(scenario)}
except ValueError as e:
    st.error(md(e))
    st.stop()
if not plans:
    st.info(f"No learned plan for {scenario} yet. Train one with AutoPlan:\n\n`python -m core autoplan train "
            f"--scenario {scenario} --db sqlite --llm MODEL --train 1-20`", icon=":material/route:")
    st.stop()

st.dataframe(pd.DataFrame([{
    "version": f"v{p.version}", "created": timestamp(p.created),
    "training": p.training, "iteration": p.iteration, "revises": f"v{p.parent}" if p.parent else "empty plan",
    "steps": len(p.steps), "batch accuracy": batch_accuracy(p.history[-1]) if p.history else GAP,
    "trained on": f"{p.source} {spans(p.train)}", "agent": p.trained_with.get("technique"),
    "model": p.trained_with.get("llm")} for p in reversed(plans.values())]), hide_index=True)
st.caption("Batch accuracy: the share of the iteration's training questions answered correctly with the plan the "
           "version revises. A learned plan never runs on its training questions.")

version = st.selectbox("Version", list(reversed(plans)), format_func=lambda v: f"v{v}",
                       key=kept(f"plans_version-{scenario}"))
plan = plans[version]
steps_col, diff_col = st.columns(2)
with steps_col:
    st.subheader(f"v{plan.version}")
    st.markdown("\n".join(f"{i}. {md(step)}" for i, step in enumerate(plan.steps, 1)))
    if st.button(f"Use v{plan.version} in Run", icon=":material/play_circle:", type="primary",
                 help="Opens the Run page set to start PlanRAG (or the technique chosen there, when it takes a learned "
                      f"plan) from v{plan.version}, on a question it was not trained on."):
        use_in_run(plan)
    target, why = run_question(plan)
    if target:
        st.caption(f"On question {md('/'.join(map(str, target)))}" + (f" ({md(why)})." if why else " (yours)."))
    if error := st.session_state.pop("plans_use_error", None):
        st.warning(md(error), icon=":material/block:")
    st.caption(f"From the command line: `python -m core run --technique autoplan` (the latest) or "
               f"`--plan-version {plan.version}`.")
    st.caption(f"Trained with {md(training_setting(plan.trained_with))}.")
with diff_col:
    others = [v for v in plans if v != version]
    if others:
        default = others.index(plan.parent) if plan.parent in others else len(others) - 1
        against = st.selectbox("Changes from", others, index=default, format_func=lambda v: f"v{v}",
                               key=f"plans_against-{scenario}-{version}")
        st.markdown("\n".join(f"- {DIFF[mark].format(md(step))}" for mark, step in diff_steps(plans[against].steps,
                                                                                       plan.steps)))
    else:
        st.caption("The only version: nothing to compare with.")

st.subheader("Accuracy by iteration")
history = pd.DataFrame(plan.history)
st.line_chart(history.set_index("iteration")[["accuracy"]], y_label="batch accuracy")
history["plan"] = [f"v{h['plan_version']}" if h.get("plan_version") else "empty plan" for h in plan.history]
st.dataframe(history[["iteration", "plan", "questions", "correct", "total", "accuracy", "mean_regret", "llm_calls",
                      "tokens"]], hide_index=True)

st.subheader(f"Reflections that produced v{plan.version}")
for r in plan.reflections:
    with st.expander(f"Question {md(r['question'])} · {VERDICT[r['correct']]} · decision {md(r['decision'])}"):
        st.markdown(f"**Summary**\n\n{md(r['summary'] or '-')}\n\n**Flaws**\n\n{md(r['flaws'] or '-')}\n\n"
                    f"**Revision**\n\n{md(r['revision'] or '-')}")
        st.caption(f"Run {md_code(r['run_id'])} (open it on **History**) · best decision {md(r['label'])}")
with st.expander("The plan update's reply"):
    st.text(plan.update_reply)
