"""Example retrieval plans for REAPER's planner prompt, one per DQA scenario and query language, given by the
scenario types as ``planner_examples`` (core.techniques.reaper.examples chooses them for a run).

REAPER's planner is a small model fine-tuned on good retrieval plans; in-context examples of such plans are as
close as prompting gets to it. The examples are written for this project: each answers an invented question (a
made-up country, node or goods) over the scenario's schema, which the DQA scenarios and the built-in demo share;
they retrieve what the decision depends on, the way the simulator's rules need it (docs/paper-deviations.md).
"""
from __future__ import annotations

#: Invented questions, worded for this project (not a DQA question's text).
_LOCATING_Q = ('We rule "Valdoria", whose home node is "saltmarsh", and have a single merchant to send. On which '
               "trade node does it raise our profit at home the most?")
_BUILDING_Q = "If one building's level went up by 5, which building id would bring the price of ceramics down the most?"

#: language -> (question, plan): the example plans of the DQA scenarios, in the planner's format; a scenario type
#: gives its own as ``planner_examples`` (core.scenarios.dqa.kinds).
LOCATING: dict[str, tuple[str, str]] = {
    "sql": (_LOCATING_Q, "\n".join([
        "Step 1: the nodes that flow into the home node - #E1 = Relational DB[SELECT source FROM flow WHERE "
        "dest = 'saltmarsh']",
        "Step 2: the nodes that flow into those - #E2 = Relational DB[SELECT source FROM flow WHERE dest IN (#E1)]",
        "Step 3: the value, power and inland flag of the home node and the nodes upstream of it - "
        "#E3 = Relational DB[SELECT trade_node, local_value, ingoing, outgoing, total_power, is_inland FROM "
        "trade_node WHERE trade_node = 'saltmarsh' OR trade_node IN (#E1) OR trade_node IN (#E2)]",
        "Step 4: the flows between them - #E4 = Relational DB[SELECT source, dest, flow FROM flow WHERE "
        "source IN (#E1) OR source IN (#E2)]",
        "Step 5: our trading power and merchants on every node - #E5 = Relational DB[SELECT trade_node, is_home, "
        "has_merchant, base_trading_power, calculated_trading_power FROM node_country WHERE country_name = "
        "'Valdoria']",
    ])),
    "cypher": (_LOCATING_Q, "\n".join([
        "Step 1: the nodes that flow into the home node - #E1 = Graph DB[MATCH (u:Trade_node)-[:source]->"
        "(h:Trade_node {name: 'saltmarsh'}) RETURN u.name]",
        "Step 2: the nodes that flow into those - #E2 = Graph DB[MATCH (u:Trade_node)-[:source]->(d:Trade_node) "
        "WHERE d.name IN [#E1] RETURN DISTINCT u.name]",
        "Step 3: the value, power and inland flag of the home node and the nodes upstream of it - "
        "#E3 = Graph DB[MATCH (t:Trade_node) WHERE t.name = 'saltmarsh' OR t.name IN [#E1] OR t.name IN [#E2] "
        "RETURN t.name, t.local_value, t.ingoing, t.outgoing, t.total_power, t.is_inland]",
        "Step 4: the flows between them - #E4 = Graph DB[MATCH (u:Trade_node)-[f:source]->(d:Trade_node) WHERE "
        "u.name IN [#E1] OR u.name IN [#E2] RETURN u.name, d.name, f.flow]",
        "Step 5: our trading power and merchants on every node - #E5 = Graph DB[MATCH (c:Country {name: "
        "'Valdoria'})-[r:NodeCountry]->(t:Trade_node) RETURN t.name, r.is_home, r.has_merchant, "
        "r.base_trading_power, r.calculated_trading_power]",
    ])),
}
BUILDING: dict[str, tuple[str, str]] = {
    "sql": (_BUILDING_Q, "\n".join([
        "Step 1: the code of the goods - #E1 = Relational DB[SELECT code FROM goods WHERE goods_name = 'ceramics']",
        "Step 2: the buildings that supply it - #E2 = Relational DB[SELECT building_id FROM supply WHERE "
        "goods_id = #E1]",
        "Step 3: their names and levels - #E3 = Relational DB[SELECT id, name, level FROM building WHERE "
        "id IN (#E2)]",
        "Step 4: what each of them supplies - #E4 = Relational DB[SELECT goods_id, building_id, max_supply, "
        "current_output, level FROM supply WHERE building_id IN (#E2)]",
        "Step 5: what each of them consumes - #E5 = Relational DB[SELECT goods_id, building_id, max_demand, "
        "current_input, level FROM demand WHERE building_id IN (#E2)]",
        "Step 6: the prices and demand of every goods - #E6 = Relational DB[SELECT goods_name, code, base_price, "
        "current_price, pop_demand FROM goods]",
        "Step 7: the other buildings' demand for the goods - #E7 = Relational DB[SELECT building_id, max_demand, "
        "current_input FROM demand WHERE goods_id = #E1]",
    ])),
    "cypher": (_BUILDING_Q, "\n".join([
        "Step 1: the buildings that supply the goods - #E1 = Graph DB[MATCH (b:Building)-[:Supply]->"
        "(g:Goods {name: 'ceramics'}) RETURN b.id]",
        "Step 2: their names, levels and everything they supply - #E2 = Graph DB[MATCH (b:Building)-[s:Supply]->"
        "(g:Goods) WHERE b.id IN [#E1] RETURN b.id, b.name, b.level, g.name, s.max_supply, s.current_output, "
        "s.level]",
        "Step 3: what each of them consumes - #E3 = Graph DB[MATCH (g:Goods)-[d:Demand]->(b:Building) WHERE "
        "b.id IN [#E1] RETURN b.id, g.name, d.max_demand, d.current_input, d.level]",
        "Step 4: the prices and demand of every goods - #E4 = Graph DB[MATCH (g:Goods) RETURN g.name, g.code, "
        "g.base_price, g.current_price, g.pop_demand]",
        "Step 5: the other buildings' demand for the goods - #E5 = Graph DB[MATCH (g:Goods {name: 'ceramics'})"
        "-[d:Demand]->(b:Building) RETURN b.id, d.max_demand, d.current_input]",
    ])),
}

#: language -> [(question, plan)]: shorter example plans beside the one above, for the paper setting's prompt, which
#: shows several in-context examples (REAPER section 4.1's m examples; Figure 2 mixes one-step and multi-step plans).
LOCATING_MORE: dict[str, list[tuple[str, str]]] = {
    "sql": [
        ('Which trade node is the home node of "Valdoria"?',
         "Step 1: the home node of the country - #E1 = Relational DB[SELECT home_node FROM country WHERE "
         "country_name = 'Valdoria']"),
        ('Where does the value of "saltmarsh" flow, and how much of it?',
         "Step 1: the flows out of the node - #E1 = Relational DB[SELECT dest, flow FROM flow WHERE source = "
         "'saltmarsh']\n"
         "Step 2: the nodes it flows to - #E2 = Relational DB[SELECT dest FROM flow WHERE source = 'saltmarsh']\n"
         "Step 3: their values - #E3 = Relational DB[SELECT trade_node, local_value, ingoing FROM trade_node WHERE "
         "trade_node IN (#E2)]"),
    ],
    "cypher": [
        ('Which trade node is the home node of "Valdoria"?',
         "Step 1: the home node of the country - #E1 = Graph DB[MATCH (c:Country {name: 'Valdoria'}) RETURN "
         "c.home_node]"),
        ('Where does the value of "saltmarsh" flow, and how much of it?',
         "Step 1: the flows out of the node - #E1 = Graph DB[MATCH (s:Trade_node {name: 'saltmarsh'})-[f:source]->"
         "(d:Trade_node) RETURN d.name, f.flow]\n"
         "Step 2: the nodes it flows to - #E2 = Graph DB[MATCH (s:Trade_node {name: 'saltmarsh'})-[:source]->"
         "(d:Trade_node) RETURN d.name]\n"
         "Step 3: their values - #E3 = Graph DB[MATCH (t:Trade_node) WHERE t.name IN [#E2] RETURN t.name, "
         "t.local_value, t.ingoing]"),
    ],
}
BUILDING_MORE: dict[str, list[tuple[str, str]]] = {
    "sql": [
        ("What is the current price of ceramics?",
         "Step 1: the price of the goods - #E1 = Relational DB[SELECT current_price FROM goods WHERE goods_name = "
         "'ceramics']"),
        ("Which buildings use ceramics, and how much of it do they get?",
         "Step 1: the code of the goods - #E1 = Relational DB[SELECT code FROM goods WHERE goods_name = 'ceramics']\n"
         "Step 2: the buildings that use it - #E2 = Relational DB[SELECT building_id, max_demand, current_input FROM "
         "demand WHERE goods_id = #E1]"),
    ],
    "cypher": [
        ("What is the current price of ceramics?",
         "Step 1: the price of the goods - #E1 = Graph DB[MATCH (g:Goods {name: 'ceramics'}) RETURN g.current_price]"),
        ("Which buildings use ceramics, and how much of it do they get?",
         "Step 1: the buildings that use the goods - #E1 = Graph DB[MATCH (g:Goods {name: 'ceramics'})-[d:Demand]->"
         "(b:Building) RETURN b.id, b.name, d.max_demand, d.current_input]"),
    ],
}
