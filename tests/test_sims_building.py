"""Building simulator: all DQA labels, the bit-exact base run, what-if round trip, hand-made markets."""
from __future__ import annotations

import pytest

from sims import building, synthetic
from sims.check import check_building
from sims.ranking import InputError
from sims.sqldump import DumpError, parse_sql_dump, read_sql_dump


def _market(dqa_dir, tag: str) -> building.Market:
    return building.Market(read_sql_dump(dqa_dir / f"building/queries/SQL_format/{tag}.sql"))


def test_all_101_labels_agree(dqa_dir):
    result = check_building(dqa_dir)
    assert (result.agree, result.total) == (101, 101), result.misses


def test_rules_mode_differs_on_7_questions(dqa_dir):
    assert check_building(dqa_dir, "rules").agree == 94


def test_base_run_reproduces_every_stored_price_bit_exactly(dqa_dir):
    files = sorted((dqa_dir / "building/queries/SQL_format").glob("*.sql"))
    assert len(files) == 54
    for path in files:
        market = building.Market(read_sql_dump(path))
        state = building.what_if(market, {}, mode="rules")
        prices = [state.goods[g].price for g in market.goods]
        assert prices == market.current_price.tolist(), path.name


def test_rounding_artefact_decides_gold(dqa_dir):
    ranking = building.rank(_market(dqa_dir, "AUS1839"), "gold")
    assert ranking.best.score == 24.999999999999989 and ranking.threshold == 25.0
    assert ranking.label() is not None


@pytest.mark.parametrize("mode", ["dqa", "rules"])
def test_what_if_round_trip(dqa_dir, mode):
    market = _market(dqa_dir, "CHL1839")
    rankings = building.rank_all(market, mode)
    for building_id in building.candidates(market):
        state = building.what_if(market, {building_id: 5}, mode)
        for goods, ranking in rankings.items():
            assert state.goods[goods].price == ranking.score_of(building_id), (building_id, goods)
    no_change = building.what_if(market, {}, mode)
    for i, (goods, ranking) in enumerate(rankings.items()):
        assert ranking.baseline == market.current_price[i]  # dqa: stored; rules: re-simulated, equal on DQA
        if mode == "rules":
            assert no_change.goods[goods].price == ranking.baseline


def test_candidates_are_all_buildings_in_table_order(dqa_dir):
    market = _market(dqa_dir, "USA1836")
    ranking = building.rank(market, "furniture")
    assert building.candidates(market) == market.building_ids
    assert sorted(e.candidate for e in ranking.entries) == sorted(market.building_ids)
    assert ranking.label() == 1485


def test_unknown_goods_and_building(dqa_dir):
    market = _market(dqa_dir, "USA1836")
    with pytest.raises(InputError, match="unknown goods 'unobtainium'"):
        building.rank(market, "unobtainium")
    with pytest.raises(InputError, match="unknown building id 999999"):
        building.what_if(market, {999999: 5})


def test_malformed_value_names_file_and_line(tmp_path):
    lines = synthetic.dump_sql(synthetic.market(5)).splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("INSERT INTO building"))
    lines[row] = lines[row].replace(", ", ", 1.5x", 1)
    broken = tmp_path / "malformed.sql"
    broken.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DumpError, match=rf"malformed\.sql, line {row + 1}: cannot read value"):
        read_sql_dump(broken)


# Hand-made market: building 1 makes raw R from nothing; building 2 turns R into A (level 1 each).
HAND_MADE = """
CREATE TABLE goods(goods_name VARCHAR(30), code INT, base_price FLOAT, current_price FLOAT, pop_demand FLOAT, PRIMARY KEY (code));
CREATE TABLE building(id INT, name VARCHAR(80), level INT, PRIMARY KEY (id));
CREATE TABLE supply(goods_id INT, building_id INT, max_supply FLOAT, current_output FLOAT, level INT, PRIMARY KEY (goods_id, building_id));
CREATE TABLE demand(goods_id INT, building_id INT, max_demand FLOAT, current_input FLOAT, level INT, PRIMARY KEY (goods_id, building_id));
INSERT INTO goods(goods_name,code,base_price,current_price,pop_demand) VALUES ("A", 0, 20, 23.0, 10.0);
INSERT INTO goods(goods_name,code,base_price,current_price,pop_demand) VALUES ("R", 1, 10, 6.25, 0);
INSERT INTO building(id,name,level) VALUES (1, "mine", 1);
INSERT INTO building(id,name,level) VALUES (2, "mill", 1);
INSERT INTO supply(goods_id,building_id,max_supply,current_output,level) VALUES (1, 1, 10.0, 10.0, 1);
INSERT INTO demand(goods_id,building_id,max_demand,current_input,level) VALUES (1, 2, 5.0, 5.0, 1);
INSERT INTO supply(goods_id,building_id,max_supply,current_output,level) VALUES (0, 2, 8.0, 8.0, 1);
"""


@pytest.fixture
def hand_made():
    return parse_sql_dump(HAND_MADE, "hand_made.sql")


def test_rules_mode_by_hand(hand_made):
    state = building.what_if(hand_made, {}, "rules")
    # R: demand 5, supply 10 -> 10 * (1 - 0.75 * 5 / 10); A: demand 10, supply 8 -> 20 * (1 + 0.75 * 2 / 10)
    assert (state.goods["R"].price, state.goods["A"].price) == (6.25, 23.0)
    assert state.inputs[(2, "R")] == 10.0 and state.outputs[(2, "A")] == 8.0
    ranking = building.rank(hand_made, "A", "rules")
    # +5 levels on the mill: demand for R 30, its input ratio 10 / 30, output 48 / 3 = 16 -> 20 * (1 - 0.75 * 6 / 16)
    assert [(e.candidate, e.score) for e in ranking.entries] == [(2, 14.375), (1, 23.0)]
    # +5 levels on the input-less mine only raise the cycle-1 supply seed: the price does not move
    assert ranking.label() == 2 and ranking.gain(2) == 8.625 and ranking.gain(1) == 0.0
    assert ranking.regret(1) == 8.625 and ranking.rank_of(1) == 2


def test_dqa_mode_by_hand(hand_made):
    ranking = building.rank(hand_made, "A")  # dqa: leftover demand 5 of R and supply seeds carried over
    assert ranking.baseline == 23.0  # the stored price
    # mill +5: R demand 5 + 30, seed 10 + 10; cycle 1 ratio 20/35, then 10/35 -> A supply 48 * 10 / 35
    assert ranking.score_of(2) == pytest.approx(15.9375, rel=1e-15)
    assert building.what_if(hand_made, {}, "dqa").goods["R"].price == 10.0  # demand double counted: 10 vs 10


def test_level_zero_building_is_reported(hand_made):
    hand_made["building"].rows[0] = (1, "mine", 0)
    with pytest.raises(InputError, match="building 1 has level 0"):
        building.rank(hand_made, "A")
