"""The Benchmark page's "Compare sets" tab: a baseline setting and a candidate (another technique, model, prompt
setting or plan version, from any stored result set), their per-question regressions and improvements with the
paired statistics (core.benchmark.compare), filterable by change and scenario; a question drilled down into: how
each setting decided it, and both settings' runs of it opened side by side on the Compare page."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from core.analysis.format import number
from core.benchmark import compare
from core.benchmark.results import read_all
from core.analysis.format import GAP
from ui.common import answers_hidden
from ui.kept import kept
from ui.untrusted import md


def _side(column, title: str, names: list[str], default: int) -> tuple[list[dict], tuple | None]:
    """One side's result set and setting, picked in ``column`` (the ``default``-th setting of the first set)."""
    directory = column.selectbox(f"{title}: result set", names,
                                 format_func=lambda d: Path(d).name, key=kept(f"set_compare_{title}_dir"))
    results = read_all(directory)
    options = compare.settings(results)
    if not options:
        column.info("No results in this set yet.")
        return results, None
    setting = column.selectbox(f"{title}: setting", options, format_func=compare.setting_label,
                               index=min(default, len(options) - 1),
                               key=kept(f"set_compare_{title}_setting_{Path(directory).name}"))
    return results, setting


@st.fragment  # a pick here reruns this comparison alone, not the Benchmark page's results and forms
def show_set_comparison(directories: list[Path]) -> None:
    names = [str(d) for d in directories]
    left, right = st.columns(2)
    base, base_setting = _side(left, "Baseline", names, 0)
    cand, cand_setting = _side(right, "Candidate", names, 1)
    if base_setting is None or cand_setting is None:
        return
    result = compare.compare(base, base_setting, cand, cand_setting)
    cells = st.columns(4)
    cells[0].metric("Paired questions", len(result.changes))
    cells[1].metric("Improved", result.count("improved"))
    cells[2].metric("Regressed", result.count("regressed"))
    cells[3].metric("Accuracy change", f"{number(result.diff, sign=True, decimals=1)} pts", help=f"95% interval ["
                    f"{number(result.low, sign=True, decimals=1)}, {number(result.high, sign=True, decimals=1)}]; "
                    f"{result.method}, p={number(result.p_value, digits=3)}")
    (st.success if result.significant else st.info)(result.text(), icon=":material/compare_arrows:")
    if result.only_baseline or result.only_candidate:
        st.caption(f"Left out: {result.only_baseline} questions only the baseline ran, {result.only_candidate} only "
                   "the candidate ran.")
    if not result.changes:
        return
    changes = result.changes
    shown, where = st.columns(2)
    keep = shown.multiselect("Show", list(compare.CHANGES), default=["regressed", "improved"],
                             key=kept("set_compare_changes"))
    places = sorted({c.scenario for c in changes})
    within = where.multiselect("Scenarios", places, default=places, key=kept("set_compare_scenarios"))
    changes = [c for c in changes if c.change in keep and c.scenario in within]
    sides = {c: (compare.samples_of(base, base_setting, c), compare.samples_of(cand, cand_setting, c))
             for c in changes}
    table = pd.DataFrame([{"change": c.change, "scenario": c.scenario, "question": c.question,
                           "source": c.source, "baseline right": c.baseline, "candidate right": c.candidate,
                           "side by side": side_by_side(c, *sides[c])} for c in changes],
                         columns=["change", "scenario", "question", "source", "baseline right", "candidate right",
                                  "side by side"])
    picked = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row",
                          key=f"set_compare_table_{len(changes)}", column_config={
        "baseline right": st.column_config.ProgressColumn("baseline right", format="percent", min_value=0,
                                                          max_value=1, help="share of its samples graded right"),
        "candidate right": st.column_config.ProgressColumn("candidate right", format="percent", min_value=0,
                                                           max_value=1),
        "side by side": st.column_config.LinkColumn("side by side", display_text="open both",
                                                    help="Both settings' runs of the question on the Compare page "
                                                         "(in a new tab): decisions, traces, step by step")})
    st.caption(f"{len(table)} of {len(result.changes)} questions shown. Tick a row's box to see how each setting "
               "decided it.")
    rows = picked.selection.rows
    if rows and rows[0] < len(changes):
        drill_down(changes[rows[0]], *sides[changes[rows[0]]], base_setting, cand_setting)


def _runs(samples: list[dict]) -> list[str]:
    return [r["run_id"] for r in samples if isinstance(r.get("run_id"), str)]


def side_by_side(change: compare.Change, base: list[dict], cand: list[dict]) -> str | None:
    """The Compare page's address with both settings' runs of the question (None when neither has a run)."""
    runs = _runs(base) + _runs(cand)
    if not runs:
        return None
    return "compare?" + urlencode({"q": f"{change.source}/{change.scenario}/{change.question}",
                                   "runs": ",".join(runs)})


def drill_down(change: compare.Change, base: list[dict], cand: list[dict], base_setting: tuple,
               cand_setting: tuple) -> None:
    """One question of the comparison: how each setting's samples decided it, and both opened side by side."""
    st.markdown(f"**{md(change.source)}/{md(change.scenario)}/{change.question}: {change.change}**")
    for column, title, setting, samples in zip(st.columns(2), ("Baseline", "Candidate"), (base_setting, cand_setting),
                                               (base, cand)):
        with column:
            st.caption(f"{title}: {md(compare.setting_label(setting))}")
            st.dataframe(pd.DataFrame([{
                "decision": GAP if r.get("decision") is None else str(r["decision"]),
                "verdict": "error" if r.get("status") == "error" else {True: "right", False: "wrong"}.get(
                    r.get("correct"), GAP),
                "label": GAP if r.get("label") is None else str(r["label"]),
                "LLM calls": r.get("llm_calls"), "run": r.get("run_id") or GAP} for r in samples],
                columns=["decision", "verdict", "label", "LLM calls", "run"]), hide_index=True,
                column_order=[c for c in ("decision", "verdict", "label", "LLM calls", "run")
                              if not (answers_hidden() and c in ("verdict", "label"))])
    runs = _runs(base) + _runs(cand)
    if st.button("Open both side by side in Compare", icon=":material/compare_arrows:", disabled=not runs,
                 key="set_compare_open", help="Their decisions, traces and where they first differ"):
        st.switch_page("pages/compare.py", query_params={
            "q": f"{change.source}/{change.scenario}/{change.question}", "runs": ",".join(runs)})
