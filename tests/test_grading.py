"""Reading the decision out of a final answer, grading it, and placing it in a simulator's ranking."""
from __future__ import annotations

import pytest

import json
from pathlib import Path

from core.analysis.grading import (
    extract_decision, grade, normalize_name, place, rank_text, read_decision, same_decision
)
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
    ("Increase level by 5 of the furniture manufactory", None),  # a level, not an id (issue 10)
    ("Upgrade 5 first", 5),  # a bare number that is a candidate id, read as no quantity
    ("The price falls from 40.43 to 39.7", None),
    ("Building 99999 is best", None),  # not a candidate
])
def test_building_id_decisions(answer, decision):
    assert extract_decision(answer, "building", [5, 1445, 1485, 1539])[0] == decision


def test_grade_against_the_label():
    assert grade("allocate to Krakow", "locating", NODES, "krakow").correct is True
    assert grade("allocate to lubeck", "locating", NODES, "krakow").correct is False
    assert grade("no idea", "locating", NODES, "krakow").decision is grade(None, "locating", NODES, "krakow").decision
    assert grade("no idea", "locating", NODES, "krakow").correct is False
    assert grade("krakow", "locating", NODES, None).correct is None
    assert grade("building 1485", "building", [1485], 1485).correct is True
    assert same_decision(1485, "1485") and not same_decision("x", 1485)


def test_place_in_a_ranking():
    ranking = make_ranking("locating", "dqa", ["krakow", "lubeck", "novgorod"], [1.0, 3.0, 2.0], baseline=1.5,
                           threshold=1.5, higher_is_better=True)
    p = place("novgorod", ranking)
    assert (p.rank, p.of, p.regret, p.gain, p.tied) == (2, 3, 1.0, 0.5, 1)
    assert place("white_sea", ranking) is None and place(None, ranking) is None


def test_place_in_the_simulators_ranking(dqa):
    from core.scenarios import ranking

    locating = dqa.question("locating", 1)
    best = place(locating.answer, ranking(locating, dqa.database(locating)))
    assert best.rank == 1 and best.regret == 0 and best.gain > 0
    building = dqa.question("building", 1)
    worse = place(1539, ranking(building, dqa.database(building)))
    assert worse.rank > 1 and worse.regret > 0


CORPUS = json.loads((Path(__file__).parent / "data" / "grading_corpus.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CORPUS["answers"], ids=lambda c: c["answer"][:40])
def test_corpus_answer_reads_its_conclusion(case):
    """Written final answers (comparisons, negations, lists, numbers that are not ids, no decision)."""
    d, _, status, reason = read_decision(case["answer"], case["scenario"], CORPUS["candidates"][case["scenario"]])
    assert (d, status) == (case["expected"], case["status"]), reason
    assert reason


def test_corpus_is_large_and_covers_both_scenarios_and_every_status():
    answers = CORPUS["answers"]
    assert len(answers) >= 60
    assert {a["scenario"] for a in answers} == {"locating", "building"}
    assert {a["status"] for a in answers} == {"decided", "ambiguous", "none"}


@pytest.mark.parametrize("answer,status", [
    ("either krakow or novgorod", "ambiguous"), ("I cannot determine the best node.", "none"), ("", "none")])
def test_undecided_answers_are_not_correct_and_say_why(answer, status):
    g = grade(answer, "locating", NODES, "krakow")
    assert (g.decision, g.status, g.correct) == (None, status, False) and g.reason


def test_tied_placement_reads_as_a_tie_and_has_no_regret():
    ranking = make_ranking("locating", "dqa", ["a", "b", "c", "d"], [3.0, 3.0, 1.0, 1.0], baseline=1.0,
                           threshold=1.0, higher_is_better=True)
    assert place("b", ranking).regret == 0 and place("b", ranking).optimal
    assert place("d", ranking).text() == "tied 3rd–4th of 4" and rank_text(2, 79) == "2 of 79"
    assert rank_text(3, 79, 77) == "tied 3rd–79th of 79" and rank_text(11, 20, 3) == "tied 11th–13th of 20"


@pytest.mark.parametrize("answer,decision", [
    ("Decision-making here favours novgorod at first sight, but krakow adds more, so krakow.", "krakow"),
    ("Answer - krakow", "krakow"),
    ("Final answer: krakow (novgorod is second)", "krakow"),
    ("**Answer:** Lubeck", "lubeck"),
    ("### Recommendation\nPlace the merchant in **Krakow**.", "krakow"),
])
def test_final_lines_and_headings(answer, decision):
    assert read_decision(answer, "locating", NODES)[0] == decision


@pytest.mark.parametrize("answer,decision,status", [
    # issue 28: real GPT-4 final answers (the PlanRAG authors' published Building log) that commit to nothing
    ("Increasing the level of the building with id 1518 by 5 will not decrease the market price of oil.", None,
     "none"),
    ("It is not possible to decrease the market price of 'manowars' by increasing the level of the building with id "
     "818 by 5.", None, "none"),
    ("0  472  19.3  57.9  3", None, "none"),  # a raw table row
    ("472", 472, "decided"),
    ("You should increase building 472, since building 818 will not decrease it.", 472, "decided"),
    ("Building 472 will not only lower the price but also raise the output.", 472, "decided"),
])
def test_negative_claims_and_table_rows_decide_nothing(answer, decision, status):
    found, _, read, _ = read_decision(answer, "building", [1518, 818, 472, 100])
    assert (found, read) == (decision, status)


@pytest.mark.parametrize("answer,best_group", [
    ("Either building 2465 or 2467", True),  # exactly the group tied for best
    ("Either building 2465 or 100", False),
    ("Any of the building ids 2465, 2467, or 100", False),
])
def test_an_answer_naming_the_group_tied_for_best_is_optimal_not_a_decision(monkeypatch, answer, best_group):
    """Issue 28: "Either building 2465 or 2467" stays ambiguous (not one decision, not correct), but when the
    named set is exactly the simulator's group tied for best the outcome says so and counts it as optimal."""
    from types import SimpleNamespace

    from core.agents import runtime
    from core.analysis import grading

    ranked = make_ranking("building", "dqa", [2465, 2467, 100], [1.0, 1.0, 3.0], baseline=3.0, threshold=3.0,
                          higher_is_better=False)
    monkeypatch.setattr(grading.scenarios, "ranking", lambda question, database: ranked)
    ws = SimpleNamespace(question=SimpleNamespace(scenario="building", answer=2465), candidates=[2465, 2467, 100],
                         database=object())
    outcome = runtime._outcome({"final_answer": answer}, ws)
    assert (outcome.decision, outcome.grade_status, outcome.correct) == (None, "ambiguous", False)
    assert outcome.best_group is best_group
    assert ("tied for the best score" in outcome.grade_reason) is best_group
