"""The Scenarios page (AppTest): picking a source, scenario and question; the question, its rules and repaired
defects; the network with a clicked node's rows; the tables; the choice kept when the page is opened again."""
import pytest
from streamlit.testing.v1 import AppTest

from core.scenarios import catalog
from core import scenarios
from tests import page_app
from tests.page_app import open_file
from tests.page_app import shown



def open_page(**state) -> AppTest:
    return open_file("pages/scenarios.py", **state)


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_demo_question_is_shown_and_selected():
    at = open_page()
    assert not at.exception
    assert at.session_state["question_ref"] == ("demo", "locating", 1)
    assert metrics(at)["Candidate decisions"] == "9"
    assert at.get("plotly_chart") and any("Click a node" in c.value for c in at.caption)
    at.segmented_control(key="scenarios_scenario").set_value("building").run()
    assert at.session_state["question_ref"] == ("demo", "building", 1)
    assert at.select_slider[0].value == 2  # the market's level of detail
    at.selectbox(key="scenarios_question").select_index(1).run()
    assert at.session_state["question_ref"] == ("demo", "building", 2) and not at.exception


def test_clicked_node_shows_its_rows():
    at = open_page()
    home = at.selectbox(key="scenarios_question").value.home
    at.session_state["network-demo/locating/1"] = {
        "selection": {"points": [{"customdata": f"trade_node:{home}"}], "point_indices": [0], "box": [], "lasso": []}}
    at.run()
    assert f"**{home}**" in [shown(m.value) for m in at.markdown]  # issue 40: its name, not "trade_node:{home}"
    captions = [shown(c.value) for c in at.caption]
    assert "trade_node: 1 row" in captions and any(c.startswith("node_country:") for c in captions)


def test_dqa_question_with_repaired_defects(dqa_dir):
    at = open_page(question_ref=("dqa", "locating", 13))  # q13 spells has_merchant as has_has_merchant
    assert at.selectbox(key="scenarios_question").value.id == "dqa/locating/13"
    assert metrics(at)["Labelled best decision"] == at.selectbox(key="scenarios_question").value.answer
    defects = next(e for e in at.expander if e.label.startswith("Repaired data defects"))
    assert "has_has_merchant" in shown(defects.markdown[0].value)
    at.segmented_control(key="scenarios_scenario").set_value("building").run()
    assert at.session_state["question_ref"] == ("dqa", "building", 1) and not at.exception
    label = next(m for m in at.metric if m.label == "Labelled best decision")
    assert (label.value, label.delta) == ("1485", "furniture manufactories")  # id and type, never a bare id


def test_choice_kept_when_the_page_is_opened_again():
    at = open_page(question_ref=("demo", "building", 3))
    assert at.selectbox(key="scenarios_question").value.number == 3
    assert at.segmented_control(key="scenarios_scenario").value == "building"


def test_missing_dqa_directory_says_where_to_set_it(tmp_path):
    at = open_page(dqa_dir=str(tmp_path))
    at.segmented_control(key="scenarios_source").set_value("dqa").run()
    assert not at.exception
    assert "not found" in at.info[0].value and "Settings" in at.info[0].value


@pytest.mark.parametrize("scenario,tables", [("locating", 4), ("building", 4)])
def test_tables_tab_lists_every_table(scenario, tables):
    at = open_page(question_ref=("demo", scenario, 1))
    assert not at.dataframe  # a tab's content is drawn when the tab is open, the network's first
    at.session_state["scenarios_database_tab"] = "Tables"
    at.run()
    assert not at.get("plotly_chart")
    choice = at.segmented_control(key=f"scenarios_table_{scenario}")  # one table at a time
    names = list(choice.options)
    assert len(names) == tables and all("(" in n for n in names)
    assert len(at.dataframe) == 1


def _figure(at) -> dict:
    import json

    return json.loads(at.get("plotly_chart")[0].proto.spec)


def test_hide_answers_hides_the_label_everywhere_before_a_run():
    at = page_app.open_page("pages/scenarios.py", ("demo", "building", 1))  # the switch: in the app's sidebar
    question = at.selectbox(key="scenarios_question").value
    title = scenarios.get("building").decision_title(question, question.answer, catalog.database(question))
    assert at.selectbox(key="scenarios_question").options[0].endswith(f"label: {title}")  # never a bare id
    assert title != str(question.answer)
    assert "best decision" in {t.get("name") for t in _figure(at)["data"]}
    at.sidebar.toggle(key="hide_answers_switch").set_value(True).run()
    assert at.session_state["hide_answers"] and not at.exception
    picker = at.selectbox(key="scenarios_question")
    assert not any("label" in o for o in picker.options)
    # the browser keeps showing the chosen option's old text unless it is sent again
    assert picker.proto.set_value and picker.proto.raw_value == picker.options[0]
    assert metrics(at)["Labelled best decision"] == "hidden"
    assert "best decision" not in {t.get("name") for t in _figure(at)["data"]}
    assert str(question.answer) not in "".join(str(t.get("hovertext")) for t in _figure(at)["data"]
                                              if t.get("name") == "best decision")


def test_locating_network_opens_on_the_neighbourhood_and_finds_a_node():
    at = open_page(question_ref=("demo", "locating", 1))
    assert at.segmented_control(key="scenarios_view_locating_scope").value == "neighbourhood"
    assert any(c.value.startswith("The neighbourhood of") for c in at.caption)
    at.segmented_control(key="scenarios_view_locating_scope").set_value("all").run()
    assert any(c.value.startswith("The whole network") for c in at.caption)
    find = at.selectbox(key="scenarios_find-demo/locating/1")
    assert len(find.options) == len(db_nodes(at))
    other = next(n for n in db_nodes(at) if n != at.selectbox(key="scenarios_question").value.home)
    at.session_state["network-demo/locating/1"] = {  # a click on a node, then "Explore from here"
        "selection": {"points": [{"customdata": f"trade_node:{other}"}], "point_indices": [0], "box": [],
                      "lasso": []}}
    at.run()
    next(b for b in at.button if b.label == "Explore from here").click().run()
    assert not at.exception
    assert at.session_state["scenarios_find-demo/locating/1"] == f"trade_node:{other}"
    assert any(c.value.startswith(f"The neighbourhood of {other.replace('_', ' ')}") for c in at.caption)
    assert at.segmented_control(key="scenarios_view_locating_scope").value == "neighbourhood"


def db_nodes(at) -> list[str]:
    from core.scenarios import catalog

    return catalog.database(at.selectbox(key="scenarios_question").value).tables["trade_node"].column("trade_node")


def test_the_countrys_own_rows_are_highlighted_among_a_nodes_rows():
    at = open_page()
    q = at.selectbox(key="scenarios_question").value
    at.session_state["network-demo/locating/1"] = {
        "selection": {"points": [{"customdata": f"trade_node:{q.home}"}], "point_indices": [0], "box": [],
                      "lasso": []}}
    at.run()
    styled = [d for d in at.dataframe if "background-color" in str(d.proto.arrow_data.styler.styles)]
    assert styled, "the node_country rows of the question's country are highlighted"
    assert any(b.label == "Explore from here" for b in at.button)
