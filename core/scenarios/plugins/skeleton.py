"""The files ``python -m core scenario new NAME`` writes: a small, working scenario to edit (choosing a supplier),
every key of scenario.toml commented."""

SCENARIO_TOML = '''# A scenario plugin for PlanRAG Workbench (docs/scenarios.md describes every key).
# Check it with:  python -m core scenario check {folder}

name = "{name}"                 # lowercase letters, digits and hyphens; used in question ids ({name}/1) and files
title = "{title}"
description = "Which supplier should we order from to pay the least for a quantity of goods?"

[data]                          # exactly one of:
csv = "data"                    #   a folder of CSV files, one table each (header line; numbers read as numbers)
# sqlite = "data.sqlite"        #   a SQLite file (opened read-only)
# sql = "dump.sql"              #   a MySQL-style SQL dump (CREATE TABLE + INSERT)
# mysql = "mysql://user:password@host:3306/database"   # your own server: a read-only snapshot, 100000 rows a table
# neo4j = "bolt://host:7687"    #   your own Neo4j-protocol server (user = "...", password = "..."), read-only

[rules]
file = "rules.md"               # business rules (markdown), given to the agent before the question

[questions]
# The question text; {{parameters}} are filled from each [[questions.ask]] below.
template = "We need {{quantity}} units. Which supplier should we order from?"
goal = "My goal is the lowest total cost for {{quantity}} units."     # optional
target = "{{quantity}} units"   # optional: how the question reads in lists
parameters = {{ quantity = "how many units we need" }}

[[questions.ask]]               # one table per question; answer = "..." sets a label (else the simulator's best)
quantity = 100

[[questions.ask]]
quantity = 1000

[candidates]                    # how the candidate decisions are listed: a query on the data (SQLite dialect) ...
query = "SELECT supplier FROM supplier ORDER BY rowid"
# function = "candidates"       # ... or a function candidates(tables, question) -> list in the simulator file
names = "SELECT supplier, supplier || ' (' || country || ')' FROM supplier"   # optional display names
by = "name"                     # answers name a candidate by "name", or by "id" (whole numbers)
# id_cues = ["supplier"]        # with by = "id": words before a number that make it an id ("supplier 12")

[simulator]                     # leave this table out and the scenario still runs agents, but cannot check decisions
file = "simulator.py"           # defines score(tables, question, candidate) -> float; optional baseline, what_if
direction = "min"               # "min": lower scores are better; "max": higher
score_name = "total cost of {{quantity}} units"
measure = "cost"                # what what_if's values are
item = "cost part"              # what what_if's keys are

# How the data is drawn as a network; without it the Scenarios page shows the tables only.
# [[network.nodes]]
# table = "town"                # one row a node
# key = "town"                  # the column naming a node (edges refer to it)
# x = "x"                       # optional position columns (else a spring layout)
# y = "y"
# [[network.edges]]
# table = "road"                # one row an edge
# source = "from_town"
# target = "to_town"
# weight = "km"                 # optional: shown on hover
# nodes = "town"                # the node table both ends belong to
# [network.candidates]          # optional: the node each candidate sits at
# table = "site"
# key = "site"
# node = "town"
'''

RULES = '''## Business rules

- `supplier` lists each supplier's price per unit and fixed delivery charge.
- The total cost of an order is quantity × unit_price + delivery_charge.
- The best supplier gives the lowest total cost for the quantity asked.
- Answer with the supplier's name.
'''

SUPPLIERS = '''supplier,country,unit_price,delivery_charge
Acme,UK,4.20,150
Borealis,NO,3.90,420
Cobalt,DE,4.05,260
'''

SIMULATOR = '''"""The simulator of {name}: score(tables, question, candidate) -> float, the cost of buying from one
supplier.

``tables`` holds the scenario's data: ``tables["supplier"].records()`` gives its rows as dicts, ``.column(name)`` one
column. ``question.parameters`` holds the question's parameters (here ``quantity``).
"""


def _row(tables, candidate):
    return next(r for r in tables["supplier"].records() if r["supplier"] == candidate)


def score(tables, question, candidate) -> float:
    """The total cost of the order from ``candidate`` (lower is better: direction = "min")."""
    r = _row(tables, candidate)
    return question.parameters["quantity"] * r["unit_price"] + r["delivery_charge"]


def what_if(tables, question, candidate) -> dict:
    """What the decision changes: here the two parts of the cost, (before, after) against no order."""
    r = _row(tables, candidate)
    return {{"goods": (0.0, question.parameters["quantity"] * r["unit_price"]),
            "delivery": (0.0, float(r["delivery_charge"]))}}


# Optional: def baseline(tables, question) -> float, the score of making no decision (the Decision check's
# "gain over no decision"); without it gains are measured from the worst candidate.
'''


def files(name: str, folder: str) -> dict[str, str]:
    """Relative path -> text of a new scenario's files."""
    title = name.replace("-", " ").title()
    return {"scenario.toml": SCENARIO_TOML.format(name=name, title=title, folder=folder), "rules.md": RULES,
            "data/supplier.csv": SUPPLIERS, "simulator.py": SIMULATOR.format(name=name)}
