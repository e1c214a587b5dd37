"""core.analysis.decision: the ranking table, a stored run's pick, and a decision's what-if effect against no decision."""
import pytest

from core.scenarios import catalog
from core.analysis import decision
from core.store.runs import RunStore
from core.scenarios import candidates, ranking
from sims.ranking import MODES
from core.model.outcome import RunOutcome
from core.model.run_settings import RunSettings


def _demo(scenario, number=1):
    q = catalog.question("demo", scenario, number)
    return q, catalog.database(q)


def test_every_mode_has_a_note():
    assert set(decision.MODE_NOTES) == set(MODES)


def test_candidate_names():
    q, db = _demo("locating")
    assert list(decision.candidate_names(q, db)) == candidates(q, db)
    q, db = _demo("building")
    names = decision.candidate_names(q, db)
    assert list(names) == candidates(q, db)
    building_id, name, level = db.tables["building"].rows[0]
    assert names[building_id].startswith(f"{building_id} ") and f"(level {level})" in names[building_id]


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_ranking_table_is_the_ranking(scenario):
    q, db = _demo(scenario)
    r = ranking(q, db)
    table = decision.ranking_table(r, decision.candidate_names(q, db))
    assert list(table["rank"]) == [rank for rank, _ in r.groups()]  # a tie group shares its best position
    assert list(table["tied"]) == [tied for _, tied in r.groups()] and table["tied"].max() > 1
    tied = table[table["tied"] > 1].iloc[0]
    assert tied["place"] == f"tied {tied['rank']}{'rd' if tied['rank'] == 3 else 'th'}–" \
        f"{tied['rank'] + tied['tied'] - 1}th of {len(r.entries)}"
    assert list(table["score"]) == [e.score for e in r.entries]
    assert list(table["gain"]) == [r.gain(e.candidate) for e in r.entries]
    assert table["regret"].iloc[0] == 0 and (table["regret"] >= 0).all()
    assert table["gain"].is_monotonic_decreasing


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs.sqlite")


def test_run_pick(store):
    q, _ = _demo("locating")
    settings = RunSettings("locating", 1, "sqlite", "planrag", "x", source="demo")
    store.create("r1", settings)
    assert "no outcome yet (status running)" in decision.run_pick("r1", q, store).note
    store.update("r1", "finished", outcome=RunOutcome.from_dict({"decision": "ceylon"}))
    assert decision.run_pick("r1", q, store) == decision.RunPick("r1", "ceylon")
    store.create("r2", RunSettings("locating", 2, "sqlite", "planrag", "x", source="demo"))
    assert "answered demo/locating/2, not demo/locating/1" in decision.run_pick("r2", q, store).note
    store.create("r3", settings)
    store.update("r3", "finished", outcome=RunOutcome.from_dict({"decision": None}))
    assert "named no candidate" in decision.run_pick("r3", q, store).note
    assert "not in the run store" in decision.run_pick("nope", q, store).note


@pytest.mark.parametrize("mode", MODES)
def test_locating_what_if_matches_the_ranking(mode):
    q, db = _demo("locating")
    r = ranking(q, db, mode)
    pick = r.entries[0].candidate
    effect = decision.what_if(q, db, pick, mode)
    assert effect.before == pytest.approx(r.baseline, rel=1e-12)
    assert effect.after == pytest.approx(r.score_of(pick), rel=1e-12)
    assert effect.target == f"profit of {q.country} at {q.home}" and effect.note is None
    biggest = effect.biggest(3)
    assert 0 < len(biggest) <= 3 and list(biggest.columns)[0] == "edge"
    assert list(biggest["change"].abs()) == sorted(biggest["change"].abs(), reverse=True)
    assert set(effect.deltas) == set(effect.changes)


def test_building_what_if_in_rules_mode_matches_the_ranking():
    q, db = _demo("building")
    r = ranking(q, db, "rules")
    pick = r.entries[0].candidate
    effect = decision.what_if(q, db, pick, "rules")
    assert (effect.before, effect.after) == (pytest.approx(r.baseline), pytest.approx(r.score_of(pick)))
    assert effect.deltas[q.goods] < 0 and effect.note is None
    assert q.goods in set(effect.biggest(50)["goods"])


def test_building_what_if_in_dqa_mode_explains_its_baseline(dqa):
    q = dqa.question("building", 1)
    db = dqa.database(q)
    r = ranking(q, db, "dqa")
    effect = decision.what_if(q, db, q.answer, "dqa")
    assert effect.after == pytest.approx(r.score_of(q.answer))
    assert "stored price" in effect.note and "twice" in effect.note


def test_a_decision_that_changes_nothing():
    q, db = _demo("locating")
    r = ranking(q, db, "rules")
    idle = next(e.candidate for e in r.entries if e.score == r.baseline)
    effect = decision.what_if(q, db, idle, "rules")
    assert effect.after == effect.before and effect.biggest().empty
