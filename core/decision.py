"""The decision check of a question: every candidate ranked by the simulator with its gain over no decision,
the pick of a stored run, and what one decision changes against no decision (to draw it on the network).

Pure functions of the scenario model and the simulators (the run pick reads the run store).
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from core.figures import building_title
from core.runs import RunStore
from core.scenario import Database, Question, candidates
from sims import building as building_sim
from sims import locating as locating_sim
from sims.ranking import Candidate, Ranking

#: One line on each simulation mode (docs/simulators.md has the details).
MODE_NOTES = {"dqa": "reproduces the benchmark's code, and so its labels (it starts from the stored state)",
              "rules": "follows the business rules as the paper's prompt states them (from a fresh state)"}
TINY = 1e-12


def score_name(question: Question) -> str:
    """What a candidate's score is: ``profit of SWE at baltic_sea`` or ``price of furniture``."""
    if question.scenario == "locating":
        return f"profit of {question.country} at {question.home}"
    return f"price of {question.goods}"


def candidate_names(question: Question, database: Database) -> dict[Candidate, str]:
    """A display name per candidate, in table order: the trade node, or ``1485 furniture manufactories (level 3)``."""
    if question.scenario == "locating":
        return {c: c for c in candidates(question, database)}
    return {r["id"]: f"{r['id']} {building_title(r['name'])} (level {r['level']})"
            for r in database.tables["building"].records()}


def ranking_table(ranking: Ranking, names: dict[Candidate, str]) -> pd.DataFrame:
    """Every candidate, best first: rank, decision, score, gain over no decision, regret and regret in %."""
    return pd.DataFrame(
        [(i, names.get(e.candidate, str(e.candidate)), e.score, ranking.gain(e.candidate), ranking.regret(e.candidate),
          ranking.relative_regret(e.candidate)) for i, e in enumerate(ranking.entries, 1)],
        columns=["rank", "decision", "score", "gain", "regret", "regret %"])


@dataclass(frozen=True)
class RunPick:
    """The decision of a stored run, or why there is none to mark."""

    run_id: str
    decision: Candidate | None
    note: str | None = None


def run_pick(run_id: str, question: Question, store: RunStore | None = None) -> RunPick:
    """The decision the run ``run_id`` made on ``question`` (from its stored outcome)."""
    try:
        record = (store or RunStore()).get(run_id)
    except KeyError:
        return RunPick(run_id, None, f"run {run_id} is not in the run store")
    settings = record.settings or {}
    ref = (settings.get("source", "dqa"), settings.get("scenario"), settings.get("question"))
    if ref != (question.source, question.scenario, question.number):
        return RunPick(run_id, None, f"run {run_id} answered {'/'.join(map(str, ref))}, not {question.id}")
    decision = (record.outcome or {}).get("decision")
    if decision is None:
        why = "named no candidate" if record.outcome else f"has no outcome yet (status {record.status})"
        return RunPick(run_id, None, f"run {run_id} {why}")
    return RunPick(run_id, decision)


@dataclass(frozen=True)
class Effect:
    """What one decision changes against no decision, both simulated in the same mode: the score's target
    (Locating: the country's profit at home; Building: the asked goods' price) and, per edge (source, dest)
    the flow it sends, or per goods the price."""

    decision: Candidate
    target: str
    before: float
    after: float
    changes: dict  # edge or goods -> (before, after)
    measure: str  # "flow" or "price"
    note: str | None = None  # where ``before`` differs from the ranking's baseline, why

    @property
    def deltas(self) -> dict:
        """After minus before, per edge or goods."""
        return {k: a - b for k, (b, a) in self.changes.items()}

    def biggest(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` largest changes (by size), without the unchanged ones."""
        rows = [(" → ".join(k) if isinstance(k, tuple) else k, b, a, a - b, 100 * (a - b) / abs(b) if b else None)
                for k, (b, a) in self.changes.items() if abs(a - b) > TINY * max(1.0, abs(b))]
        rows.sort(key=lambda r: -abs(r[3]))
        kind = "edge" if self.measure == "flow" else "goods"
        return pd.DataFrame(rows[:n], columns=[kind, f"{self.measure} before", f"{self.measure} after", "change",
                                               "change %"])


def what_if(question: Question, database: Database, decision: Candidate, mode: str) -> Effect:
    """Simulate ``decision`` (one more merchant at a trade node; 5 levels more for a building) and no decision."""
    if question.scenario == "locating":
        net = locating_sim.TradeNetwork(database.tables)
        before = locating_sim.what_if(net, question.country, (), mode)
        after = locating_sim.what_if(net, question.country, [(question.country, decision)], mode)
        changes = {k: (v, after.flows.get(k, 0.0)) for k, v in before.flows.items()}
        return Effect(decision, score_name(question), before.profit, after.profit, changes, "flow")
    market = building_sim.Market(database.tables)
    before = building_sim.what_if(market, {}, mode)
    after = building_sim.what_if(market, {decision: building_sim.LEVELS_ADDED}, mode)
    changes = {g: (s.price, after.goods[g].price) for g, s in before.goods.items()}
    note = None
    if mode == "dqa":  # the dqa ranking's baseline is the stored price (see sims.building.rank_all)
        goods = database.tables["goods"]
        stored = goods.column("current_price")[goods.column("goods_name").index(question.goods)]
        if abs(changes[question.goods][0] - stored) > TINY * max(1.0, abs(stored)):
            note = (f"The ranking's baseline is the stored price, {stored:.4g}: the dqa simulation without a decision "
                    "counts building demand twice (docs/simulators.md).")
    return Effect(decision, score_name(question), *changes[question.goods], changes, "price", note)
