"""Reading a scenario plugin's data into plain tables: a SQLite file, a SQL dump, a folder of CSV files, or a
snapshot of the user's own MySQL/MariaDB or Neo4j-protocol database (read-only: only SELECT / MATCH ... RETURN,
at most ``ROW_CAP`` rows a table, with a timeout), and the graph view of those tables as the plugin declares it.
"""
from __future__ import annotations

import csv
import io
import re
import sqlite3
from pathlib import Path

from core.model.graph import GraphData, NodeTable, RelTable, _coerce
from sims.files import FileRefused, check_file, read_bytes
from sims.tables import Column, Table, Tables
from core.config import secrets

ROW_CAP = 100_000  # rows read from a table of a server database
TIMEOUT_S = 30
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DataError(ValueError):
    """The data cannot be read; the message names the file (and line) or server and why."""


def _type(values) -> str:
    vals = [v for v in values if v not in (None, "")]
    if vals and all(isinstance(v, bool) for v in vals):
        return "BOOLEAN"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "INT"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return "FLOAT"
    return "VARCHAR"


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _table(name: str, names: list[str], rows: list[tuple], key: list[str] | None = None) -> Table:
    """A table with column types inferred from its values; the key is the given one, else the first column
    when its values are distinct."""
    columns = list(zip(*rows)) if rows else [() for _ in names]
    types = [_type(c) for c in columns]
    fixed = [tuple(None if v in (None, "") else float(v) if t == "FLOAT" else v
                   for v, t in zip(r, types)) for r in rows]
    if key is None:
        key = names[:1] if rows and len(set(columns[0])) == len(rows) else []
    return Table(name, tuple(Column(n, t) for n, t in zip(names, types)), tuple(key), fixed)


def read_csv_folder(folder: Path) -> Tables:
    """Every ``*.csv`` of a folder, a table each (its file name), with a header line; numbers read as numbers."""
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise DataError(f"{folder}: no .csv file")
    tables = {}
    for path in files:
        try:
            text = read_bytes(path, "CSV data file").decode("utf-8")
        except FileRefused as e:
            raise DataError(str(e)) from None
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
        with io.StringIO(text, newline="") as f:
            reader = csv.reader(f)
            try:
                header = next(reader)
            except StopIteration:
                raise DataError(f"{path}, line 1: empty file (a header line is needed)") from None
            bad = [h for h in header if not _NAME.match(h)]
            if bad:
                raise DataError(f"{path}, line 1: column names must be letters, digits and _ ({bad[0]!r})")
            rows = []
            for lineno, row in enumerate(reader, 2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataError(f"{path}, line {lineno}: {len(row)} values for {len(header)} columns")
                rows.append(tuple(_number(v) for v in row))
        tables[path.stem] = _table(path.stem, header, rows)
    return Tables(tables)


def read_sqlite(path: Path) -> Tables:
    """Every table of a SQLite file, opened read-only."""
    try:
        check_file(path, "SQLite data file")
    except FileNotFoundError:
        raise DataError(f"{path}: no such SQLite file") from None
    except FileRefused as e:
        raise DataError(str(e)) from None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                               "'sqlite_%' ORDER BY rowid")]
            tables = {}
            for name in names:
                info = con.execute(f'PRAGMA table_info("{name}")').fetchall()
                cols = [r[1] for r in info]
                key = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
                rows = con.execute(f'SELECT * FROM "{name}" LIMIT {ROW_CAP}').fetchall()
                tables[name] = _table(name, cols, rows, key or None)
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise DataError(f"{path}: not a readable SQLite database ({e})") from None
    return Tables(tables)


def read_mysql(url: str, only: list[str] | None = None) -> Tables:
    """A snapshot of a MySQL/MariaDB database (``mysql://user:password@host:port/database``) in a read-only
    transaction, at most ROW_CAP rows a table."""
    from urllib.parse import unquote, urlsplit

    import pymysql

    parts = urlsplit(url)
    secrets.register(parts.password)  # kept out of everything stored or printed
    database = parts.path.lstrip("/")
    if not database:
        raise DataError(f"{parts.scheme}://{parts.hostname}: the URL names no database (mysql://host/DATABASE)")
    try:
        con = pymysql.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 3306,
                              user=unquote(parts.username or "root"), password=unquote(parts.password or ""),
                              database=database, connect_timeout=10, read_timeout=TIMEOUT_S)
    except pymysql.MySQLError as e:
        raise DataError(f"mysql {parts.hostname}/{database}: cannot connect ({e})") from None
    try:
        with con.cursor() as cur:
            cur.execute("START TRANSACTION READ ONLY")
            cur.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
            names = [r[0] for r in cur.fetchall() if only is None or r[0] in only]
            tables = {}
            for name in names:
                quoted = name.replace("`", "``")  # a name of the database's quoted as a name, never as code
                cur.execute(f"SHOW KEYS FROM `{quoted}` WHERE Key_name = 'PRIMARY'")
                key = [r[4] for r in cur.fetchall()]
                cur.execute(f"SELECT * FROM `{quoted}` LIMIT {ROW_CAP}")
                cols = [d[0] for d in cur.description]
                rows = [tuple(float(v) if type(v).__name__ == "Decimal" else v for v in r) for r in cur.fetchall()]
                tables[name] = _table(name, cols, rows, key or None)
            cur.execute("ROLLBACK")
    except pymysql.MySQLError as e:
        raise DataError(f"mysql {parts.hostname}/{database}: {e}") from None
    finally:
        con.close()
    return Tables(tables)


def read_neo4j(uri: str, user: str = "neo4j", password: str = "") -> Tables:
    """A snapshot of a Neo4j-protocol database in read transactions: a table per node label (its properties, with
    a ``node_id`` column) and per relationship type (``source_id``, ``target_id`` and its properties)."""
    import neo4j

    from core.backends.neo4j import MARKER  # heavy: loads neo4j

    secrets.register(password)
    try:
        driver = neo4j.GraphDatabase.driver(uri, auth=(user, password), connection_timeout=10)
        with driver.session(default_access_mode=neo4j.READ_ACCESS) as session:
            labels = [r[0] for r in session.run("MATCH (n) RETURN DISTINCT labels(n)[0] LIMIT 1000")]
            types = [r[0] for r in session.run("MATCH ()-[r]->() RETURN DISTINCT type(r) LIMIT 1000")]
            tables = {}
            for label in [x for x in labels if x and x != MARKER]:  # PlanRAG's own bookkeeping node left out
                recs = [(r[0], dict(r[1])) for r in session.run(
                    f"MATCH (n:`{label.replace('`', '``')}`) RETURN elementId(n), properties(n) LIMIT {ROW_CAP}", timeout=TIMEOUT_S)]
                names = ["node_id", *dict.fromkeys(k for _, p in recs for k in p)]
                tables[label] = _table(label, names, [(i, *(p.get(k) for k in names[1:])) for i, p in recs],
                                       ["node_id"])
            for rtype in types:
                recs = [(r[0], r[1], dict(r[2])) for r in session.run(
                    f"MATCH (a)-[r:`{rtype.replace('`', '``')}`]->(b) RETURN elementId(a), elementId(b), properties(r) LIMIT {ROW_CAP}",
                    timeout=TIMEOUT_S)]
                names = ["source_id", "target_id", *dict.fromkeys(k for _, _, p in recs for k in p)]
                tables[rtype] = _table(rtype, names, [(a, b, *(p.get(k) for k in names[2:])) for a, b, p in recs], [])
        driver.close()
    except neo4j.exceptions.Neo4jError as e:
        raise DataError(f"neo4j {uri}: {e}") from None
    except (neo4j.exceptions.DriverError, OSError) as e:
        raise DataError(f"neo4j {uri}: cannot connect ({e})") from None
    return Tables(tables)


def graph_of(tables: Tables, nodes: list[dict], edges: list[dict]) -> GraphData:
    """The graph view: each edge table (``table``, ``source``, ``target`` columns, naming the ``key`` of node
    tables) becomes a relationship type, every other table a node label keyed by its primary key (else its first
    column, else a ``row_id`` numbering its rows). With no edges declared, every table is a node label."""
    edge_tables = {e["table"] for e in edges}
    key_of = {n["table"]: n.get("key") for n in nodes}
    labels, out_nodes, out_rels, notes = {}, {}, {}, []
    for t in tables:
        if t.name in edge_tables:
            continue
        label = t.name[:1].upper() + t.name[1:]
        key = key_of.get(t.name) or (t.primary_key[0] if len(t.primary_key) == 1 else None)
        names, rows = t.column_names, list(t.rows)
        if key is None:  # no one-column key: number the rows
            key, names, rows = "row_id", ["row_id", *names], [(i, *r) for i, r in enumerate(rows, 1)]
        rows, types = _coerce(rows, 0, names, notes, label, t.name)
        out_nodes[label] = NodeTable(label, names, types, key, rows)
        labels[t.name] = label
    for e in edges:
        t = tables[e["table"]]
        node_table = e.get("nodes") or (nodes[0]["table"] if nodes else None)
        src = dst = labels.get(node_table)
        if src is None:
            raise DataError(f"edge table {t.name}: its node table {node_table!r} is not a table of the data")
        rtype = t.name.upper()
        props = [c for c in t.column_names if c not in (e["source"], e["target"])]
        idx = [t.index(e["source"]), t.index(e["target"])] + [t.index(c) for c in props]
        rows, types = _coerce([tuple(r[i] for i in idx) for r in t.rows], 2, props, notes, rtype, t.name)
        out_rels[rtype] = RelTable(rtype, src, dst, props, types, rows)
    return GraphData(out_nodes, out_rels, notes)
