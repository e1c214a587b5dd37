"""Ties in a simulator ranking: candidates whose scores are equal within 1e-9 relative share a rank."""
from __future__ import annotations

from sims.ranking import make_ranking, same_score


def _ranking(scores, higher=True):
    names = [f"c{i}" for i in range(len(scores))]
    return make_ranking("locating", "dqa", names, scores, baseline=0.0, threshold=0.0, higher_is_better=higher)


def test_equal_scores_share_the_best_position_of_their_group():
    r = _ranking([1.0, 3.0, 2.0, 2.0 * (1 + 1e-12), 2.0])
    assert [e.candidate for e in r.entries] == ["c1", "c3", "c2", "c4", "c0"]
    assert r.groups() == [(1, 1), (2, 3), (2, 3), (2, 3), (5, 1)]
    assert (r.rank_of("c4"), r.tied("c4"), r.position_of("c4")) == (2, 3, 4)
    assert r.rank_of("c0") == 5 and r.tied("c0") == 1 and not r.all_tied


def test_a_pick_tied_with_the_best_has_regret_zero():
    r = _ranking([5.0, 5.0 * (1 - 1e-11), 4.0], higher=True)
    assert r.rank_of("c1") == 1 and r.tied("c1") == 2 and r.regret("c1") == 0.0
    assert r.regret("c2") == 1.0


def test_every_candidate_tied_and_lower_is_better():
    r = _ranking([7.0, 7.0, 7.0], higher=False)
    assert r.all_tied and {r.rank_of(c) for c in ("c0", "c1", "c2")} == {1}
    assert not _ranking([1.0]).all_tied  # a single candidate is no tie


def test_same_score_is_relative_and_exact_at_zero():
    assert same_score(0.0, 0.0) and same_score(1e6, 1e6 + 1e-4) and not same_score(1.0, 1.0 + 1e-6)
    assert not same_score(0.0, 1e-15)
