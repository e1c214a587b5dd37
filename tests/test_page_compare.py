"""The Compare page (Streamlit AppTest): two techniques side by side on demo Building question 1 from their
recorded replays, then an earlier run of the question joining the comparison."""
from __future__ import annotations

import pytest

import core.jobs.runs as jobs
from core.model.run_settings import RunSettings
from core.backends.registry import unavailable
from core.llm.replays import replays
from tests.conftest import require
from tests.page_app import button, isolate, open_page


@pytest.fixture
def home(monkeypatch, tmp_path):
    return isolate(monkeypatch, tmp_path)


def test_two_techniques_side_by_side_then_an_earlier_run_joins(home):
    at = open_page("pages/compare.py", ("demo", "building", 1))
    assert at.info  # nothing compared yet
    assert at.button_group(key="compare_techniques").value == ["iterrag", "planrag"]
    button(at, "Run side by side").click().run()
    assert not at.exception

    table = at.dataframe[0].value.set_index("technique")
    assert list(table.index) == ["IterRAG", "PlanRAG"]  # in the order chosen
    assert set(table["status"]) == {"finished"} and set(table["decision"]) == {"107"}
    assert set(table["rank"]) == {"1 of 10"} and table["correct"].all()
    assert table.loc["PlanRAG", "plan steps"] == 3 and table.loc["PlanRAG", "re-plans"] == 1
    assert table.loc["IterRAG", "plan steps"] == 0 and table.loc["IterRAG", "queries"] == 3
    assert table.loc["PlanRAG", "LLM calls"] == 6 and table.loc["IterRAG", "LLM calls"] == 4
    assert (table["tokens"] > 0).all() and (table["time (s)"] >= 0).all()
    assert [m.value for m in at.markdown if m.value.startswith("#### ")] == ["#### IterRAG", "#### PlanRAG"]
    assert sum(c.language == "sql" for c in at.code) == 2 * 7  # each query, and as SQLite ran it (translated)
    assert not [b for b in at.button if b.label == "Stop"]  # both ended while followed: no Stop beside them

    steps = next(d.value for d in at.dataframe if "step" in d.value.columns)  # lined up by LLM call
    iterrag, planrag = [c for c in steps.columns if c != "step"]
    assert iterrag.startswith("IterRAG") and list(steps["step"]) == ["1", "2", "3", "4", "5", "6"]
    assert steps[planrag].iloc[0].startswith("\u2260 plan: ")  # PlanRAG differs from IterRAG from its first call
    at.segmented_control(key="compare_line_up").set_value("plan").run()
    steps = next(d.value for d in at.dataframe if "step" in d.value.columns).set_index("step")
    assert list(steps.index) == ["before the plan's steps", "plan step 1", "plan step 2", "plan step 3",
                                 "final answer"]
    assert steps.loc["plan step 1", iterrag] == "" and steps.loc["plan step 1", planrag].startswith("sql: ")
    assert " ‖ plan: " in steps.loc["plan step 2", planrag]  # the re-plan, with the step it came at
    assert steps.loc["final answer", iterrag] == "answer: building 107"  # IterRAG's calls all come before it

    reason = unavailable("mysql")
    if reason:
        require("mysql", reason)
    runtime = jobs.open_runtime()  # an earlier run of the question, on the same question database
    spec = replays("demo", "building", 1, "sql", "iterrag")[0].spec
    earlier = runtime.start(RunSettings("building", 1, "mysql", "iterrag", spec, source="demo"))
    runtime.close()
    at.run()
    compared = at.multiselect(key="compare-demo/building/1")
    assert any(o.endswith(earlier.run_id) for o in compared.options) and earlier.run_id not in compared.value
    compared.select(earlier.run_id).run()
    table = at.dataframe[0].value
    assert len(table) == 3 and list(table["database"]) == ["sqlite", "sqlite", "mysql"]


def test_the_address_names_the_runs_compared_and_a_link_opens_them(home):
    """Issue 15: a view can be sent to a colleague; the Compare page's address carries the runs it compares."""
    from streamlit.testing.v1 import AppTest

    from tests.page_app import APP

    runtime = jobs.open_runtime()
    runs = [runtime.start(RunSettings("building", 1, "sqlite", t, replays("demo", "building", 1, "sql", t)[0].spec,
                                      source="demo")).run_id for t in ("planrag", "iterrag")]
    runtime.close()
    at = AppTest.from_file(str(APP), default_timeout=30)
    at.query_params.update({"q": "demo/building/1", "runs": ",".join(runs)})
    at.switch_page("pages/compare.py")
    at.run()
    assert not at.exception and not at.warning
    assert at.multiselect(key="compare-demo/building/1").value == runs  # as the link named them, in its order
    assert list(at.dataframe[0].value["technique"]) == ["PlanRAG", "IterRAG"]
    at.multiselect(key="compare-demo/building/1").unselect(runs[0]).run()
    assert at.query_params["runs"] == runs[1]  # the address follows the choice
    at.query_params["runs"] = f"{runs[0]},nosuchrun"
    at.run()
    assert at.multiselect(key="compare-demo/building/1").value == [runs[0]]
    assert "nosuchrun" in at.warning[0].value


def test_the_compared_runs_decisions_are_counted_with_the_simulators_rank(home):
    at = open_page("pages/compare.py", ("demo", "building", 1))
    at.button_group(key="compare_techniques").set_value(["planrag"]).run()
    button(at, "Run side by side").click().run()
    button(at, "Run side by side").click().run()  # a second sample of the same technique
    assert not at.exception
    assert "Decisions of these runs" in [s.value for s in at.subheader]
    spread = next(d.value for d in at.dataframe if "share %" in d.value.columns)
    assert spread.to_dict("records") == [{"decision": "107", "samples": 2, "share %": 100.0, "rank": "1 of 10",
                                          "correct": "right"}]
    assert any("samples of one technique" in c.value and "(n=2)" in c.value for c in at.caption)


def test_the_scripted_demo_where_re_planning_matters(home):
    """Issue 40: with the shipped replays both techniques picked correctly and IterRAG was cheaper. On Distribution
    centre question 2 (summer) the shipped scripted transcripts make the point: IterRAG and PlanRAG without
    re-planning go for the central site; PlanRAG's first plan does too, its third query shows the summer demand on
    the eastern coast, and its re-plan changes the decision to the best site."""
    at = open_page("pages/compare.py", ("scenario", "depot", 2))
    at.button_group(key="compare_techniques").set_value(["iterrag", "planrag-norp", "planrag"]).run()
    assert at.selectbox(key="compare_llm").value == "replays"  # each technique's shipped transcript
    button(at, "Run side by side").click().run()
    table = at.dataframe[0].value.set_index("technique")
    assert list(table["decision"]) == ["DC-ASH", "DC-ASH", "DC-BRO"]
    assert list(table["correct"]) == [False, False, True] and list(table["re-plans"]) == [0, 0, 1]
    assert list(table["rank"]) == ["2 of 6", "2 of 6", "1 of 6"]
    replanned = jobs.open_store().get(table.loc["PlanRAG", "run"])
    [replan] = [e for e in replanned.events if e.kind == "replan" and e.replan]
    assert "DC-ASH open against no new centre" in replan.old_plan[-1]
    assert "with DC-BRO open" in replan.new_plan[-1]


def test_the_scripted_demo_opens_in_one_click_from_any_question(home):
    """Issue 40: the scripted demo is opened in the app, not only by its address: one click on Compare (here from a
    DQA question) makes its question current and starts its three techniques on their scripted replays."""
    at = open_page("pages/compare.py", ("demo", "building", 1))
    button(at, "Scripted demo: where re-planning matters").click().run()
    assert not at.exception and at.query_params["q"] == "scenario/depot/2"
    assert at.button_group(key="compare_techniques").value == ["iterrag", "planrag", "planrag-norp"]
    assert at.selectbox(key="compare_llm").value == "replays" and at.radio(key="compare_db").value == "sqlite"
    table = at.dataframe[0].value.set_index("technique")
    assert list(table.index) == ["IterRAG", "PlanRAG", "PlanRAG w/o RP"]
    assert list(table["decision"]) == ["DC-ASH", "DC-BRO", "DC-ASH"] and list(table["re-plans"]) == [0, 1, 0]
