"""The branch tree of a run drawn (History): the run's whole family, from the run it all branched from down to
every branch, each node a run (its decision and whether it is right, its status) and each edge the step it
branched at; the run shown is highlighted."""
from __future__ import annotations

import streamlit as st

from core.store.runs import RunRecord, RunStore


def family(store: RunStore, run_id: str) -> list[RunRecord]:
    """The run's root (following parents) and every run branched from it, at any depth."""
    record = store.get(run_id, events=False)
    seen = {record.id}
    while record.parent_id and record.parent_id not in seen:
        try:
            record = store.get(record.parent_id, events=False)
        except KeyError:  # a parent deleted: the tree starts here
            break
        seen.add(record.id)
    runs, todo = [], [record]
    while todo:
        r = todo.pop(0)
        runs.append(r)
        todo += store.branches(r.id)
    return runs


def _quote(text: str) -> str:
    """A DOT string: quotes and backslashes escaped, a line break as DOT's centred one."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(runs: list[RunRecord], shown: str) -> str:
    """The tree in Graphviz's DOT language (left to right)."""
    lines = ["digraph branches {", "rankdir=LR;", 'node [shape=box, style="rounded,filled", fontname="sans-serif", '
             'fontsize=11, fillcolor="#edf2f7", color="#a0aec0"];', 'edge [fontname="sans-serif", fontsize=10];']
    ids = {r.id for r in runs}
    for r in runs:
        o = r.outcome
        verdict = {True: "right", False: "wrong"}.get(o.correct if o else None, "")
        decision = f"{o.decision} · {verdict}" if o and o.decision is not None else r.status
        attrs = ', fillcolor="#fefcbf", color="#d69e2e", penwidth=2' if r.id == shown else ""
        label = _quote(r.id[:12] + "\n" + decision)
        lines.append(f"{_quote(r.id)} [label={label}{attrs}];")
        if r.parent_id in ids:
            lines.append(f"{_quote(r.parent_id)} -> {_quote(r.id)} [label={_quote(f'step {r.branch_step}')}];")
    lines.append("}")
    return "\n".join(lines)


def show_branch_tree(store: RunStore, run_id: str) -> None:
    """The drawn tree, when the run has a parent or branches."""
    runs = family(store, run_id)
    if len(runs) > 1:
        st.markdown(f"**Branch tree** · {len(runs)} runs")
        st.graphviz_chart(dot(runs, run_id))
