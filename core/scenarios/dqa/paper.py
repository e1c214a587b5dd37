"""What the PlanRAG authors' code (myeon9h/PlanRAG at its head, ``src/data_loaders``) gave its agents for the two DQA
scenarios, as facts: the schema each database tool's description ends with (their fixed text, as their prompt
template rendered it: its doubled braces halved; not read from the database) and how it joined a question's parts.
The ``paper`` prompt setting sends these (core.agents.paper_prompts)."""
from __future__ import annotations

#: language -> the schema text after the Locating tool's description, as sent (leading and trailing newlines kept;
#: the missing comma after ``is_inland BOOLEAN`` and the last line's spacing are the authors').
LOCATING_SCHEMAS = {
    "sql": ("\n\nCREATE TABLE country\n(\n    country_name    VARCHAR(30),\n    home_node    VARCHAR(30),\n"
            "    development FLOAT,\n   PRIMARY KEY (country_name)\n);\n\n"
            "CREATE TABLE trade_node\n(\n    trade_node    VARCHAR(30),\n    local_value FLOAT,\n"
            "    is_inland BOOLEAN\n    total_power FLOAT,\n    outgoing FLOAT,\n    ingoing FLOAT,\n"
            "   PRIMARY KEY (trade_node)\n);\n\n"
            "CREATE TABLE flow\n(\n    source    VARCHAR(30),\n    dest VARCHAR(30),\n    flow FLOAT,\n"
            "   PRIMARY KEY (source, dest)\n);\n\n"
            "CREATE TABLE node_country\n(\n    trade_node     VARCHAR(30),\n    country_name    VARCHAR(30),\n"
            "    is_home BOOLEAN,\n    has_merchant BOOLEAN,\n    base_trading_power FLOAT,\n"
            "    calculated_trading_power FLOAT,\n   PRIMARY KEY (trade_node, country_name)\n);\n"),
    "cypher": ("\n(n:Trade_node {name, local_value, is_inland, total_power, outgoing, ingoing});\n"
               "(m:Country {name, home_node, development});\n\n"
               "(Trade_node)-[r:source {flow}]->[Trade_node]\n"
               "(Country)-[NodeCountry{is_home, has_merchant,base_trading_power,calculated_trading_power}]->"
               "(Trade_node)\n"),
}
#: The same for Building (its graph text names no ``level`` on the relationships, as the authors' did not).
BUILDING_SCHEMAS = {
    "sql": ("\nCREATE TABLE goods(    goods_name    VARCHAR(30),    code    INT,    base_price FLOAT,    "
            "current_price FLOAT,    pop_demand FLOAT, PRIMARY KEY (code));\n\n"
            "CREATE TABLE building(    id INT,    name VARCHAR(80),    level INT, PRIMARY KEY (id));\n\n"
            "CREATE TABLE supply(    goods_id INT,    building_id INT,    max_supply FLOAT,    current_output FLOAT,"
            "    level INT, PRIMARY KEY (goods_id, building_id));\n\n"
            "CREATE TABLE demand(    goods_id INT,    building_id INT,    max_demand FLOAT,    current_input FLOAT,"
            "    level INT,   PRIMARY KEY (goods_id, building_id));\n"),
    "cypher": ("\n(g: Goods {name, code, base_price, current_price, pop_demand})\n(b: Building {id, name, level})\n"
               "(Goods)-[r:Demand{max_demand, current_input}]->(Building)\n"
               "(Building)-[r:Supply{max_supply, current_output}]->(Goods)\n"),
}


def locating_question(question) -> str:
    """A Locating question as the authors' loader joined it: business rules, question and goal, nothing between (a
    question without those parts: its text)."""
    if not hasattr(question, "business_rules"):
        return question.text
    return question.business_rules + question.question + question.goal


def building_question(question) -> str:
    """A Building question as the authors' loader joined it: business rules, ``<Question>``, the question (a
    question without those parts: its text)."""
    if not hasattr(question, "business_rules"):
        return question.text
    return question.business_rules + "<Question>" + question.question
