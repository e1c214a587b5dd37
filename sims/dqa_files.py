"""Writing question sets in the DQA layout and formats (as the public PlanRAG repository's ``data/`` folder and the
DQA README describe them), so the benchmark's own loader and this project's importer read them alike.

Layout under a set's root::

    locating/questions/simulated_question.json      locating/queries/SQL_format/q{N}.sql   .../LPG_format/q{N}.cql
    building/questions/simulated_questions.json     building/queries/SQL_format/{TAG}{YEAR}.sql   .../{TAG}{YEAR}.cql

Formats, as in the released files: the SQL dumps are MySQL (``CREATE TABLE`` with sized VARCHARs, then one
``INSERT`` a line, double-quoted strings, TRUE/FALSE); the graph files are Neo4j Cypher, one statement a line
(``CREATE`` nodes, then ``MATCH ... CREATE`` edges; Locating's ``has_merchant`` is the string "True"/"False");
the question files are JSON arrays indented by 4. Numbers are written with Python ``repr``, the shortest text
that reads back as the same double on every machine, so the files are byte-for-byte reproducible.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from sims.tables import Table, Tables

QUESTION_FILES = {"locating": "locating/questions/simulated_question.json",
                  "building": "building/questions/simulated_questions.json"}
#: VARCHAR sizes of the released dumps (MySQL needs one).
_VARCHAR = {("building", "name"): 80}


def sql_path(root: Path, scenario: str, ref: str) -> Path:
    """The SQL dump of database ``ref`` (``q{N}`` or ``{TAG}{YEAR}``)."""
    return root / scenario / "queries" / "SQL_format" / f"{ref}.sql"


def cql_path(root: Path, scenario: str, ref: str) -> Path:
    """The Cypher file of database ``ref``."""
    return root / scenario / "queries" / "LPG_format" / f"{ref}.cql"


def number(value) -> str:
    """A float as ``repr`` writes it (round-trips exactly); an int as itself. Refuses NaN and infinities."""
    if type(value) is float and value - value == 0.0:  # the common case: a finite float
        return repr(value)
    if isinstance(value, bool):
        raise TypeError("a boolean is no number")
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{value} cannot be written to a DQA file")
    return repr(value)


def _sql_string(value) -> str:
    return '"' + str(value).replace('"', '""') + '"'


_SQL_FORMAT = {"BOOLEAN": lambda v: "TRUE" if v else "FALSE", "VARCHAR": _sql_string, "INT": lambda v: str(int(v)),
               "FLOAT": number}


def _create(table: Table) -> str:
    columns = ", ".join(f"{c.name} VARCHAR({_VARCHAR.get((table.name, c.name), 30)})" if c.type == "VARCHAR"
                        else f"{c.name} {c.type}" for c in table.columns)
    key = f", PRIMARY KEY ({', '.join(table.primary_key)})" if table.primary_key else ""
    return f"CREATE TABLE {table.name}( {columns}{key});"


def _inserts(table: Table, rows: list[tuple]) -> list[str]:
    head = f"INSERT INTO {table.name}({', '.join(table.column_names)}) VALUES ("
    formats = [_SQL_FORMAT[c.type] for c in table.columns]
    return [head + ", ".join([f(v) for f, v in zip(formats, row)]) + ");" for row in rows]


def _by_building(table: Table) -> dict[int, list[tuple]]:
    rows: dict[int, list[tuple]] = {}
    at = table.index("building_id")
    for row in table.rows:
        rows.setdefault(row[at], []).append(row)
    return rows


def sql_dump(tables: Tables, scenario: str) -> str:
    """The DQA SQL dump of a Locating or Building database. Building rows come grouped by building as in the
    released files (each building, then its demand rows, then its supply rows); each table keeps its row order
    as long as its rows are grouped by building in building-table order, as the generators make them."""
    lines = ["", ""]
    for t in tables:
        lines += [_create(t), ""]
    if scenario == "locating":
        for t in tables:
            lines += _inserts(t, t.rows)
    else:
        goods, buildings, demand, supply = (tables[n] for n in ("goods", "building", "demand", "supply"))
        lines += _inserts(goods, goods.rows)
        demand_of, supply_of = _by_building(demand), _by_building(supply)
        at = buildings.index("id")
        for row in buildings.rows:
            lines += _inserts(buildings, [row])
            lines += _inserts(demand, demand_of.get(row[at], []))
            lines += _inserts(supply, supply_of.get(row[at], []))
    return "\n".join(lines) + "\n"


def _cypher_string(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flag(value) -> str:
    return "true" if value else "false"


def _locating_cypher(tables: Tables) -> list[str]:
    lines = []
    for name, local, inland, total, out, inn in tables["trade_node"].rows:
        lines.append(f"CREATE ({name}:Trade_node {{name:{_cypher_string(name)}, local_value:{number(local)}, "
                     f"is_inland:{_flag(inland)}, total_power:{number(total)}, outgoing:{number(out)}, "
                     f"ingoing:{number(inn)}}});")
    for tag, home, development in tables["country"].rows:
        lines.append(f"CREATE ({tag}:Country {{name:{_cypher_string(tag)}, home_node:{_cypher_string(home)}, "
                     f"development:{number(development)}}});")
    for source, dest, flow in tables["flow"].rows:
        lines.append(f"MATCH ({source}:Trade_node {{name:{_cypher_string(source)}}}), ({dest}:Trade_node "
                     f"{{name:{_cypher_string(dest)}}}) CREATE ({source})-[r:source{{flow:{number(flow)}}}]->({dest});")
    for node, tag, is_home, merchant, base, calculated in tables["node_country"].rows:
        lines.append(f"MATCH ({node}:Trade_node {{name:{_cypher_string(node)}}}), ({tag}:Country "
                     f"{{name:{_cypher_string(tag)}}}) CREATE ({tag})-[r:NodeCountry{{is_home: {_flag(is_home)}, "
                     f"has_merchant: \"{'True' if merchant else 'False'}\",base_trading_power: {number(base)},"
                     f"calculated_trading_power: {number(calculated)}}}]->({node});")
    return lines


def _building_cypher(tables: Tables) -> list[str]:
    lines = [f"CREATE (n: Goods {{name:{_cypher_string(name)}, code: {int(code)}, base_price:{number(base)}, "
             f"current_price:{number(price)}, pop_demand:{number(pop)}}});"
             for name, code, base, price, pop in tables["goods"].rows]
    demand_of, supply_of = _by_building(tables["demand"]), _by_building(tables["supply"])
    for bid, name, level in tables["building"].rows:
        lines.append(f"CREATE (n: Building {{id: {int(bid)}, name:{_cypher_string(name)}, level:{int(level)}}});")
        for goods, _, max_demand, current, lv in demand_of.get(bid, []):
            lines.append(f"MATCH (g: Goods{{code: {int(goods)}}}), (b: Building{{id:{int(bid)}}}) CREATE (g)-"
                         f"[r:Demand{{max_demand: {number(max_demand)}, current_input: {number(current)}, "
                         f"level: {int(lv)}}}]->(b);")
        for goods, _, max_supply, current, lv in supply_of.get(bid, []):
            lines.append(f"MATCH (g: Goods{{code: {int(goods)}}}), (b: Building{{id:{int(bid)}}}) CREATE (b)-"
                         f"[r:Supply{{max_supply: {number(max_supply)}, current_output: {number(current)},"
                         f"level: {int(lv)}}}]->(g);")
    return lines


def cypher_dump(tables: Tables, scenario: str) -> str:
    """The DQA graph file (Neo4j Cypher, one statement a line) of a Locating or Building database. Node and
    country names are used as Cypher variables, as in the released files, so they must be identifiers."""
    lines = _locating_cypher(tables) if scenario == "locating" else _building_cypher(tables)
    return "\n".join(lines) + "\n"


def questions_json(questions: list[dict]) -> str:
    """A question file's text: a JSON array indented by 4, non-ASCII escaped, as the released files."""
    return json.dumps(questions, indent=4)


def write_text(path: Path, text: str) -> None:
    """Write UTF-8 text with ``\\n`` line ends on every platform, creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
