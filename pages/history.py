"""History: the table of record of every stored run (who started it and when, its question, technique, decision,
verdict, calls, tokens and time, and a link that opens it), branches under the run they branched from; filter and
sort them, export them as JSON, open one in the Run or Decision check view, read who reviewed its pauses and when,
and branch it from a step."""
from ui.router import through_router

through_router()  # first: a fresh server may run this page without app.py (ui/router.py)

import json
import re

import pandas as pd
import streamlit as st

import core.jobs.runs as jobs
from core import scenarios
from core.store.overrides import OverrideStore, with_override
from core.llm.replays import model_label
from core.store.runs import ENDED, as_tree
from core.analysis.format import GAP, timestamp
from core.analysis.summary import gaps_as_text, outcome_row, technique_label
from ui import access
from ui.branch_tree import show_branch_tree
from ui.common import kept, show_run_in_url, shown_columns, url_param
from ui.run_view import branch_form, open_run, run_label, show_outcome, show_run
from ui.untrusted import md, md_code

ANY = "any"
PAGE_ROWS = 100  # the table's rows at a time
CORRECT = {True: "correct", False: "wrong"}
#: The table's columns: a link that opens the run, its question and technique, then what an analyst reads first (is
#: it right, how good is the pick), its cost, and who started it when.
COLUMNS = ["open", "branch", "question", "technique", "correct", "rank", "decision", "status", "grade", "LLM calls",
           "tokens", "time (s)", "started", "started by", "database", "model", "setting", "review", "run"]
TREE = "branch tree, newest first"
#: What the table can be ordered by besides its branch tree: a column, and which comes first.
ORDERS = {"started": "newest first", "time (s)": "longest first", "tokens": "most first", "LLM calls": "most first",
          "rank": "best first", "question": "A to Z", "technique": "A to Z", "started by": "A to Z",
          "decision": "A to Z"}
DESCENDING = {"started", "time (s)", "tokens", "LLM calls"}


def scenario_title(name: str) -> str:
    """A scenario as the Scenarios page names it (``Distribution centre``, not ``Depot``)."""
    try:
        return scenarios.get(name).title
    except KeyError:  # a run of a scenario no longer installed
        return name.title()


def choose(column, label: str, values, format_func=str):
    """A filter on one field: ``any`` or one of the values the stored runs have."""
    options = [ANY, *sorted(set(values) - {None})]
    choice = column.selectbox(label, options, key=kept(f"history_{label}"),
                              format_func=lambda v: ANY if v == ANY else format_func(v))
    return None if choice == ANY else choice


st.title("History")
store = jobs.open_store()
if store.notice:  # emptied, replaced or set aside as damaged: not "no runs yet"
    st.warning(store.notice, icon=":material/warning:")
    if st.button("Go on with this run store", key="history_acknowledge", **access.disabled("store_switch")):
        with access.asking():
            jobs.go_on_with_store(store, who=access.current())
            st.rerun()
runs = store.list(limit=None)
linked = url_param("run")
if linked and linked != st.session_state.get("history_linked"):  # a link (or a new one) opens its run
    st.session_state["history_linked"] = linked
    if any(r.id == linked for r in runs):
        for label in ("Scenario", "Technique", "Database", "Model", "Status", "Correct"):
            st.session_state[kept(f"history_{label}")] = ANY  # the linked run is shown whatever the filters were
        st.session_state[kept("history_run")] = linked
    else:
        st.error(f"Run {md_code(linked)} is not in this app's run store (a link from another installation, or a run "
                 "deleted).", icon=":material/link_off:")
if not runs:
    st.info("No runs yet: start one on the **Run** page.", icon=":material/history:")
    st.stop()

overrides = OverrideStore().all()


def _correct(record) -> bool | None:
    """Whether the run is correct, by the analyst's override when there is one."""
    outcome = with_override(record.outcome, overrides.get(record.id))
    return outcome.correct if outcome else None


starters = store.starters()
columns = st.columns(7)
filters = {
    "scenario": choose(columns[0], "Scenario", (r.settings.scenario for r in runs), scenario_title),
    "technique": choose(columns[1], "Technique", (r.settings.technique for r in runs), technique_label),
    "db": choose(columns[2], "Database", (r.settings.db for r in runs)),
    "llm": choose(columns[3], "Model", (r.settings.llm for r in runs), model_label),
    "status": choose(columns[4], "Status", (r.status for r in runs)),
    "correct": choose(columns[5], "Correct", (_correct(r) for r in runs), CORRECT.get),
    "started by": choose(columns[6], "Started by", (starters.get(r.id) or None for r in runs)),
}
wanted, who = filters.pop("correct"), filters.pop("started by")  # not the store's own filters
tree = as_tree([r for r in store.list(limit=None, **filters)
                if (wanted is None or _correct(r) == wanted) and who in (None, starters.get(r.id))])
shown = [r for r, _ in tree]


def branch_of(record, depth: int) -> str:
    """The run's place in the branch tree: indented under its parent, with the step it branched at."""
    if record.parent_id is None:
        return ""
    return "\u2003" * (depth - 1) + f"\u2514 step {record.branch_step} of {record.parent_id}"


def row_of(record, depth: int) -> dict:
    """The run's row of the table of record."""
    return {"branch": branch_of(record, depth), **outcome_row(record, overrides.get(record.id)),
            "started by": starters.get(record.id) or None, "open": f"run?run={record.id}"}


def sort_key(row: dict, column: str):
    """A row's value when ordered by ``column``: a number as a number (a rank by its number), None for a gap."""
    value = row[column]
    if column == "rank":
        return int(m.group()) if value and (m := re.match(r"\d+", str(value))) else None
    return value


def ordered(column: str) -> list[tuple]:
    """Every run by ``column`` (gaps last), each branch by itself: (record, depth) pairs, as the tree's."""
    keyed = [((r, min(depth, 1)), sort_key(row_of(r, depth), column)) for r, depth in tree]
    present = [(pair, key) for pair, key in keyed if key is not None]
    return ([pair for pair, _ in sorted(present, key=lambda p: p[1], reverse=column in DESCENDING)]
            + [pair for pair, key in keyed if key is None])


ids = [r.id for r in shown]
order_by, pages_at = st.columns([2, 1])
order = order_by.selectbox("Order", [TREE, *ORDERS], key=kept("history_order"),
                           format_func=lambda o: o if o == TREE else f"by {o}, {ORDERS[o]}",
                           help="The branch tree keeps branches under their run; any other order lists every run "
                                "by itself. A column's header sorts the rows shown too.")
listing = tree if order == TREE else ordered(order)
pages = range(0, max(1, len(listing)), PAGE_ROWS)
if len(pages) > 1:  # a thousand runs: the table a page at a time (each drawn row is sent and laid out)
    first = pages_at.selectbox("Rows", pages, key=kept("history_rows"), format_func=lambda i: f"{i + 1}–"
                               f"{min(i + PAGE_ROWS, len(listing))} of {len(listing)}")
else:
    first = 0
on_page = [row_of(r, depth) for r, depth in listing[first:first + PAGE_ROWS]]
table = pd.DataFrame(gaps_as_text([{**row, "started by": row["started by"] or GAP} for row in on_page]),
                     columns=COLUMNS)
picked = st.dataframe(table, hide_index=True, column_order=shown_columns(COLUMNS), on_select="rerun",
                      selection_mode="single-row", key=f"history_table_{order}_{first}",
                      height=min(400, 38 + 35 * max(1, len(table))),
                      column_config={"correct": st.column_config.CheckboxColumn("correct", width="small"),
                                     "grade": st.column_config.TextColumn("grade", width="medium"),
                                     "open": st.column_config.LinkColumn(
                                         "open", display_text="open", width="small",
                                         help="Open the run on the Run page (in a new tab)")})
selected = picked.selection.rows
if selected and selected[0] < len(on_page) and st.session_state.get("_history_clicked") != on_page[selected[0]]["run"]:
    clicked = on_page[selected[0]]["run"]
    st.session_state["_history_clicked"] = clicked  # a click opens its run below (once: the list can follow)
    st.session_state[kept("history_run")] = clicked
st.caption("Tick the box at a row's left to open its run below.")
st.download_button(f"Export {len(ids)} run{'s' * (len(ids) != 1)} as JSON", icon=":material/download:",
                   file_name="planrag-runs.json", mime="application/json", disabled=not ids,
                   data=lambda: json.dumps(store.export(ids), indent=1, default=str))
if not shown:
    st.info("No run matches these filters.")
    st.stop()

st.subheader("Run")
labels = {r.id: "\u2003" * depth + ("\u2514 " if depth else "")
             + f"{run_label(r.id, r.settings, r.created)} · {r.status}"
          for r, depth in tree}
# No run is opened until asked for (a tick, a pick here, a link): drawn under the table on every visit, the newest
# run's view made the table come 0.2-0.3 s later (bench_pages.py, History median 0.46-0.52 s against 0.19-0.27 s).
run_id = st.selectbox("Open a run", ids, index=None, format_func=labels.get, key=kept("history_run"),
                      placeholder="Tick a row above, or pick a run here")
show_run_in_url(run_id)
st.session_state["history_linked"] = run_id  # the URL's run is this page's own from here on
if run_id is None:
    st.stop()
record = store.get(run_id)
to_run, to_decision = st.columns(2)
if to_run.button("Open in the Run view", icon=":material/play_circle:", width="stretch"):
    open_run(record, "pages/run.py")
if to_decision.button("Open in Decision check", icon=":material/fact_check:", width="stretch"):
    open_run(record, "pages/decision.py")
with st.expander("Settings"):
    st.json(record.settings.to_dict())
started_by = store.started_by(run_id)
if started_by:  # runs stored before starts were recorded say nothing
    st.caption(f"Started by **{md(started_by)}**.")
reviews = store.reviews(run_id)
if reviews:
    st.markdown("**Reviews**")
    st.dataframe(pd.DataFrame([{"pause": r["pause_id"], "of": r["kind"], "review": r["action"],
                                "reviewer": r["reviewer"], "at": timestamp(r["at"]),
                                "note": (r["review"] or {}).get("note", "")} for r in reviews]), hide_index=True)
show_branch_tree(store, run_id)
record = show_run(run_id, key="history")
if record.status in ENDED:
    show_outcome(record)
branch_form(record, key="history")
