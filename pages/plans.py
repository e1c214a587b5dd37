"""Learned plans: the versions of a scenario's AutoPlan plan, each with its steps, what changed from another
version, the reflections that produced it, and the accuracy of its training iterations."""
from datetime import datetime

import pandas as pd
import streamlit as st

from core.autoplan.command import training_setting
from core.autoplan.store import PlanStore, diff_steps
from core.numbers import spans
from core import scenarios
from pages import common  # noqa: F401 - switches a deep link to app.py's navigation

DIFF = {"same": "{}", "removed": ":red[~~{}~~]", "added": ":green[{}]"}
VERDICT = {True: ":green[correct]", False: ":red[wrong]", None: "unlabelled"}

st.title("Learned plans")
scenario = st.segmented_control("Scenario", scenarios.names(), format_func=lambda n: scenarios.get(n).title,
                                default="locating",
                                key="plans_scenario")
if not scenario:
    st.stop()
store = PlanStore()
try:
    plans = {p.version: p for p in store.all(scenario)}
except ValueError as e:
    st.error(str(e))
    st.stop()
if not plans:
    st.info(f"No learned plan for {scenario} yet. Train one with AutoPlan:\n\n`python -m core autoplan train "
            f"--scenario {scenario} --db sqlite --llm MODEL --train 1-20`", icon=":material/route:")
    st.stop()

st.dataframe(pd.DataFrame([{
    "version": f"v{p.version}", "created": datetime.fromtimestamp(p.created).strftime("%Y-%m-%d %H:%M"),
    "training": p.training, "iteration": p.iteration, "revises": f"v{p.parent}" if p.parent else "empty plan",
    "steps": len(p.steps), "batch accuracy": p.history[-1]["accuracy"] if p.history else None,
    "trained on": f"{p.source} {spans(p.train)}", "agent": p.trained_with.get("technique"),
    "model": p.trained_with.get("llm")} for p in reversed(plans.values())]), hide_index=True)
st.caption("Batch accuracy: the share of the iteration's training questions answered correctly with the plan the "
           "version revises. A learned plan never runs on its training questions.")

version = st.selectbox("Version", list(reversed(plans)), format_func=lambda v: f"v{v}", key="plans_version")
plan = plans[version]
steps_col, diff_col = st.columns(2)
with steps_col:
    st.subheader(f"v{plan.version}")
    st.markdown("\n".join(f"{i}. {step}" for i, step in enumerate(plan.steps, 1)))
    st.caption(f"Use it: `python -m core run --technique autoplan` (the latest) or `--plan-version {plan.version}`.")
    st.caption(f"Trained with {training_setting(plan.trained_with)}.")
with diff_col:
    others = [v for v in plans if v != version]
    if others:
        default = others.index(plan.parent) if plan.parent in others else len(others) - 1
        against = st.selectbox("Changes from", others, index=default, format_func=lambda v: f"v{v}",
                               key="plans_against")
        st.markdown("\n".join(f"- {DIFF[mark].format(step)}" for mark, step in diff_steps(plans[against].steps,
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
    with st.expander(f"Question {r['question']} · {VERDICT[r['correct']]} · decision {r['decision']}"):
        st.markdown(f"**Summary**\n\n{r['summary'] or '-'}\n\n**Flaws**\n\n{r['flaws'] or '-'}\n\n"
                    f"**Revision**\n\n{r['revision'] or '-'}")
        st.caption(f"Run `{r['run_id']}` (open it on **History**) · best decision {r['label']}")
with st.expander("The plan update's reply"):
    st.text(plan.update_reply)
