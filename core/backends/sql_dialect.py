"""What the SQL backends share: the MySQL schema text of a question's tables, the checks every agent query
passes (one statement, read-only), and the translation of model-written MySQL to SQLite with sqlglot."""
from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, TokenError, UnsupportedError
from sqlglot.tokens import TokenType

from core.backends.base import QuerySyntaxError, RefusedWrite, check_nesting, check_size, too_complex, unfence
from sims.tables import Table, Tables

#: VARCHAR widths the DQA dumps declare; the Tables model keeps no width, so other string columns get
#: ``DEFAULT_VARCHAR``, widened to the longest value when one is longer.
DQA_VARCHAR_WIDTHS = {("building", "name"): 80}
DEFAULT_VARCHAR = 30

#: First words of statements that change data, schema or session, refused before they reach an engine.
WRITE_WORDS = frozenset("""INSERT UPDATE DELETE REPLACE CREATE DROP ALTER TRUNCATE RENAME ATTACH DETACH PRAGMA
    VACUUM REINDEX ANALYZE OPTIMIZE REPAIR GRANT REVOKE LOAD SET LOCK UNLOCK CALL DO HANDLER MERGE UPSERT BEGIN
    START COMMIT ROLLBACK SAVEPOINT RELEASE USE FLUSH KILL INSTALL UNINSTALL PREPARE EXECUTE DEALLOCATE
    SHUTDOWN IMPORT XA""".split())
#: First words of MySQL metadata statements, run on MySQL only.
METADATA_WORDS = frozenset({"SHOW", "DESCRIBE", "DESC", "EXPLAIN"})

_MYSQL = Dialect.get_or_raise("mysql")
_BRACKETS = frozenset({TokenType.L_PAREN, TokenType.R_PAREN, TokenType.L_BRACKET, TokenType.R_BRACKET,
                       TokenType.L_BRACE, TokenType.R_BRACE})
_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Merge, exp.TruncateTable,
           exp.Command, exp.Pragma, exp.Set, exp.Use, exp.Into)
#: Comparisons whose string literals get COLLATE NOCASE on SQLite (and ``IN`` lists of strings, their left
#: operand), so that comparing any expression with a string ignores case as MySQL's collations do; string
#: columns are NOCASE already.
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)


def varchar_width(table: Table, column: str) -> int:
    """The declared VARCHAR width of a string column (see ``DQA_VARCHAR_WIDTHS``)."""
    longest = max((len(v) for v in table.column(column) if v is not None), default=0)
    return max(DQA_VARCHAR_WIDTHS.get((table.name, column), DEFAULT_VARCHAR), longest)


def create_table(table: Table, float_type: str = "FLOAT") -> str:
    """A MySQL ``CREATE TABLE`` for ``table`` (without the final ``;``), FLOAT columns spelled ``float_type``."""
    parts = []
    for c in table.columns:
        if c.type == "VARCHAR":
            parts.append(f"{c.name} VARCHAR({varchar_width(table, c.name)})")
        else:
            parts.append(f"{c.name} {float_type if c.type == 'FLOAT' else c.type}")
    if table.primary_key:
        parts.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    return f"CREATE TABLE {table.name} ({', '.join(parts)})"


def schema_text(tables: Tables) -> str:
    """The MySQL CREATE TABLE statements of the tables, one a line, as the DQA dumps declare them."""
    return "\n".join(create_table(t) + ";" for t in tables)


def one_statement(text: str) -> str:
    """The single statement in ``text``, without surrounding whitespace, markdown code fence, trailing ``;``
    or trailing comments. Raises QuerySyntaxError when it is empty, unreadable or several statements."""
    text = unfence(text)
    check_size(text)
    try:
        tokens = _MYSQL.tokenize(text)
    except TokenError as e:
        raise QuerySyntaxError(f"cannot read the query ({e}); check quotes and brackets") from None
    check_nesting(t.text for t in tokens if t.token_type in _BRACKETS)
    statements, current = [], []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if current:
                statements.append(current)
            current = []
        else:
            current.append(token)
    if current:
        statements.append(current)
    if not statements:
        raise QuerySyntaxError("empty query: send one SELECT statement")
    if len(statements) > 1:
        raise QuerySyntaxError(f"{len(statements)} statements given; send exactly one SQL statement per query")
    return text[statements[0][0].start:statements[0][-1].end + 1]


def check_read_only(sql: str, metadata: bool) -> None:
    """Refuse a statement that changes data, schema or session (or, unless ``metadata``, a SHOW/DESCRIBE/
    EXPLAIN) by its first word. This only gives a clear message early: the engines enforce read-only access."""
    word = _MYSQL.tokenize(sql)[0].text.upper()
    if word in WRITE_WORDS:
        raise RefusedWrite(f"{word} statements are refused: the database is read-only; send one SELECT query")
    if word in METADATA_WORDS and not metadata:
        raise QuerySyntaxError(f"{word} is not available on this backend; the tables are listed in the schema")


def _parse_error(e: ParseError, sql: str) -> str:
    """Where the parser stopped, in SQL terms as an engine says it (the token, its line and column, and the query up
    to it), with what was expected there when the parser knows; never the parser's class names."""
    if not e.errors:
        return "the query cannot be read as SQL"
    err = e.errors[0]
    near, line_no, end = (err.get("highlight") or "").strip(), err.get("line") or 1, err.get("col") or 0
    lines = sql.splitlines() or [""]
    line = lines[min(line_no, len(lines)) - 1]
    start = max(end - len(near), 0)  # sqlglot's column is where the token ends
    before = " ".join(line[:start].split())
    before = before if len(before) <= 60 else "..." + before[-60:]
    expected = re.match(r"Expecting (.+)", err.get("description") or "")
    where = f'near "{near}" at line {line_no}, column {start + 1}' if near else f"at the end of line {line_no}"
    said = f"syntax error {where}" + (f', expected "{expected.group(1)}"' if expected else "")
    return said + (f': the query reads as SQL up to "{before}" and cannot go on there' if before else "")


def _nocase(node: exp.Expression) -> exp.Expression:
    def collate(e: exp.Expression) -> exp.Expression:
        atom = isinstance(e, (exp.Column, exp.Literal, exp.Paren))
        return exp.Collate(this=e if atom else exp.Paren(this=e), expression=exp.var("NOCASE"))

    if isinstance(node, exp.In) and any(isinstance(e, exp.Literal) and e.is_string for e in node.expressions):
        node.set("this", collate(node.this))
    elif isinstance(node, exp.Literal) and node.is_string and isinstance(node.parent, _COMPARISONS):
        return collate(node.copy())
    return node


def mysql_to_sqlite(sql: str) -> str:
    """Translate one MySQL query to SQLite. Raises QuerySyntaxError when sqlglot cannot parse it or cannot
    translate part of it, RefusedWrite when it is not a read-only query."""
    try:
        return _translate(sql)
    except RecursionError:  # within the nesting limit, but a long chain (NOT NOT ... 1) still recurses
        raise too_complex() from None


def _translate(sql: str) -> str:
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except (ParseError, TokenError) as e:
        detail = _parse_error(e, sql) if isinstance(e, ParseError) else f"cannot read the query ({e})"
        raise QuerySyntaxError(detail) from None
    write = tree.find(*_WRITES)
    if write:
        raise RefusedWrite(f"{write.key.upper()} is refused: the database is read-only; send one SELECT query")
    if not isinstance(tree, exp.Query):
        raise QuerySyntaxError(f"only SELECT queries run on this backend, not {tree.key.upper()}")
    try:
        return tree.transform(_nocase).sql(dialect="sqlite", unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as e:
        raise QuerySyntaxError(f"this MySQL cannot be translated to SQLite ({e}); rewrite it with "
                               "standard SQL functions") from None
