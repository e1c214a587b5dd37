"""Reading the decision out of a final answer, grading it, and placing it in a simulator's ranking."""
from __future__ import annotations

import pytest

from core.grading import extract_decision, grade, normalize_name, place, same_decision
from sims.ranking import make_ranking

NODES = ["african_great_lakes", "krakow", "lubeck", "novgorod", "north_sea", "white_sea"]


@pytest.mark.parametrize("name", ["North Sea", "north_sea", "NORTH SEA", "north-sea", "NorthSea", " north__sea "])
def test_names_are_normalised_for_case_spaces_and_underscores(name):
    assert normalize_name(name) == "northsea"


@pytest.mark.parametrize("answer,decision", [
    ('You should allocate the merchant to "krakow".', "krakow"),
    ("Place it in the North Sea trade node.", "north_sea"),
    ("**Final**: White_Sea", "white_sea"),
    ("Krakow, rather than Lubeck, steers the most trade to baltic_sea.", "krakow"),
    ("steer trade to baltic_sea", None),  # the home node is not a candidate
    ("The sea route is best.", None),
])
def test_trade_node_decisions(answer, decision):
    assert extract_decision(answer, "locating", NODES)[0] == decision


def test_all_mentions_are_kept_in_order_and_longer_names_win():
    assert extract_decision("krakow or lubeck, not krakow", "locating", NODES)[1] == ("krakow", "lubeck")
    assert extract_decision("the north sea", "locating", ["sea", "north_sea"])[1] == ("north_sea",)


@pytest.mark.parametrize("answer,decision", [
    ("Increase the level of building id 1485 by 5.", 1485),
    ("Building 1485.", 1485),
    ("Raise it by 5 levels: building #1485 lowers the price by 0.75", 1485),
    ("1539", 1539),
    ("Increase level by 5 of the furniture manufactory", 5),  # a bare number that is a candidate id
    ("The price falls from 40.43 to 39.7", None),
    ("Building 99999 is best", None),  # not a candidate
])
def test_building_id_decisions(answer, decision):
    assert extract_decision(answer, "building", [5, 1445, 1485, 1539])[0] == decision


def test_grade_against_the_label():
    assert grade("allocate to Krakow", "locating", NODES, "krakow").correct is True
    assert grade("allocate to lubeck", "locating", NODES, "krakow").correct is False
    assert grade("no idea", "locating", NODES, "krakow") == grade(None, "locating", NODES, "krakow")
    assert grade("no idea", "locating", NODES, "krakow").correct is False
    assert grade("krakow", "locating", NODES, None).correct is None
    assert grade("building 1485", "building", [1485], 1485).correct is True
    assert same_decision(1485, "1485") and not same_decision("x", 1485)


def test_place_in_a_ranking():
    ranking = make_ranking("locating", "dqa", ["krakow", "lubeck", "novgorod"], [1.0, 3.0, 2.0], baseline=1.5,
                           threshold=1.5, higher_is_better=True)
    p = place("novgorod", ranking)
    assert (p.rank, p.of, p.regret, p.gain) == (2, 3, 1.0, 0.5)
    assert place("white_sea", ranking) is None and place(None, ranking) is None


def test_place_in_the_simulators_ranking(dqa):
    from core.scenario import ranking

    locating = dqa.question("locating", 1)
    best = place(locating.answer, ranking(locating, dqa.database(locating)))
    assert best.rank == 1 and best.regret == 0 and best.gain > 0
    building = dqa.question("building", 1)
    worse = place(1539, ranking(building, dqa.database(building)))
    assert worse.rank > 1 and worse.regret > 0
