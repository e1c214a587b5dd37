"""Building simulator (Victoria 3 market): which building's +5 levels lowers a goods' price the most.

Follows SIMULATOR_SPEC.md section 2. The modes differ in one parameter:

* ``dqa`` (default) reproduces the benchmark's code, which never resets its accumulators: building
  demand and the cycle-1 supply seed start from the leftovers of the stored base run (BD0, S0).
* ``rules`` follows the paper's business rules from a fresh state: both start from 0. With no
  level change this reproduces every stored current_price bit for bit.

All candidates are simulated together as columns of numpy arrays. Every sequential sum is an
``np.bincount``, which adds in input order, so prices match the original code bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from sims.ranking import InputError, Ranking, check_mode, make_ranking, required_columns
from sims.tables import Tables

#: Levels added by a Building decision.
LEVELS_ADDED = 5
#: Market cycles per simulation.
CYCLES = 10
#: Price elasticity: price = base * (1 + ELASTICITY * (demand - supply) / max(demand, supply)).
ELASTICITY = 0.75

#: Scenarios simulated together (bounds memory; results do not depend on it).
SCENARIO_BLOCK = 256

_CARRY_OVER = {"dqa": True, "rules": False}


#: The columns the simulation reads, per table (a value elsewhere cannot change a price).
READS = {"goods": ("goods_name", "code", "base_price", "current_price", "pop_demand"),
         "building": ("id", "level"),
         "demand": ("goods_id", "building_id", "max_demand"),
         "supply": ("goods_id", "building_id", "max_supply", "current_output")}


def _columns(tables: Tables, table: str) -> list[list]:
    return required_columns(tables, "Building", table, *READS[table])


class _GroupSums:
    """Sequential sums per group of the rows of (rows x scenarios) arrays: ``((start + v1) + v2) + ...``
    in row order, giving (groups x scenarios).

    ``np.bincount`` accumulates in input order, so a leading block of start values (one per group,
    default 0) makes every sum start from them.
    """

    def __init__(self, groups: np.ndarray, n_groups: int, n_scenarios: int):
        self.bins = (groups[:, None] * n_scenarios + np.arange(n_scenarios)).ravel()
        self.shape = (n_groups, n_scenarios)

    def __call__(self, values: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        size = self.shape[0] * self.shape[1]
        bins, weights = self.bins, values.ravel()
        if start is not None:
            bins = np.concatenate([np.arange(size), bins])
            weights = np.concatenate([np.repeat(start, self.shape[1]), weights])
        return np.bincount(bins, weights=weights, minlength=size).reshape(self.shape)


class Market:
    """The Building tables compiled for simulation (goods, buildings and rows in table order)."""

    def __init__(self, tables: Tables):
        names, codes, base, current, pop = _columns(tables, "goods")
        self.goods: list[str] = names
        self.base_price, self.current_price, self.pop_demand = (np.array(c, float) for c in (base, current, pop))
        self.goods_index = {g: i for i, g in enumerate(names)}
        by_code = {c: i for i, c in enumerate(codes)}
        self.building_ids, self.levels = _columns(tables, "building")
        self.building_index = {b: i for i, b in enumerate(self.building_ids)}
        (self.demand_goods, self.demand_building, self.max_demand), _ = self._rows(tables, "demand", by_code)
        (self.supply_goods, self.supply_building, self.max_supply), (self.stored_output,) = self._rows(
            tables, "supply", by_code)
        n_inputs = np.bincount(self.demand_building, minlength=len(self.building_ids))
        self.n_inputs = np.maximum(n_inputs, 1).astype(float)  # divisor of the input ratio
        self.output_follows_inputs = n_inputs[self.supply_building] > 0
        self.demand_rows_of = self._rows_by_building(self.demand_building)
        self.supply_rows_of = self._rows_by_building(self.supply_building)
        self.leftover_demand = _GroupSums(self.demand_goods, len(names), 1)(self.max_demand[:, None])[:, 0]
        self.leftover_supply = _GroupSums(self.supply_goods, len(names), 1)(self.stored_output[:, None])[:, 0]

    def _rows(self, tables: Tables, table: str, by_code: dict):
        goods_ids, building_ids, amounts, *more = _columns(tables, table)
        try:
            goods = np.array([by_code[g] for g in goods_ids], dtype=np.intp)
        except KeyError as e:
            raise InputError(f"{table} row names unknown goods code {e.args[0]}") from None
        try:
            buildings = np.array([self.building_index[b] for b in building_ids], dtype=np.intp)
        except KeyError as e:
            raise InputError(f"{table} row names unknown building id {e.args[0]}") from None
        return (goods, buildings, np.array(amounts, float)), [np.array(m, float) for m in more]

    def _rows_by_building(self, buildings: np.ndarray) -> list[np.ndarray]:
        order = np.argsort(buildings, kind="stable")
        bounds = np.searchsorted(buildings[order], np.arange(len(self.building_ids) + 1))
        return [order[bounds[b]:bounds[b + 1]] for b in range(len(self.building_ids))]

    def goods_of(self, goods: str) -> int:
        """Index of a goods by name; InputError if unknown."""
        if goods not in self.goods_index:
            raise InputError(f"unknown goods {goods!r}")
        return self.goods_index[goods]

    def factor_of(self, building_id, added: int) -> tuple[int, float]:
        """The index of the building ``building_id`` and its ``level_factor`` for ``added`` levels; InputError if
        the id is unknown."""
        if building_id not in self.building_index:
            raise InputError(f"unknown building id {building_id!r}")
        b = self.building_index[building_id]
        return b, self.level_factor(b, added)

    def level_factor(self, building: int, added: int) -> float:
        """(L + added) / L: demand and supply are proportional to level (spec 2.3)."""
        level = self.levels[building]
        if level == 0:
            raise InputError(f"building {self.building_ids[building]} has level 0; its rows cannot be scaled")
        return (level + added) / level


@dataclass(frozen=True)
class _Run:
    """Result of one simulation per scenario, one column per scenario: (goods x scenarios), (rows x scenarios)."""

    demand: np.ndarray
    supply: np.ndarray
    price: np.ndarray
    current_input: np.ndarray
    current_output: np.ndarray


def _simulate(market: Market, carry_over: bool, scenarios: list[dict[int, float]]) -> _Run:
    """Simulate every scenario (building index -> level factor) for CYCLES cycles (spec 2.3)."""
    k, n_goods, n_buildings = len(scenarios), len(market.goods), len(market.building_ids)
    max_demand = np.repeat(market.max_demand[:, None], k, axis=1)
    max_supply = np.repeat(market.max_supply[:, None], k, axis=1)
    for s, factors in enumerate(scenarios):
        for b, f in factors.items():
            rows = market.demand_rows_of[b]
            max_demand[rows, s] = f * market.max_demand[rows]
            rows = market.supply_rows_of[b]
            max_supply[rows, s] = f * market.max_supply[rows]
    demand_start = market.leftover_demand if carry_over else None
    supply_start = market.leftover_supply if carry_over else None
    per_demanded_goods = _GroupSums(market.demand_goods, n_goods, k)
    per_supplied_goods = _GroupSums(market.supply_goods, n_goods, k)
    per_building = _GroupSums(market.demand_building, n_buildings, k)
    demand = market.pop_demand[:, None] + per_demanded_goods(max_demand, demand_start)
    supply = per_supplied_goods(max_supply, supply_start)
    row_demand = demand[market.demand_goods]
    output = np.repeat(market.stored_output[:, None], k, axis=1)
    follows = market.output_follows_inputs
    follow_max, follow_building = max_supply[follows], market.supply_building[follows]
    for _ in range(CYCLES):
        current_input = (max_demand * supply[market.demand_goods]) / row_demand
        satisfied = np.minimum(current_input, max_demand) / max_demand
        ratio = per_building(satisfied) / market.n_inputs[:, None]
        output[follows] = follow_max * ratio[follow_building]
        supply = per_supplied_goods(output)
    base_price = market.base_price[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        price = base_price * (1 + (ELASTICITY * (demand - supply)) / np.maximum(demand, supply))
    price = np.where((demand == 0) & (supply == 0), base_price, price)
    return _Run(demand, supply, price, current_input, output)


def _market(tables: Tables | Market) -> Market:
    return tables if isinstance(tables, Market) else Market(tables)


def candidates(tables: Tables | Market) -> list[int]:
    """Every building id, in table order (including buildings unrelated to the goods)."""
    return list(_market(tables).building_ids)


def rank_all(tables: Tables | Market, mode: str = "dqa", goods: list[str] | None = None) -> dict[str, Ranking]:
    """Rank every candidate for each of ``goods`` (default: all) from one simulation per candidate.

    Scores: prices after the candidate's +5 levels (lower is better). ``threshold`` is the stored
    current_price: the benchmark picks the first cheapest candidate, in table order, only if strictly below it.
    ``baseline``, the no-decision price: the stored current_price in dqa mode, re-simulated in rules mode.
    """
    # dqa mode's re-simulation without a change double-counts building demand, so it is no meaningful "no decision"
    # figure; rules mode's equals the stored price on DQA data
    carry_over, market = _CARRY_OVER[check_mode(mode)], _market(tables)
    wanted = [market.goods_of(g) for g in (market.goods if goods is None else goods)]
    ids = list(market.building_ids)
    movers = [b for b in range(len(ids)) if len(market.demand_rows_of[b]) or len(market.supply_rows_of[b])]
    scenarios = [{}] + [{b: market.level_factor(b, LEVELS_ADDED)} for b in movers]
    price = np.concatenate([_simulate(market, carry_over, scenarios[i:i + SCENARIO_BLOCK]).price
                            for i in range(0, len(scenarios), SCENARIO_BLOCK)], axis=1)
    column = np.zeros(len(ids), dtype=np.intp)  # a building without rows changes nothing: column 0
    column[movers] = np.arange(1, len(movers) + 1)
    baseline = market.current_price if carry_over else price[:, 0]
    return {market.goods[g]: make_ranking("building", mode, ids, price[g, column].tolist(), baseline=baseline[g],
                                          threshold=market.current_price[g], higher_is_better=False)
            for g in wanted}


def rank(tables: Tables | Market, goods: str, mode: str = "dqa") -> Ranking:
    """Rank every building by the price of ``goods`` after adding 5 levels to it (see ``rank_all``)."""
    return rank_all(tables, mode, [goods])[goods]


def prices(tables: Tables | Market, goods: str, building_ids: list, mode: str = "dqa") -> list[float]:
    """The price of ``goods`` after adding 5 levels to each building of ``building_ids`` (the figures ``rank``
    gives them; InputError for an unknown id or a building of level 0), from one simulation of those scenarios."""
    carry_over, market = _CARRY_OVER[check_mode(mode)], _market(tables)
    g = market.goods_of(goods)
    scenarios = [dict([market.factor_of(building_id, LEVELS_ADDED)]) for building_id in building_ids]
    return _simulate(market, carry_over, scenarios).price[g].tolist() if scenarios else []


@dataclass(frozen=True)
class GoodsState:
    """One goods after the simulation."""

    demand: float
    supply: float
    price: float


@dataclass(frozen=True)
class MarketState:
    """The whole market after simulating given level changes (for drawing a decision's effect)."""

    mode: str
    level_changes: dict[int, int]
    goods: dict[str, GoodsState]  # in table order
    outputs: dict[tuple[int, str], float]  # (building id, goods) -> current_output of its supply row
    inputs: dict[tuple[int, str], float]  # (building id, goods) -> current_input of its demand row


def what_if(tables: Tables | Market, level_changes: Mapping[int, int] | None = None, mode: str = "dqa") -> MarketState:
    """Simulate the market with levels added to buildings (building id -> levels) and report every goods and row.

    ``{b: 5}`` gives the price ``rank`` scores for building ``b``; no change gives the re-simulated
    no-decision state (rules mode: the stored prices; dqa mode: the double-counted re-simulation).
    """
    carry_over, market = _CARRY_OVER[check_mode(mode)], _market(tables)
    changes = dict(level_changes or {})
    factors = dict(market.factor_of(building_id, added) for building_id, added in changes.items())
    run = _simulate(market, carry_over, [factors])
    goods = {g: GoodsState(float(run.demand[i, 0]), float(run.supply[i, 0]), float(run.price[i, 0]))
             for i, g in enumerate(market.goods)}
    ids, names = market.building_ids, market.goods

    def by_row(buildings, goods_of_row, values):
        return {(ids[b], names[g]): float(v) for b, g, v in zip(buildings, goods_of_row, values[:, 0])}

    return MarketState(mode, changes, goods,
                       by_row(market.supply_building, market.supply_goods, run.current_output),
                       by_row(market.demand_building, market.demand_goods, run.current_input))
