"""The graph view of a question's database: node and relationship tables, read from a DQA .cql file
or derived from the SQL tables, in file order.

Defect rule for .cql files: a string property whose every value is "True" or "False" (DQA stores
``has_merchant`` that way) is read as a boolean, and a note says so.
A property spelled ``has_has_merchant`` is read as ``has_merchant``, as in the SQL dumps (see sims.sqldump).
Property types are declared from the data: bool, str, int when every value is an integer, else float.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from sims.files import read_text
from sims.sqldump import COLUMN_ALIASES, DumpError
from sims.tables import Tables


@dataclass
class NodeTable:
    """Nodes of one label; ``key`` is the property that identifies a node (used to match edges)."""

    label: str
    properties: list[str]
    types: dict[str, str]  # property -> "STRING" | "INT64" | "DOUBLE" | "BOOL"
    key: str
    rows: list[tuple] = field(default_factory=list)


@dataclass
class RelTable:
    """Relationships of one type from ``src`` label to ``dst`` label; each row is (src key, dst key, *properties)."""

    type: str
    src: str
    dst: str
    properties: list[str]
    types: dict[str, str]
    rows: list[tuple] = field(default_factory=list)


@dataclass
class GraphData:
    nodes: dict[str, NodeTable]
    rels: dict[str, RelTable]
    notes: list[str] = field(default_factory=list)

    def content_hash(self) -> str:
        """A hash of the graph's data, independent of how the file spelled it."""
        h = hashlib.sha256()
        for t in [*self.nodes.values(), *self.rels.values()]:
            h.update(repr(t).encode())
        return h.hexdigest()

    def counts(self) -> dict[str, int]:
        """Row count per node label and relationship type."""
        return {**{k: len(v.rows) for k, v in self.nodes.items()}, **{k: len(v.rows) for k, v in self.rels.items()}}


# --- the graph view of a SQL schema -------------------------------------------------------------------

@dataclass(frozen=True)
class GraphMapping:
    """How a scenario's tables read as a property graph (its kind declares it, e.g. the DQA kinds the mapping the
    DQA .cql files use). ``nodes``: label -> (table, key property, [(property, column)]); ``rels``: type ->
    (table, source label, source column, target label, target column, [(property, column)])."""

    nodes: dict
    rels: dict


def _infer_type(values) -> str:
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return "BOOL"
    if all(isinstance(v, str) for v in vals):
        return "STRING"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "INT64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "DOUBLE"
    raise ValueError(f"mixed property values {sorted({type(v).__name__ for v in vals})}")


def _coerce(rows: list[tuple], start: int, names: list[str], notes: list[str], where: str,
            source: str) -> tuple[list[tuple], dict[str, str]]:
    """Declare a type per property from the data (see module doc) and convert the values to it."""
    types, columns = {}, [list(c) for c in zip(*rows)] if rows else [[] for _ in range(start + len(names))]
    for i, name in enumerate(names, start):
        col = columns[i]
        if col and all(v in ("True", "False") for v in col):
            columns[i] = [v == "True" for v in col]
            notes.append(f'{where}.{name} stored as the strings "True"/"False": read as booleans')
        try:
            types[name] = _infer_type(columns[i])
        except ValueError as e:
            raise DumpError(source, 0, f"{where}.{name}: {e}") from None
        if types[name] == "DOUBLE":
            columns[i] = [None if v is None else float(v) for v in columns[i]]
    return (list(zip(*columns)) if rows else []), types


def graph_of_tables(mapping: GraphMapping, tables: Tables) -> GraphData:
    """The graph view of a SQL database by ``mapping``."""
    nodes, rels, notes = {}, {}, []
    for label, (table, key, props) in mapping.nodes.items():
        t = tables[table]
        idx = [t.index(col) for _, col in props]
        rows = [tuple(r[i] for i in idx) for r in t.rows]
        names = [p for p, _ in props]
        rows, types = _coerce(rows, 0, names, notes, label, table)
        nodes[label] = NodeTable(label, names, types, key, rows)
    for rtype, (table, src, scol, dst, dcol, props) in mapping.rels.items():
        t = tables[table]
        idx = [t.index(scol), t.index(dcol)] + [t.index(col) for _, col in props]
        rows = [tuple(r[i] for i in idx) for r in t.rows]
        names = [p for p, _ in props]
        rows, types = _coerce(rows, 2, names, notes, rtype, table)
        rels[rtype] = RelTable(rtype, src, dst, names, types, rows)
    return GraphData(nodes, rels, notes)


# --- .cql parsing ------------------------------------------------------------------------------------
_NODE = re.compile(r"^CREATE\s*\(\s*\w*\s*:\s*(\w+)\s*\{(.*)\}\s*\)\s*;?$")
_REL = re.compile(
    r"^MATCH\s*\(\s*(\w+)\s*:\s*(\w+)\s*\{(.*?)\}\s*\)\s*,\s*\(\s*(\w+)\s*:\s*(\w+)\s*\{(.*?)\}\s*\)\s*"
    r"CREATE\s*\(\s*(\w+)\s*\)\s*-\s*\[\s*\w*\s*:\s*(\w+)\s*\{(.*)\}\s*\]\s*->\s*\(\s*(\w+)\s*\)\s*;?$")
_PROP = re.compile(r'\s*(\w+)\s*:\s*(?:"((?:[^"\\]|\\.)*)"|(true|false|null)|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))\s*(,|$)',
                   re.I)


def _props(text: str, source: str, line: int, notes: list[str]) -> dict:
    out, pos = {}, 0
    text = text.strip()
    while pos < len(text):
        m = _PROP.match(text, pos)
        if not m:
            raise DumpError(source, line, f"cannot read property at {text[pos:pos + 30]!r}")
        key, s, kw, num = m.group(1), m.group(2), m.group(3), m.group(4)
        if key in COLUMN_ALIASES:
            note = f"property {key} read as {COLUMN_ALIASES[key]}"
            if note not in notes:
                notes.append(note)
            key = COLUMN_ALIASES[key]
        if s is not None:
            out[key] = s.replace('\\"', '"')
        elif kw is not None:
            out[key] = None if kw.lower() == "null" else kw.lower() == "true"
        else:
            out[key] = int(num) if re.fullmatch(r"[-+]?\d+", num) else float(num)
        pos = m.end()
    return out


def parse_cypher_dump(text: str, source: str = "<cql>") -> GraphData:
    """Parse a DQA .cql file (CREATE nodes, then MATCH ... CREATE edges, one statement a line)."""
    node_rows: dict[str, list[dict]] = {}
    rel_rows: dict[str, list[tuple]] = {}
    rel_ends: dict[str, tuple[str, str, str, str]] = {}
    keys: dict[str, str] = {}
    notes: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("CREATE"):
            m = _NODE.match(line)
            if not m:
                raise DumpError(source, lineno, "malformed CREATE node statement (truncated line?)")
            node_rows.setdefault(m.group(1), []).append(_props(m.group(2), source, lineno, notes))
            continue
        m = _REL.match(line)
        if not m:
            raise DumpError(source, lineno, "malformed MATCH ... CREATE relationship statement (truncated line?)")
        v1, l1, p1, v2, l2, p2, a, rtype, rp, b = m.groups()
        ends = {v1: (l1, _props(p1, source, lineno, notes)), v2: (l2, _props(p2, source, lineno, notes))}
        if a not in ends or b not in ends:
            raise DumpError(source, lineno, "relationship endpoint not bound by MATCH")
        (la, pa), (lb, pb) = ends[a], ends[b]
        if len(pa) != 1 or len(pb) != 1:
            raise DumpError(source, lineno, "MATCH must identify each endpoint by one property")
        (ka, va), = pa.items()
        (kb, vb), = pb.items()
        for label, key in ((la, ka), (lb, kb)):
            if keys.setdefault(label, key) != key:
                raise DumpError(source, lineno, f"{label} matched by {key} and by {keys[label]}")
        if rel_ends.setdefault(rtype, (la, lb, ka, kb))[:2] != (la, lb):
            raise DumpError(source, lineno, f"relationship {rtype} between different labels")
        rel_rows.setdefault(rtype, []).append((va, vb, _props(rp, source, lineno, notes)))
    if not node_rows:
        raise DumpError(source, 1, "no CREATE node statement: not a DQA .cql file")
    nodes = {}
    for label, dicts in node_rows.items():
        names = list(dict.fromkeys(k for d in dicts for k in d))
        rows, types = _coerce([tuple(d.get(k) for k in names) for d in dicts], 0, names, notes, label, source)
        key = keys.get(label, names[0])
        nodes[label] = NodeTable(label, names, types, key, rows)
    rels = {}
    for rtype, items in rel_rows.items():
        names = list(dict.fromkeys(k for _, _, d in items for k in d))
        rows, types = _coerce([(a, b, *(d.get(k) for k in names)) for a, b, d in items], 2, names, notes, rtype,
                              source)
        la, lb, _, _ = rel_ends[rtype]
        rels[rtype] = RelTable(rtype, la, lb, names, types, rows)
    return GraphData(nodes, rels, notes)


def read_cypher_dump(path: str | Path) -> GraphData:
    """Read and parse a DQA .cql file."""
    return parse_cypher_dump(read_text(path, "graph file"), str(path))
