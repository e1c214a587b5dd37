"""Evidence coverage: the values that decide a question (from the simulator) and which a run's rows held."""
from __future__ import annotations

from core.scenarios import catalog
from core.analysis.evidence import coverage, deciding_values, of_run
from core.model.events import ObservationEvent
from core.model.run_settings import RunSettings
from core.scenarios import ranking


def _question(scenario):
    q = catalog.question("demo", scenario, 1)
    return q, catalog.database(q)


def observation(columns, rows, error_kind=None):
    return ObservationEvent(text="", columns=columns, rows=rows, error_kind=error_kind)


def test_locating_deciding_values_are_about_the_best_its_rival_and_home():
    q, db = _question("locating")
    values = deciding_values(q, db)
    r = ranking(q, db)
    nodes = {v.key[0][0] for v in values if v.table == "trade_node"}
    assert nodes == {r.entries[0].candidate, r.entries[1].candidate, q.home} == {"doab", "ganges", "deccan"}
    labels = {v.label for v in values}
    assert "trade_node.local_value of doab" in labels and f"country.development of {q.country}" in labels
    assert all(v.column not in ("trade_node", "country_name") for v in values)  # keys are not values
    assert deciding_values(q, db) is values  # cached


def test_coverage_matches_a_value_with_its_row_keys_in_the_same_row():
    q, db = _question("locating")
    values = deciding_values(q, db)
    doab = next(v for v in values if v.label == "trade_node.local_value of doab")
    events = [observation(["trade_node", "local_value"], [["doab", doab.value], ["ganges", 1.0]]),
              observation(["x"], [["deccan", doab.value]], error_kind="timeout"),  # failed: not an observation
              ObservationEvent(text=f"deccan {doab.value}", columns=[], rows=[])]
    c = coverage(values, events)
    assert c.seen[values.index(doab)] and c.n_seen == 1 and c.total == len(values)
    assert "trade_node.local_value of doab" not in c.missing and len(c.missing) == c.total - 1
    assert c.text() == f"the agent saw 1 of {c.total} values that decide this question"
    wrong_row = coverage(values, [observation(["a", "b"], [["ganges", doab.value]])])
    assert wrong_row.n_seen == 0  # the value without its node is not evidence about doab


def test_building_values_match_ids_and_goods_by_name_or_code():
    q, db = _question("building")
    values = deciding_values(q, db)
    supply = next(v for v in values if v.table == "supply")
    building_id, (goods_name, goods_code) = supply.key[0][0], supply.key[1]
    by_name = coverage(values, [observation(["id", "goods", "max_supply"], [[building_id, goods_name, supply.value]])])
    by_code = coverage(values, [observation(["b"], [[{"id": building_id, "goods_id": goods_code,
                                                      "max_supply": supply.value}]])])  # a graph node's properties
    assert by_name.seen[values.index(supply)] and by_code.seen[values.index(supply)]


def test_a_stored_run_without_a_known_question_has_no_coverage():
    assert of_run(RunSettings("locating", 99, "sqlite", "iterrag", "x", source="demo"), []) is None


def test_the_focus_scores_are_the_rankings_and_an_unread_column_changes_no_score():
    """The evidence simulates only the focus candidates (sims.locating.scores, sims.building.prices) and skips the
    columns its simulator does not read (READS): both give the ranking's own figures, for every candidate."""
    from dataclasses import replace

    from core.scenarios import scenario_type
    from sims.tables import Tables

    for scenario in ("locating", "building"):
        q, db = _question(scenario)
        kind = scenario_type(q.scenario)
        for mode in ("dqa", "rules"):
            r = ranking(q, db, mode)
            everyone = [e.candidate for e in r.entries]
            assert kind.focus_scores(q, db.tables, everyone, mode) == [e.score for e in r.entries]
        reads = kind.reads()
        for t in db.tables:
            unread = [i for i, c in enumerate(t.columns) if c.name not in reads.get(t.name, ())
                      and c.type in ("INT", "FLOAT")]
            for i in unread:  # every row's value of an unread number column doubled: the same ranking
                rows = [row[:i] + ((row[i] or 0) * 2 + 1,) + row[i + 1:] for row in t.rows]
                changed = Tables({**db.tables.tables, t.name: replace(t, rows=rows)}, db.tables.notes)
                assert kind.focus_scores(q, changed, everyone, "dqa") == kind.focus_scores(q, db.tables, everyone,
                                                                                            "dqa"), (t.name, i)
