"""The two DQA decision problems as scenario types: Locating (where to place a merchant in a trade network) and
Building (which building to raise to lower a goods' price). Their questions come from the DQA benchmark and the
built-in demo (assets/demo); their simulators are the DQA-faithful ones of ``sims`` (unchanged)."""
from __future__ import annotations

import re

from core.model.question import DecisionWords
from core.scenarios.dqa import demo, examples, paper, source
from core.scenarios.dqa.source import dqa_benchmark
from core.scenarios.base import Effect, ScenarioType, Source, ViewOption
from sims import building as building_sim
from sims import locating as locating_sim
from sims.ranking import MODES

MODE_NOTES = {"dqa": "reproduces the benchmark's code, and so its labels (it starts from the stored state)",
              "rules": "follows the business rules as the paper's prompt states them (from a fresh state)"}
SOURCES = (Source("dqa", "DQA benchmark"), Source("demo", "Built-in demo scenarios"))
TINY = 1e-12
#: Locating views (``figures.trade_network(scope=...)``); here, not in figures, so that the page draws its view
#: controls before it loads plotly.
TRADE_SCOPES = {"neighbourhood": "Neighbourhood", "all": "Whole network"}
#: Building detail levels for ``figures.market(hops=...)``: what each adds around the asked goods.
MARKET_DETAIL = {1: "its suppliers and consumers", 2: "+ their inputs and outputs",
                 3: "+ the buildings making those inputs"}


class _DQAType(ScenarioType):
    sources = SOURCES
    modes = MODES
    mode_notes = MODE_NOTES
    can_check = True

    def questions(self, source: str, root=None) -> list:
        if source == "demo":
            return demo.questions(self.name)
        return dqa_benchmark(root).questions(self.name)

    def database(self, question, root=None):
        if question.source == "demo":
            return demo.database(question)
        return dqa_benchmark(root).database(question)

    def notes(self, question, root=None) -> list[str]:
        return dqa_benchmark(root).notes(question) if question.source == "dqa" else []

    def default_mode(self, question) -> str:
        return "dqa" if question.source == "dqa" else "rules"


class Locating(_DQAType):
    name, title = "locating", "Locating"
    description = "Where should a country place one more merchant on a trade network to raise its profit at home?"
    paper_n = 200
    critical_columns = ("ingoing", "total_power")
    candidate_source = re.compile(r"\b(?:flow|source)\b", re.I)
    change_caption = ("Blue edges carry more flow, orange less; an edge that skips columns bows around the nodes it "
                      "passes.")
    graph_mapping = source.LOCATING_GRAPH
    paper_schemas = paper.LOCATING_SCHEMAS

    def paper_question(self, question) -> str:
        return paper.locating_question(question)

    @property
    def words(self):
        return DecisionWords("name")

    @property
    def planner_examples(self):
        return examples.LOCATING

    @property
    def more_planner_examples(self):
        return examples.LOCATING_MORE

    def candidates(self, question, database) -> list:
        return locating_sim.candidates(database.tables, question.home)

    def target(self, question) -> str:
        return f"{question.country}, home node {question.home}"

    def score_name(self, question) -> str:
        return f"profit of {question.country} at {question.home}"

    def ranking(self, question, database, mode=None):
        return locating_sim.rank(database.tables, question.country, mode or self.default_mode(question))

    def what_if(self, question, database, decision, mode):
        net = locating_sim.TradeNetwork(database.tables)
        before = locating_sim.what_if(net, question.country, (), mode)
        after = locating_sim.what_if(net, question.country, [(question.country, decision)], mode)
        changes = {k: (v, after.flows.get(k, 0.0)) for k, v in before.flows.items()}
        return Effect(decision, self.score_name(question), before.profit, after.profit, changes, "flow")

    def evidence_rows(self, question, tables, focus):
        out, nodes = [], set(focus) | {question.home}
        for i, r in enumerate(tables["trade_node"].records()):
            if r["trade_node"] in nodes:
                out.append(("trade_node", i, ((r["trade_node"],),), r["trade_node"]))
        for i, r in enumerate(tables["node_country"].records()):
            if r["trade_node"] in nodes and r["country_name"] == question.country:
                out.append(("node_country", i, ((r["trade_node"],), (r["country_name"],)),
                            f"{r['country_name']} at {r['trade_node']}"))
        for i, r in enumerate(tables["flow"].records()):
            if r["source"] in nodes:
                out.append(("flow", i, ((r["source"],), (r["dest"],)), f"{r['source']} → {r['dest']}"))
        for i, r in enumerate(tables["country"].records()):
            if r["country_name"] == question.country:
                out.append(("country", i, ((r["country_name"],),), r["country_name"]))
        return out

    def focus_scores(self, question, tables, focus, mode):
        return locating_sim.scores(tables, question.country, focus, mode)

    def reads(self):
        return locating_sim.READS

    def view_options(self):
        return [ViewOption("scope", "Show", dict(TRADE_SCOPES), "neighbourhood",
                           "The neighbourhood: the home node, its upstream nodes within a few hops and the nodes "
                           "where the country trades (or the node searched for, and its upstream nodes).",
                           widget="buttons")]

    def network(self, question, database, *, pick=None, best=None, pick_label="agent's pick", change=None,
                around=None, scope="neighbourhood", **options):
        from core.scenarios.dqa import figures  # plotly: heavy, only for drawing

        return figures.trade_network(question, database, pick=pick, best=best, pick_label=pick_label,
                                     flow_change=change, scope=scope,
                                     around=str(around).removeprefix("trade_node:") if around else None)

    def node_names(self, question, database):
        return {f"trade_node:{n}": n.replace("_", " ") for n in database.tables["trade_node"].column("trade_node")}

    def node_rows(self, database, node_id):
        from core.scenarios.dqa import figures  # plotly: heavy, only for drawing

        return figures.node_rows(database, node_id)

    def own_row(self, question, table, record):
        return record.get("country_name") == question.country


class Building(_DQAType):
    name, title = "building", "Building"
    description = "Which building should be raised by 5 levels to lower the market price of a goods the most?"
    paper_n = 101
    critical_columns = ("current_output", "pop_demand")
    candidate_source = re.compile(r"\bsupply\b", re.I)
    graph_mapping = source.BUILDING_GRAPH
    paper_schemas = paper.BUILDING_SCHEMAS

    def paper_question(self, question) -> str:
        return paper.building_question(question)

    @property
    def words(self):
        return DecisionWords(
            "id", id_cues=("building", "buildings", "id", "ids", "#", "no", "number"),
            quantity_before=("level", "levels", "by", "price", "prices", "to", "from", "of", "at", "$", "£", "€", "x",
                             "year", "tier", "lvl", "pop", "demand", "output", "outputs", "costs", "cost"),
            quantity_after=("level", "levels", "%", "percent", "units", "unit", "x", "times", "pounds", "£", "$",
                            "workers", "pops", "goods", "market", "save", "game"),
            better=("more", "better", "lower", "greater", "larger", "bigger", "further", "stronger", "cheaper"),
            worse=("less", "worse", "higher", "smaller", "fewer", "weaker", "dearer"))

    @property
    def planner_examples(self):
        return examples.BUILDING

    @property
    def more_planner_examples(self):
        return examples.BUILDING_MORE

    def candidates(self, question, database) -> list:
        return building_sim.candidates(database.tables)

    def candidate_names(self, question, database) -> dict:
        from core.scenarios.dqa.figures import building_title  # plotly: heavy, only for names

        return {r["id"]: f"{r['id']} {building_title(r['name'])} (level {r['level']})"
                for r in database.tables["building"].records()}

    titles_need_data = True

    def decision_title(self, question, decision, database=None) -> str:
        from core.scenarios.dqa.figures import building_title  # plotly: heavy, only for names

        if database is not None:
            for r in database.tables["building"].records():
                if r["id"] == decision:
                    return f"{r['id']} {building_title(r['name'])}"
        return f"building {decision}"

    def target(self, question) -> str:
        return f"price of {question.goods} in {question.country}"

    def score_name(self, question) -> str:
        return f"price of {question.goods}"

    def ranking(self, question, database, mode=None):
        return building_sim.rank(database.tables, question.goods, mode or self.default_mode(question))

    def what_if(self, question, database, decision, mode):
        market = building_sim.Market(database.tables)
        before = building_sim.what_if(market, {}, mode)
        after = building_sim.what_if(market, {decision: building_sim.LEVELS_ADDED}, mode)
        changes = {g: (s.price, after.goods[g].price) for g, s in before.goods.items()}
        note = None
        if mode == "dqa":  # the dqa ranking's baseline is the stored price (see sims.building.rank_all)
            goods = database.tables["goods"]
            stored = goods.column("current_price")[goods.column("goods_name").index(question.goods)]
            if abs(changes[question.goods][0] - stored) > TINY * max(1.0, abs(stored)):
                note = (f"The ranking's baseline is the stored price, {stored:.4g}: the dqa simulation without a "
                        "decision counts building demand twice (docs/simulators.md).")
        return Effect(decision, self.score_name(question), *changes[question.goods], changes, "price", note,
                      item="goods")

    def evidence_rows(self, question, tables, focus):
        out = []
        names = {r["code"]: r["goods_name"] for r in tables["goods"].records()}
        buildings = set(focus)
        for i, r in enumerate(tables["goods"].records()):
            if r["goods_name"] == question.goods:
                out.append(("goods", i, ((r["goods_name"], r["code"]),), r["goods_name"]))
        for i, r in enumerate(tables["building"].records()):
            if r["id"] in buildings:
                out.append(("building", i, ((r["id"],),), f"building {r['id']}"))
        for table in ("supply", "demand"):
            for i, r in enumerate(tables[table].records()):
                if r["building_id"] in buildings:
                    goods = names.get(r["goods_id"], r["goods_id"])
                    out.append((table, i, ((r["building_id"],), (goods, r["goods_id"])),
                                f"building {r['building_id']}, {goods}"))
        return out

    def focus_scores(self, question, tables, focus, mode):
        """Only the focus candidates' simulations (equal to the ranking's scores)."""
        return building_sim.prices(tables, question.goods, focus, mode)

    def reads(self):
        return building_sim.READS

    def view_options(self):
        return [ViewOption("hops", "Detail around the goods", dict(MARKET_DETAIL), 2),
                ViewOption("max_per_column", "Buildings per column", {n: str(n) for n in (5, 10, 20, 50, 100)}, 20,
                           "Those with the largest flows first.")]

    def network(self, question, database, *, pick=None, best=None, pick_label="agent's pick", change=None,
                around=None, hops: int = 2, max_per_column: int = 20, **options):
        from core.scenarios.dqa import figures  # plotly: heavy, only for drawing

        return figures.market(question, database, hops=hops, max_per_column=max_per_column, pick=pick, best=best,
                              pick_label=pick_label, price_change=change)

    def node_rows(self, database, node_id):
        from core.scenarios.dqa import figures  # plotly: heavy, only for drawing

        return figures.node_rows(database, node_id)

    def own_row(self, question, table, record):
        if table == "goods":
            return record.get("goods_name") == question.goods
        return False
