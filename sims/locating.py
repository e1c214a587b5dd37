"""Locating simulator (EU4 trade): where one more merchant raises a country's profit at its home node.

Follows SIMULATOR_SPEC.md section 1. Two modes differ only in the parameters held by ``_Rules``:

* ``dqa`` (default) reproduces the benchmark's code: each re-simulation starts from the stored
  total power, outgoing and ingoing (the original never resets them), an inland merchant adds
  ``max(50, development)``, and profit = (local_value - outgoing + ingoing) * power share.
* ``rules`` follows the paper's business rules: a fresh state (ingoing = outgoing = 0; total power
  = the node's own power plus its rows' current powers, where the node's own power is the stored
  total_power minus its rows' base powers, i.e. the game's node total the first simulation started
  from), an inland merchant adds ``max(development / 3, 50)`` on top of the 2, and profit =
  (local_value + ingoing) * power share.

Each candidate is one re-simulation; candidates are evaluated together as numpy vectors. Ranking
propagates only the ancestors of the home node: nothing else reaches the profit there, so a
candidate outside them (or where the country has no row) scores exactly the baseline.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from sims.ranking import InputError, Ranking, check_mode, make_ranking, required_columns
from sims.tables import Tables

#: The trade value moving along an edge grows by this factor at the destination.
EDGE_GAIN = 1.05
#: A merchant adds this much power to its row before the 1.05 amplification (plus caravan inland).
MERCHANT_POWER = 2.0
MERCHANT_FACTOR = 1.05
CARAVAN_MIN = 50.0


@dataclass(frozen=True)
class _Rules:
    """The parameters in which the two modes differ."""

    carry_over: bool  # start from the stored total_power/outgoing/ingoing, else fresh (node's own power, 0, 0)
    caravan_divisor: float  # an inland merchant adds max(development / caravan_divisor, 50)
    subtract_outgoing: bool  # profit from (local - outgoing + ingoing), else (local + ingoing)


_RULES = {"dqa": _Rules(True, 1.0, True), "rules": _Rules(False, 3.0, False)}


#: The columns the simulation reads, per table (a value elsewhere cannot change a score).
READS = {"trade_node": ("trade_node", "local_value", "is_inland", "total_power", "outgoing", "ingoing"),
         "country": ("country_name", "home_node", "development"),
         "flow": ("source", "dest"),
         "node_country": ("trade_node", "country_name", "is_home", "has_merchant", "base_trading_power")}


def _columns(tables: Tables, table: str) -> list[list]:
    return required_columns(tables, "Locating", table, *READS[table])


class TradeNetwork:
    """The Locating tables compiled for simulation: nodes, edges and node_country rows in table order."""

    def __init__(self, tables: Tables):
        names, local, inland, tp, out, inn = _columns(tables, "trade_node")
        self.names: list[str] = names
        self.index = {n: i for i, n in enumerate(names)}
        self.local, self.inland = local, inland
        self.stored = (np.array(tp, float), np.array(out, float), np.array(inn, float))
        countries, homes, devs = _columns(tables, "country")
        self.home = dict(zip(countries, homes))
        self.development = dict(zip(countries, devs))
        self.dests: list[list[int]] = [[] for _ in names]
        self.sources: list[list[int]] = [[] for _ in names]
        for s, d in zip(*_columns(tables, "flow")):
            si, di = self.node_index(s, "flow source"), self.node_index(d, "flow dest")
            if di not in self.dests[si]:
                self.dests[si].append(di)
                self.sources[di].append(si)
        rows = _columns(tables, "node_country")
        self.row_node = [self.node_index(n, "node_country row") for n in rows[0]]
        self.row_country, self.row_is_home, self.row_merchant, self.row_base = rows[1:]
        self.rows_at: list[list[int]] = [[] for _ in names]
        self.row_at: dict[tuple[int, str], int] = {}
        for r, (n, c) in enumerate(zip(self.row_node, self.row_country)):
            self.rows_at[n].append(r)
            self.row_at.setdefault((n, c), r)
        self.own_power = []  # stored total minus the node's rows' base powers: the game's node total
        for n, rows_here in enumerate(self.rows_at):
            own = float(tp[n])
            for r in rows_here:
                own -= self.row_base[r]
            self.own_power.append(own)
        self.stored_merchants = [r for r, m in enumerate(self.row_merchant) if m]
        self.topo = self._topological_order()
        self._ancestors: dict[int, set[int]] = {}
        self._terms: dict[tuple[_Rules, frozenset[int]], list] = {}

    def node_index(self, name: str, what: str = "name") -> int:
        """Index of a trade node; InputError naming ``what`` if unknown."""
        try:
            return self.index[name]
        except KeyError:
            raise InputError(f"{what} names unknown trade node {name!r}") from None

    def _topological_order(self) -> list[int]:
        pending = [len(s) for s in self.sources]
        ready = deque(n for n, p in enumerate(pending) if p == 0)
        order = []
        while ready:
            n = ready.popleft()
            order.append(n)
            for d in self.dests[n]:
                pending[d] -= 1
                if pending[d] == 0:
                    ready.append(d)
        if len(order) < len(self.names):
            stuck = sorted(self.names[n] for n, p in enumerate(pending) if p)
            raise InputError(f"the flow graph has a cycle through {', '.join(stuck[:5])}")
        return order

    def ancestors(self, node: int) -> set[int]:
        """Nodes from which ``node`` is reachable (not including itself)."""
        found = self._ancestors.get(node)
        if found is None:
            found, todo = set(), [node]
            while todo:
                for s in self.sources[todo.pop()]:
                    if s not in found:
                        found.add(s)
                        todo.append(s)
            self._ancestors[node] = found
        return found

    def home_of(self, country: str) -> int:
        """Index of the country's home node; InputError unless it has a row there."""
        if country not in self.home:
            raise InputError(f"unknown country {country!r}")
        home = self.node_index(self.home[country], f"home_node of {country}")
        if (home, country) not in self.row_at:
            raise InputError(f"country {country} has no node_country row at its home node {self.names[home]}")
        return home

    def merchants_without(self, countries: set[str]) -> frozenset[int]:
        """Rows with a stored merchant, except those of ``countries`` (whose merchants are cleared)."""
        return frozenset(r for r in self.stored_merchants if self.row_country[r] not in countries)

    def power(self, row: int, merchant: bool, rules: _Rules) -> float:
        """Trading power of a row (spec 1.3 step 1)."""
        base = self.row_base[row]
        if not merchant:
            return base
        if self.inland[self.row_node[row]]:
            caravan = max(self.development.get(self.row_country[row], 0.0) / rules.caravan_divisor, CARAVAN_MIN)
            return MERCHANT_FACTOR * ((base + MERCHANT_POWER) + caravan)
        return MERCHANT_FACTOR * (base + MERCHANT_POWER)

    def route(self, node: int, home: str) -> int | None:
        """The dest of ``node`` a merchant steers towards ``home``: the direct edge, else the first dest
        (flow-table order) from which home is reachable; None if home is unreachable."""
        target = self.index.get(home)
        if target is None:
            return None
        dests = self.dests[node]
        if target in dests:
            return target
        upstream = self.ancestors(target)
        return next((d for d in dests if d in upstream), None)

    def all_node_terms(self, merchants: frozenset[int], rules: _Rules) -> list[tuple[float, float, list[float]]]:
        """``node_terms`` of every node, remembered for the last few merchant sets."""
        key = (rules, merchants)
        terms = self._terms.get(key)
        if terms is None:
            if len(self._terms) >= 8:
                self._terms.clear()
            terms = self._terms[key] = [self.node_terms(n, merchants, rules) for n in range(len(self.names))]
        return terms

    def node_terms(self, node: int, merchants: frozenset[int], rules: _Rules) -> tuple[float, float, list[float]]:
        """Total power, non-home power ("overall") and steer per dest of a node under a merchant set."""
        total = float(self.stored[0][node]) if rules.carry_over else self.own_power[node]
        overall = 0.0
        steer = [0.0] * len(self.dests[node])
        for r in self.rows_at[node]:
            merchant = r in merchants
            p = self.power(r, merchant, rules)
            total += p
            if not self.row_is_home[r]:
                overall += p
                if merchant:
                    dest = self.route(node, self.home.get(self.row_country[r]))
                    if dest is not None:
                        j = self.dests[node].index(dest)
                        steer[j] += p
        return total, overall, steer


@dataclass(frozen=True)
class _Pass:
    """Result of one trade pass per scenario: arrays (scenarios x nodes), columns in ``nodes`` order."""

    nodes: list[int]
    total_power: np.ndarray
    outgoing: np.ndarray
    ingoing: np.ndarray
    flows: dict[tuple[int, int], np.ndarray]


def _split(out: np.ndarray, steer: list[float], n_dests: int) -> list[np.ndarray]:
    """Outflow per dest: by steer share when any merchant steers, else evenly (spec 1.3 step 3)."""
    total = 0.0
    for s in steer:
        total += s
    if total != 0:
        return [out * (s / total) for s in steer]
    return [out / n_dests] * n_dests


def _trade_pass(net: TradeNetwork, rules: _Rules, base: frozenset[int], scenarios: list[frozenset[int]],
                nodes: list[int], keep_flows: bool = False) -> _Pass:
    """One trade pass per scenario (a set of rows holding a merchant) over ``nodes``, which must be
    in topological order and contain all ancestors of each of its nodes. Node terms are computed
    once for ``base`` and again only where a scenario's merchants differ from it."""
    k, width = len(scenarios), len(nodes)
    column = {n: i for i, n in enumerate(nodes)}
    every_node = net.all_node_terms(base, rules)
    base_terms = [every_node[n] for n in nodes]
    total = np.tile([t[0] for t in base_terms], (k, 1))
    overall = np.tile([t[1] for t in base_terms], (k, 1))
    steer_of: dict[int, dict[int, list[float]]] = {}  # node column -> scenario -> steer, where changed
    for s, merchants in enumerate(scenarios):
        for n in {net.row_node[r] for r in merchants ^ base}:
            i = column.get(n)
            if i is not None:
                total[s, i], overall[s, i], steer_of.setdefault(i, {})[s] = net.node_terms(n, merchants, rules)
    _, stored_out, stored_in = net.stored
    if rules.carry_over:
        outgoing, ingoing = np.tile(stored_out[nodes], (k, 1)), np.tile(stored_in[nodes], (k, 1))
    else:
        outgoing, ingoing = np.zeros((k, width)), np.zeros((k, width))
    flows = {}
    for i, n in enumerate(nodes):
        tp = total[:, i]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(tp != 0, (net.local[n] + ingoing[:, i]) * (overall[:, i] / tp), outgoing[:, i])
        outgoing[:, i] = out
        dests = net.dests[n]
        if not dests:
            continue
        parts = np.array(_split(out, base_terms[i][2], len(dests)))
        for s, steer in steer_of.get(i, {}).items():
            parts[:, s] = [p[0] for p in _split(out[s:s + 1], steer, len(dests))]
        for d, part in zip(dests, parts):
            if keep_flows:
                flows[(n, d)] = part
            j = column.get(d)
            if j is not None:
                ingoing[:, j] += EDGE_GAIN * part
    return _Pass(nodes, total, outgoing, ingoing, flows)


def _profit(net: TradeNetwork, rules: _Rules, result: _Pass, country: str, home: int,
            scenarios: list[frozenset[int]]) -> np.ndarray:
    """Profit of ``country`` at ``home`` per scenario (spec 1.3 step 4)."""
    i = result.nodes.index(home)
    row = net.row_at[(home, country)]
    calc = np.array([net.power(row, row in m, rules) for m in scenarios])
    value = net.local[home] - result.outgoing[:, i] if rules.subtract_outgoing else net.local[home]
    return (value + result.ingoing[:, i]) * (calc / result.total_power[:, i])


def _network(tables: Tables | TradeNetwork) -> TradeNetwork:
    return tables if isinstance(tables, TradeNetwork) else TradeNetwork(tables)


def candidates(tables: Tables | TradeNetwork, home: str) -> list[str]:
    """Every trade node except ``home``, in table order (nodes where the country has no row included)."""
    return [n for n in _network(tables).names if n != home]


def rank(tables: Tables | TradeNetwork, country: str, mode: str = "dqa") -> Ranking:
    """Rank every candidate node for one more merchant of ``country`` by its profit at its home node.

    Scores are profits (higher is better). ``baseline`` is the profit with no merchant of the country
    placed, re-simulated the same way. ``threshold`` is 0: the benchmark picks the first most profitable
    candidate, in table order, only if its profit is positive.
    """
    # re-simulated in dqa mode from the stored state, in rules mode from the fresh state
    net = _network(tables)
    names = candidates(net, net.names[net.home_of(country)])
    scores, baseline = _scores(net, country, names, mode)
    return make_ranking("locating", mode, names, scores, baseline=baseline, threshold=0.0, higher_is_better=True)


def scores(tables: Tables | TradeNetwork, country: str, names: list[str], mode: str = "dqa") -> list[float]:
    """The scores ``rank`` gives the candidate nodes ``names`` (the same figures), simulating only theirs."""
    return _scores(_network(tables), country, names, mode)[0]


def _scores(net: TradeNetwork, country: str, names: list[str], mode: str) -> tuple[list[float], float]:
    """Profits of a merchant placed at each of ``names`` (a node where the country cannot steer: the baseline) and
    the baseline, from one trade pass over the home node's upstream with one scenario per node that can."""
    rules = _RULES[check_mode(mode)]
    home = net.home_of(country)
    base = net.merchants_without({country})
    upstream = net.ancestors(home)
    nodes = [n for n in net.topo if n in upstream or n == home]
    wanted = {net.index.get(n) for n in names}
    movers = [n for n in net.topo if n in upstream and (n, country) in net.row_at and n in wanted]
    scenarios = [base] + [base | {net.row_at[(n, country)]} for n in movers]
    profits = _profit(net, rules, _trade_pass(net, rules, base, scenarios, nodes), country, home, scenarios)
    score = dict(zip(movers, profits[1:].tolist()))
    baseline = float(profits[0])
    return [score.get(net.index.get(n), baseline) for n in names], baseline


@dataclass(frozen=True)
class NodeState:
    """One trade node after a pass."""

    total_power: float
    outgoing: float
    ingoing: float


@dataclass(frozen=True)
class TradeState:
    """The whole network after one pass with given merchants (for drawing a decision's effect).

    ``flows`` holds the value each edge carries out of its source; its dest receives 1.05 times it.
    """

    mode: str
    country: str
    home: str
    merchants: tuple[tuple[str, str], ...]  # (country, trade_node) rows that hold a merchant
    nodes: dict[str, NodeState]  # in table order
    flows: dict[tuple[str, str], float]  # (source, dest) -> value sent
    profit: float  # of ``country`` at ``home``


def what_if(tables: Tables | TradeNetwork, country: str, placements: Iterable[tuple[str, str]] = (),
            mode: str = "dqa") -> TradeState:
    """Simulate one pass with merchants at ``placements`` ((country, trade_node) pairs) and report every node.

    The stored merchants of ``country`` and of every placed country are cleared first; a placement
    where that country has no node_country row changes nothing. With ``[(country, node)]`` the profit
    equals ``rank``'s score for ``node``; with no placements, ``rank``'s baseline.
    """
    rules, net = _RULES[check_mode(mode)], _network(tables)
    home = net.home_of(country)
    placements = list(placements)
    for c, node in placements:
        if c not in net.home:
            raise InputError(f"unknown country {c!r} in placement ({c}, {node})")
        net.node_index(node, f"placement ({c}, {node})")
    base = net.merchants_without({country} | {c for c, _ in placements})
    merchants = base | {net.row_at[key] for c, n in placements if (key := (net.index[n], c)) in net.row_at}
    result = _trade_pass(net, rules, merchants, [merchants], net.topo, keep_flows=True)
    profit = float(_profit(net, rules, result, country, home, [merchants])[0])
    column = {n: i for i, n in enumerate(result.nodes)}
    nodes = {name: NodeState(float(result.total_power[0, column[i]]), float(result.outgoing[0, column[i]]),
                             float(result.ingoing[0, column[i]])) for i, name in enumerate(net.names)}
    flows = {(net.names[s], net.names[d]): float(v[0]) for (s, d), v in result.flows.items()}
    held = tuple((net.row_country[r], net.names[net.row_node[r]]) for r in sorted(merchants))
    return TradeState(mode, country, net.names[home], held, nodes, flows, profit)
