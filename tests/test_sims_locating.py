"""Locating simulator: all DQA labels, degenerate questions, what-if round trip, hand-made rules checks."""
from __future__ import annotations

import json

import pytest

from sims import locating, synthetic
from sims.check import check_locating
from sims.ranking import InputError
from sims.sqldump import DumpError, parse_sql_dump, read_sql_dump

DEGENERATE = (12, 15, 40, 56, 67, 68, 112, 124, 134, 173, 190)


@pytest.fixture(scope="module")
def questions(dqa_dir):
    return json.loads((dqa_dir / "locating/questions/simulated_question.json").read_text(encoding="utf-8"))


def _network(dqa_dir, number: int) -> locating.TradeNetwork:
    return locating.TradeNetwork(read_sql_dump(dqa_dir / f"locating/queries/SQL_format/q{number}.sql"))


def test_all_200_labels_agree(dqa_dir):
    result = check_locating(dqa_dir)
    assert (result.agree, result.total) == (200, 200), result.misses


def test_rules_mode_differs_on_17_questions(dqa_dir):
    assert check_locating(dqa_dir, "rules").agree == 183


@pytest.mark.parametrize("number", DEGENERATE)
def test_degenerate_question_picks_first_node(dqa_dir, questions, number):
    q = questions[number - 1]
    ranking = locating.rank(_network(dqa_dir, number), q["country"])
    assert len(ranking.entries) == 79
    assert len({e.score for e in ranking.entries}) == 1
    assert ranking.label() == "african_great_lakes" == q["answer"]


def test_candidates_are_all_other_nodes_in_table_order(dqa_dir, questions):
    q = questions[0]
    net = _network(dqa_dir, 1)
    names = locating.candidates(net, q["home"])
    assert len(names) == 79 and q["home"] not in names
    assert names == [n for n in net.names if n != q["home"]]
    no_row = [n for n in names if (net.index[n], q["country"]) not in net.row_at]
    assert no_row, "the country has no row on some candidates, which must still be ranked"
    assert set(no_row) <= {e.candidate for e in locating.rank(net, q["country"]).entries}


@pytest.mark.parametrize("mode", ["dqa", "rules"])
@pytest.mark.parametrize("number", [1, 80, 160])  # one question per year (1445, 1618, 1701)
def test_what_if_round_trip(dqa_dir, questions, number, mode):
    q = questions[number - 1]
    net = _network(dqa_dir, number)
    ranking = locating.rank(net, q["country"], mode)
    assert locating.what_if(net, q["country"], [], mode).profit == ranking.baseline
    for entry in ranking.entries:
        state = locating.what_if(net, q["country"], [(q["country"], entry.candidate)], mode)
        assert state.profit == entry.score, entry.candidate


def test_what_if_state_covers_every_node_and_edge(dqa_dir, questions):
    q = questions[0]
    net = _network(dqa_dir, 1)
    state = locating.what_if(net, q["country"], [(q["country"], "krakow")])
    assert list(state.nodes) == net.names
    assert len(state.flows) == 159
    assert state.merchants == ((q["country"], "krakow"),)
    for name in net.names:  # what leaves a node along its edges is its outgoing
        sent = [v for (s, _), v in state.flows.items() if s == name]
        if sent:
            assert sum(sent) == pytest.approx(state.nodes[name].outgoing, rel=1e-12)


def test_unknown_country_and_node(dqa_dir):
    net = _network(dqa_dir, 1)
    with pytest.raises(InputError, match="unknown country 'XXX'"):
        locating.rank(net, "XXX")
    with pytest.raises(InputError, match="unknown trade node 'atlantis'"):
        locating.what_if(net, "SWE", [("SWE", "atlantis")])
    with pytest.raises(InputError, match="unknown mode"):
        locating.rank(net, "SWE", "fast")


def test_truncated_file_names_file_and_line(tmp_path):
    text = synthetic.dump_sql(synthetic.trade_network(30))
    lines = text.splitlines()
    broken = tmp_path / "truncated.sql"
    broken.write_text("\n".join(lines[:40]) + "\n" + lines[40][:25] + "\n", encoding="utf-8")
    with pytest.raises(DumpError) as caught:
        read_sql_dump(broken)
    assert caught.value.source == str(broken) and caught.value.line == 41
    assert f"{broken}, line 41" in str(caught.value)


# A hand-made network: a -> b -> h and a -> c. X (home h) is present on a; Y (home c) on a, b and h.
HAND_MADE = """
CREATE TABLE country(country_name VARCHAR(30), home_node VARCHAR(30), development FLOAT, PRIMARY KEY (country_name));
CREATE TABLE trade_node(trade_node VARCHAR(30), local_value FLOAT, is_inland BOOLEAN, total_power FLOAT, outgoing FLOAT, ingoing FLOAT, PRIMARY KEY (trade_node));
CREATE TABLE flow(source VARCHAR(30), dest VARCHAR(30), flow FLOAT, PRIMARY KEY (source, dest));
CREATE TABLE node_country(trade_node VARCHAR(30), country_name VARCHAR(30), is_home BOOLEAN, has_merchant BOOLEAN, base_trading_power FLOAT, calculated_trading_power FLOAT, PRIMARY KEY (trade_node, country_name));
INSERT INTO country(country_name,home_node,development) VALUES ("X", "h", 90.0);
INSERT INTO country(country_name,home_node,development) VALUES ("Y", "c", 30.0);
INSERT INTO trade_node(trade_node,local_value,is_inland,total_power,outgoing,ingoing) VALUES ("a", 10.0, {inland}, 100.0, 7.0, 0.0);
INSERT INTO trade_node(trade_node,local_value,is_inland,total_power,outgoing,ingoing) VALUES ("b", 0.0, FALSE, 20.0, 1.0, 3.0);
INSERT INTO trade_node(trade_node,local_value,is_inland,total_power,outgoing,ingoing) VALUES ("c", 0.0, FALSE, 10.0, 0.0, 3.0);
INSERT INTO trade_node(trade_node,local_value,is_inland,total_power,outgoing,ingoing) VALUES ("h", 4.0, FALSE, 80.0, 2.0, 1000.0);
INSERT INTO flow(source,dest,flow) VALUES ("a", "b", 0.0);
INSERT INTO flow(source,dest,flow) VALUES ("a", "c", 0.0);
INSERT INTO flow(source,dest,flow) VALUES ("b", "h", 0.0);
INSERT INTO node_country(trade_node,country_name,is_home,has_merchant,base_trading_power,calculated_trading_power) VALUES ("a", "X", FALSE, FALSE, 10.0, 0.0);
INSERT INTO node_country(trade_node,country_name,is_home,has_merchant,base_trading_power,calculated_trading_power) VALUES ("a", "Y", FALSE, FALSE, 30.0, 0.0);
INSERT INTO node_country(trade_node,country_name,is_home,has_merchant,base_trading_power,calculated_trading_power) VALUES ("b", "Y", FALSE, FALSE, 10.0, 0.0);
INSERT INTO node_country(trade_node,country_name,is_home,has_merchant,base_trading_power,calculated_trading_power) VALUES ("c", "Y", TRUE, FALSE, 5.0, 0.0);
INSERT INTO node_country(trade_node,country_name,is_home,has_merchant,base_trading_power,calculated_trading_power) VALUES ("h", "X", TRUE, FALSE, 20.0, 0.0);
INSERT INTO node_country(trade_node,country_name,is_home,has_merchant,base_trading_power,calculated_trading_power) VALUES ("h", "Y", FALSE, FALSE, 30.0, 0.0);
"""


def _hand_made(inland: bool = False):
    return parse_sql_dump(HAND_MADE.format(inland="TRUE" if inland else "FALSE"), "hand_made.sql")


def test_rules_mode_by_hand_without_merchant():
    state = locating.what_if(_hand_made(), "X", [], "rules")
    # Fresh state: node's own power (stored total minus its rows) plus its rows; ingoing starts at 0.
    assert state.nodes["a"].total_power == pytest.approx(100.0)
    assert state.nodes["a"].outgoing == pytest.approx(10.0 * 40 / 100)  # (local + in) * non-home share
    assert state.flows[("a", "b")] == state.flows[("a", "c")] == pytest.approx(2.0)  # no merchant: even split
    assert state.nodes["b"].ingoing == pytest.approx(2.1)
    assert state.nodes["h"].ingoing == pytest.approx(1.05 * 2.1 * 10 / 20)
    assert state.profit == pytest.approx((4.0 + 1.05 * 1.05) * 20 / 80)  # (local + in) * 20 / 80


def test_rules_mode_by_hand_with_merchant():
    net = locating.TradeNetwork(_hand_made())
    state = locating.what_if(net, "X", [("X", "a")], "rules")
    power = 1.05 * (10.0 + 2)
    out_a = 10.0 * (30 + power) / (60 + 30 + power)
    assert state.nodes["a"].outgoing == pytest.approx(out_a)
    assert state.flows[("a", "b")] == pytest.approx(out_a) and state.flows[("a", "c")] == 0  # steered to b
    in_h = 1.05 * (1.05 * out_a * 10 / 20)
    assert state.profit == pytest.approx((4.0 + in_h) * 20 / 80)
    ranking = locating.rank(net, "X", "rules")
    assert [e.candidate for e in ranking.entries] == ["a", "b", "c"]  # b and c: no row of X, baseline
    assert ranking.label() == "a" and ranking.gain("b") == 0 and ranking.gain("a") > 0
    assert ranking.position_of("c") == 3 and ranking.rank_of("c") == 2 and ranking.tied("c") == 2  # b, c tie
    assert ranking.rank_of("h") is None


def test_caravan_bonus_differs_by_mode():
    tables = _hand_made(inland=True)
    rules = locating.what_if(tables, "X", [("X", "a")], "rules").nodes["a"].total_power
    assert rules == pytest.approx(60 + 30 + 1.05 * (10 + 2 + max(90 / 3, 50)))
    dqa = locating.what_if(tables, "X", [("X", "a")], "dqa").nodes["a"].total_power
    assert dqa == pytest.approx(100 + 1.05 * (10 + 2 + max(50, 90)) + 30)  # on top of the stored total


def test_dqa_mode_carries_over_stored_state_and_subtracts_outgoing():
    state = locating.what_if(_hand_made(), "X", [], "dqa")
    h = state.nodes["h"]
    assert h.ingoing > 1000  # stored ingoing 1000 plus this pass's inflow
    assert state.profit == pytest.approx((4.0 - h.outgoing + h.ingoing) * 20 / h.total_power)
