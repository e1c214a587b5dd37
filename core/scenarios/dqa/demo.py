"""The built-in demo scenarios (assets/demo): small Locating and Building databases written by the project.

Each demo file gives only the inputs (nodes, flows, countries and their base powers; goods, buildings and
their per-level inputs and outputs). The stored state — total power, outgoing and ingoing values, flows;
current inputs, outputs and prices — is computed here by the simulators in ``rules`` mode, and each
question's label is the simulators' best decision, so the demo is consistent by construction.
"""
from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache

from core.config.settings import PROJECT_ROOT
from core.model.graph import graph_of_tables
from core.model.question import Database, Question, ScenarioKind
from core.scenarios.dqa.source import BUILDING_GRAPH, LOCATING_GRAPH
from sims import building as building_sim
from sims import locating as locating_sim
from sims.tables import Column, Table, Tables

DEMO_DIR = PROJECT_ROOT / "assets" / "demo"
#: The simulation mode of the demo scenarios (their stored state comes from a fresh run by the paper's rules).
DEMO_MODE = "rules"

LOCATING_QUESTION = ("Assume that you are the ruler of the country named \"{country}\". You and your competitors "
                     "trade on the network of {year}.\nYou have one merchant to place. Our home node is \"{home}\". "
                     "Where should I locate my merchant?")
LOCATING_GOAL = "My goal is maximizing {country}'s profit on home node, \"{home}\"."
BUILDING_QUESTION = "Which building id should we increase a level by 5 to maximally decrease the market price of {goods}?"


def _cols(*spec: str) -> tuple[Column, ...]:
    return tuple(Column(*s.split(":")) for s in spec)


def locating_question(n: int, spec: dict, q: dict, rules: str) -> Question:
    """Demo Locating question ``n`` of a demo file's ``q`` entry, worded as DQA's."""
    home = next(c["home_node"] for c in spec["countries"] if c["name"] == q["country"])
    fields = dict(country=q["country"], home=home, year=spec["year"])
    return Question("locating", "demo", n, n, rules, LOCATING_QUESTION.format(**fields), LOCATING_GOAL.format(**fields),
                    q["country"], home=home, year=spec["year"], database_ref=spec["name"])


def building_question(n: int, spec: dict, q: dict, rules: str) -> Question:
    """Demo Building question ``n`` of a demo file's ``q`` entry, worded as DQA's."""
    return Question("building", "demo", n, n, rules, BUILDING_QUESTION.format(goods=q["goods"]), "", spec["name"],
                    goods=q["goods"], year=spec["year"], database_ref=spec["name"])


def locating_tables(spec: dict) -> Tables:
    """Demo trade network with its stored state computed by one fresh pass without merchants."""
    homes = {c["name"]: c["home_node"] for c in spec["countries"]}
    presence = [(n, c, homes[c] == n, False, float(p), float(p)) for n, c, p in spec["presence"]]
    power = {n["name"]: 0.0 for n in spec["nodes"]}
    for n, _, _, _, p, _ in presence:
        power[n] += p
    tables = Tables({
        "country": Table("country", _cols("country_name:VARCHAR", "home_node:VARCHAR", "development:FLOAT"),
                         ("country_name",),
                         [(c["name"], c["home_node"], float(c["development"])) for c in spec["countries"]]),
        "trade_node": Table("trade_node", _cols("trade_node:VARCHAR", "local_value:FLOAT", "is_inland:BOOLEAN",
                                                "total_power:FLOAT", "outgoing:FLOAT", "ingoing:FLOAT"),
                            ("trade_node",),
                            [(n["name"], float(n["local_value"]), bool(n["is_inland"]), power[n["name"]], 0.0, 0.0)
                             for n in spec["nodes"]]),
        "flow": Table("flow", _cols("source:VARCHAR", "dest:VARCHAR", "flow:FLOAT"), ("source", "dest"),
                      [(s, d, 0.0) for s, d in spec["flows"]]),
        "node_country": Table("node_country", _cols("trade_node:VARCHAR", "country_name:VARCHAR", "is_home:BOOLEAN",
                                                    "has_merchant:BOOLEAN", "base_trading_power:FLOAT",
                                                    "calculated_trading_power:FLOAT"),
                              ("trade_node", "country_name"), presence),
    })
    state = locating_sim.what_if(tables, spec["countries"][0]["name"], (), DEMO_MODE)
    tables["trade_node"].rows = [(n, lv, inland, state.nodes[n].total_power, state.nodes[n].outgoing,
                                  state.nodes[n].ingoing) for n, lv, inland, *_ in tables["trade_node"].rows]
    tables["flow"].rows = [(s, d, state.flows.get((s, d), 0.0)) for s, d, _ in tables["flow"].rows]
    return tables


def building_tables(spec: dict) -> Tables:
    """Demo market with current inputs, outputs and prices computed by one fresh base run."""
    code = {g["name"]: i for i, g in enumerate(spec["goods"])}
    supply, demand = [], []
    for b in spec["buildings"]:
        level = int(b["level"])
        demand += [(code[g], b["id"], float(q) * level, 0.0, level) for g, q in b["inputs"].items()]
        supply += [(code[g], b["id"], float(q) * level, float(q) * level, level) for g, q in b["outputs"].items()]
    tables = Tables({
        "goods": Table("goods", _cols("goods_name:VARCHAR", "code:INT", "base_price:FLOAT", "current_price:FLOAT",
                                      "pop_demand:FLOAT"), ("code",),
                       [(g["name"], code[g["name"]], float(g["base_price"]), float(g["base_price"]),
                         float(g["pop_demand"])) for g in spec["goods"]]),
        "building": Table("building", _cols("id:INT", "name:VARCHAR", "level:INT"), ("id",),
                          [(b["id"], b["name"], int(b["level"])) for b in spec["buildings"]]),
        "supply": Table("supply", _cols("goods_id:INT", "building_id:INT", "max_supply:FLOAT",
                                        "current_output:FLOAT", "level:INT"), ("goods_id", "building_id"), supply),
        "demand": Table("demand", _cols("goods_id:INT", "building_id:INT", "max_demand:FLOAT",
                                        "current_input:FLOAT", "level:INT"), ("goods_id", "building_id"), demand),
    })
    state = building_sim.what_if(tables, {}, DEMO_MODE)
    names = {i: g for g, i in code.items()}
    tables["goods"].rows = [(g, c, bp, state.goods[g].price, pd) for g, c, bp, _, pd in tables["goods"].rows]
    tables["supply"].rows = [(g, b, ms, state.outputs[(b, names[g])], lv) for g, b, ms, _, lv in supply]
    tables["demand"].rows = [(g, b, md, state.inputs[(b, names[g])], lv) for g, b, md, _, lv in demand]
    return tables


#: Per scenario: its tables and question from a demo file, its graph mapping, and its ranking in the demo's mode.
_KINDS = {"locating": (locating_tables, locating_question, LOCATING_GRAPH,
                       lambda q, tables: locating_sim.rank(tables, q.country, DEMO_MODE)),
          "building": (building_tables, building_question, BUILDING_GRAPH,
                       lambda q, tables: building_sim.rank(tables, q.goods, DEMO_MODE))}


@lru_cache(maxsize=None)
def _load(scenario: ScenarioKind) -> tuple[list[Question], dict[str, Database]]:
    questions, databases = [], {}
    rules = (DEMO_DIR / f"rules_{scenario}.md").read_text(encoding="utf-8")
    for path in sorted(DEMO_DIR.glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        if spec["scenario"] != scenario:
            continue
        make_tables, make_question, mapping, rank = _KINDS[scenario]
        tables = make_tables(spec)
        db = Database(f"demo-{spec['name']}", scenario, tables, graph_of_tables(mapping, tables), [str(path)])
        databases[spec["name"]] = db
        for q in spec["questions"]:
            n = len(questions) + 1
            question = make_question(n, spec, q, rules)
            questions.append(replace(question, answer=rank(question, tables).label()))
    return questions, databases


def questions(scenario: ScenarioKind) -> list[Question]:
    """The demo questions of a scenario, numbered from 1."""
    return _load(scenario)[0]


def database(question: Question) -> Database:
    """A demo question's database."""
    return _load(question.scenario)[1][question.database_ref]
