"""The built-in demo scenarios: present without DQA, consistent by construction, ranked like DQA questions."""
import pytest

from core.scenarios import catalog
from core.scenarios.dqa import demo
from core.scenarios.dqa.source import SCENARIOS
from core.scenarios import candidates, ranking


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_demo_questions_have_labels_and_databases(scenario):
    qs = catalog.questions("demo", scenario)
    assert len(qs) >= 3
    for q in qs:
        db = catalog.database(q)
        r = ranking(q, db)
        assert q.answer is not None and r.label() == q.answer and q.answer in candidates(q, db)
        assert r.entries[0].score != r.entries[1].score  # a clear best decision, no tie
        assert db.graph.counts() and q.text


def test_demo_state_is_a_fixed_point_of_the_rules():
    """The stored prices are what the rules give: re-simulating without a decision changes nothing."""
    from sims import building

    q = demo.questions("building")[0]
    db = demo.database(q)
    r = building.rank(db.tables, q.goods, "rules")
    stored = next(row[3] for row in db.tables["goods"].rows if row[0] == q.goods)
    assert r.baseline == pytest.approx(stored, rel=1e-12)


def test_unknown_demo_question():
    from core.scenarios.dqa.source import DQAError

    with pytest.raises(DQAError, match="questions 1-3"):
        catalog.question("demo", "locating", 9)
