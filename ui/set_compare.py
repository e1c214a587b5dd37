"""The Benchmark page's "Compare sets" tab: a baseline setting and a candidate (another technique, model, prompt
setting or plan version, from any stored result set), their per-question regressions and improvements with the
paired statistics (core.benchmark.compare), filterable by change and scenario."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from core.benchmark import compare
from core.benchmark.results import read_all
from ui.kept import kept


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
    cells[3].metric("Accuracy change", f"{result.diff:+.1f} pts", help=f"95% interval [{result.low:+.1f}, "
                    f"{result.high:+.1f}]; {result.method}, p={result.p_value:.3g}")
    (st.success if result.significant else st.info)(result.text(), icon=":material/compare_arrows:")
    if result.only_baseline or result.only_candidate:
        st.caption(f"Left out: {result.only_baseline} questions only the baseline ran, {result.only_candidate} only "
                   "the candidate ran.")
    if not result.changes:
        return
    table = pd.DataFrame([{"change": c.change, "scenario": c.scenario, "question": c.question,
                           "source": c.source, "baseline right": c.baseline, "candidate right": c.candidate}
                          for c in result.changes])
    shown, where = st.columns(2)
    keep = shown.multiselect("Show", list(compare.CHANGES), default=["regressed", "improved"],
                             key=kept("set_compare_changes"))
    places = sorted(table["scenario"].unique())
    within = where.multiselect("Scenarios", places, default=places, key=kept("set_compare_scenarios"))
    table = table[table["change"].isin(keep) & table["scenario"].isin(within)]
    st.dataframe(table, hide_index=True, column_config={
        "baseline right": st.column_config.ProgressColumn("baseline right", format="percent", min_value=0,
                                                          max_value=1, help="share of its samples graded right"),
        "candidate right": st.column_config.ProgressColumn("candidate right", format="percent", min_value=0,
                                                           max_value=1)})
    st.caption(f"{len(table)} of {len(result.changes)} questions shown.")
