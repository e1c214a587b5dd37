"""Cypher text shared by the graph backends, and the Neo4j → Ladybug translation.

``prepare`` cleans an agent's query to one statement and refuses writes before any engine sees it;
``to_ladybug`` adds Ladybug's own checks and rewrites Neo4j-only constructs where the rewrite gives the same
rows (each rewrite is reported as a note). All of it works on tokens, so string literals, backquoted names
and comments are never rewritten. The differences and why each rewrite is exact: docs/cypher-dialects.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.backends.base import (QueryError, QuerySyntaxError, RefusedWrite, check_nesting, check_size, too_complex,
                                unfence)
from core.model.graph import GraphData

#: For prompts on the Ladybug backend: what an agent used to Neo4j's Cypher must know.
LADYBUG_DIALECT_NOTE = """\
The graph database is Ladybug (Kuzu's Cypher dialect), not Neo4j. Differences that matter:
- Lists and strings are 1-based: collect(x)[1] is the first element, l[1..2] the first two,
  substring(s, 1, 3) the first 3 characters; index 0 is an error.
- No toString, split, reduce, n {.x} map projections or WHERE n:Label (use label(n) = 'Label'); round(x, 0).
- Casts: CAST(x AS DOUBLE), CAST(x AS INT64), CAST(x AS STRING) (doubles print with 6 decimals).
- Paths reach at most 30 hops; shortest path: MATCH p = (a)-[:R* SHORTEST 1..30]->(b). WITH ... ORDER BY needs LIMIT.
- toFloat, toInteger, toBoolean, type, labels, startNode, endNode, exists(), !=, [x IN l | ...], shortestPath: translated."""

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>'(?:[^'\\]|\\.)*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z))
  | (?P<quoted>`(?:[^`]|``)*(?:`|\Z))
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<name>[^\W\d]\w*)
  | (?P<param>\$\w*)
  | (?P<op>->|<-|<>|!=|<=|>=|=~|\.\.|\S)
""", re.X | re.S)
_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class Token:
    kind: str  # name | string | quoted | number | param | op
    text: str
    start: int
    end: int

    @property
    def word(self) -> str:
        """The upper-cased text of a bare name (keywords, functions), else ''."""
        return self.text.upper() if self.kind == "name" else ""


def tokens(text: str) -> list[Token]:
    """The significant tokens of ``text`` (no whitespace, no comments)."""
    return [Token(m.lastgroup, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)
            if m.lastgroup not in ("space", "comment")]


def _closing(toks: list[Token], i: int) -> int | None:
    """Index of the bracket closing the one at ``toks[i]``, or None when unbalanced."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "op" and toks[j].text in _OPEN:
            depth += 1
        elif toks[j].kind == "op" and toks[j].text in _CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return None


def _depths(toks: list[Token]) -> list[int]:
    """Bracket depth of each token (a bracket counts at the depth outside it)."""
    out, depth = [], 0
    for t in toks:
        if t.kind == "op" and t.text in _CLOSE:
            depth -= 1
        out.append(depth)
        if t.kind == "op" and t.text in _OPEN:
            depth += 1
    return out


def _split(toks: list[Token], lo: int, hi: int, sep: str = ",") -> list[tuple[int, int]]:
    """Token spans of ``toks[lo:hi]`` separated by top-level ``sep`` tokens."""
    spans, start, depth = [], lo, 0
    for j in range(lo, hi):
        t = toks[j]
        if t.kind == "op" and t.text in _OPEN:
            depth += 1
        elif t.kind == "op" and t.text in _CLOSE:
            depth -= 1
        elif depth == 0 and t.text == sep:
            spans.append((start, j))
            start = j + 1
    spans.append((start, hi))
    return [s for s in spans if s[0] < s[1]]


def _is_bare(toks: list[Token], i: int) -> bool:
    """A name used as a keyword or function: not a property (``n.x``), label (``:X``) or map key (``x:``)."""
    before = toks[i - 1].text if i else ""
    after = toks[i + 1].text if i + 1 < len(toks) else ""
    return toks[i].kind == "name" and before not in (".", ":") and after != ":"


# --- cleaning and refusing --------------------------------------------------------------------------
WRITE_KEYWORDS = frozenset(
    "CREATE MERGE SET DELETE DETACH REMOVE DROP ALTER FOREACH COPY LOAD INSTALL UNINSTALL ATTACH USE IMPORT "
    "EXPORT CHECKPOINT BEGIN COMMIT ROLLBACK GRANT REVOKE DENY TERMINATE".split())


def prepare(text: str) -> str:
    """One read-only statement from an agent's text: markdown fences, surrounding whitespace and a trailing
    ``;`` removed. Raises QuerySyntaxError (empty, several statements, ``$parameters``) or RefusedWrite."""
    text = unfence(text)
    check_size(text)
    toks = tokens(text)
    check_nesting(t.text for t in toks if t.kind == "op" and t.text in "()[]{}")
    while toks and toks[-1].text == ";":
        text = text[:toks.pop().start].rstrip()
    if not toks:
        raise QuerySyntaxError("empty query: send one Cypher statement")
    if any(t.text == ";" for t in toks):
        raise QuerySyntaxError("send exactly one Cypher statement per query (found ';' between statements)")
    params = [t.text for t in toks if t.kind == "param"]
    if params:
        raise QuerySyntaxError(f"query parameters such as {params[0]} are not supported: write the values literally")
    for i, t in enumerate(toks):
        if t.word in WRITE_KEYWORDS and _is_bare(toks, i):
            raise RefusedWrite(f"refused: {t.text} is not allowed; queries here only read the graph "
                               "(MATCH ... RETURN)")
    return text


# --- Neo4j: checks ------------------------------------------------------------------------------------
#: Procedures an agent may CALL on Neo4j: they only read the schema. Any other may write (apoc.merge.node,
#: apoc.periodic.*), and a server that ignores the read access mode would run it.
NEO4J_PROCEDURES = ("db.labels", "db.relationshipTypes", "db.propertyKeys", "db.schema.visualization",
                    "db.schema.nodeTypeProperties", "db.schema.relTypeProperties")


def check_neo4j(text: str) -> None:
    """Refuse a CALL of any procedure but NEO4J_PROCEDURES (``CALL { subquery }`` stays allowed; its clauses
    went through ``prepare``'s write check)."""
    toks = tokens(text)
    for i, t in enumerate(toks):
        if t.word != "CALL" or not _is_bare(toks, i) or (i + 1 < len(toks) and toks[i + 1].text in ("{", "(")):
            continue
        parts, j = [], i + 1
        while j < len(toks) and toks[j].kind in ("name", "quoted"):
            parts.append(toks[j].text.strip("`").replace("``", "`").lower())
            if j + 1 < len(toks) and toks[j + 1].text == ".":
                j += 2
            else:
                break
        name = ".".join(parts)
        if name not in {p.lower() for p in NEO4J_PROCEDURES}:
            raise RefusedWrite(f"refused: CALL {name or '...'} is not allowed here; the procedures are "
                               + ", ".join(f"{p}()" for p in NEO4J_PROCEDURES))


# --- Ladybug: checks ----------------------------------------------------------------------------------
_LADYBUG_STARTS = {"MATCH", "OPTIONAL", "UNWIND", "WITH", "RETURN", "CALL"}
_LADYBUG_CALLS = {"show_tables", "table_info", "show_connection", "show_functions", "db_version"}
MAX_RANGE = 10_000_000  # range() builds its whole list first: the timeout cannot stop it, and 1e11 crashes


def _check_ladybug(toks: list[Token]) -> None:
    first = toks[1] if toks[0].word in ("EXPLAIN", "PROFILE") and len(toks) > 1 else toks[0]
    if first.word not in _LADYBUG_STARTS:
        raise QuerySyntaxError(f"not a read query ({first.text} ...): start with MATCH, OPTIONAL MATCH, UNWIND, "
                               "WITH, RETURN or CALL")
    for i, t in enumerate(toks):
        if t.word == "CALL" and _is_bare(toks, i):
            name, paren = (toks[i + 1].text, toks[i + 2].text) if i + 2 < len(toks) else ("", "")
            if name.lower() not in _LADYBUG_CALLS or paren != "(":
                raise RefusedWrite(f"refused: CALL {name} is not allowed here; the procedures are "
                                   + ", ".join(f"{c}()" for c in sorted(_LADYBUG_CALLS)))
        if t.word == "RANGE" and _is_bare(toks, i) and i + 1 < len(toks) and toks[i + 1].text == "(":
            args = [toks[a:b] for a, b in _split(toks, i + 2, _closing(toks, i + 1) or len(toks))]
            nums = ["".join(x.text for x in a) for a in args]
            if len(nums) in (2, 3) and all(re.fullmatch(r"-?\d+", n) for n in nums):
                step = abs(int(nums[2])) if len(nums) == 3 and int(nums[2]) else 1
                if abs(int(nums[1]) - int(nums[0])) // step > MAX_RANGE:
                    raise QueryError(f"range() of more than {MAX_RANGE:,} elements is refused: Ladybug builds the "
                                     "whole list before the time limit can stop it")


# --- Ladybug: rewrites --------------------------------------------------------------------------------
#: Neo4j-only function -> (arity, Ladybug template, note). Each gives Neo4j's value wherever it gives one.
_FUNCTIONS = {
    "tofloat": (1, "CAST({0} AS DOUBLE)", "toFloat(x) → CAST(x AS DOUBLE)"),
    "tointeger": (1, "CAST(({0}) - ({0}) % 1 AS INT64)",
                  "toInteger(x) → CAST(x - x % 1 AS INT64) (truncates toward zero, as Neo4j does; "
                  "numbers only)"),
    "toboolean": (1, "CAST({0} AS BOOL)", "toBoolean(x) → CAST(x AS BOOL)"),
    "type": (1, "label({0})", "type(r) → label(r)"),
    "labels": (1, "[label({0})]", "labels(n) → [label(n)] (Ladybug's labels() gives a string)"),
    "startnode": (1, "start_node({0})", "startNode(r) → start_node(r)"),
    "endnode": (1, "end_node({0})", "endNode(r) → end_node(r)"),
}
_AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX", "COLLECT", "PERCENTILECONT", "PERCENTILEDISC", "COUNT_IF"}
_ORDER_GUARD = " UNWIND [0] AS _keep_order"


def to_ladybug(text: str) -> tuple[str, list[str]]:
    """Ladybug's form of a prepared query, and a note per kind of rewrite made. Raises QuerySyntaxError,
    RefusedWrite or QueryError for queries Ladybug must not run."""
    toks = tokens(text)
    _check_ladybug(toks)
    notes: list[str] = []
    try:
        out = text[:toks[0].start] + _rewrite(text, toks, 0, len(toks), notes) + text[toks[-1].end:]
    except RecursionError:
        raise too_complex() from None
    return _keep_order(out, notes), notes


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)


def _rewrite(text: str, toks: list[Token], lo: int, hi: int, notes: list[str]) -> str:
    """The text of ``toks[lo:hi]`` with every rewrite applied (spacing and comments kept)."""
    out, i = [], lo
    while i < hi:
        if i > lo:
            out.append(text[toks[i - 1].end:toks[i].start])
        done = _rewrite_at(text, toks, i, hi, notes)
        if done:
            out.append(done[0])
            i = done[1]
        else:
            out.append(toks[i].text)
            i += 1
    return "".join(out)


def _rewrite_at(text: str, toks: list[Token], i: int, hi: int, notes: list[str]) -> tuple[str, int] | None:
    """(replacement, next index) for a rewritable construct starting at ``toks[i]``, else None."""
    t = toks[i]
    if t.kind == "op" and t.text == "!=":
        _note(notes, "!= → <>")
        return "<>", i + 1
    if t.text == "[" and i + 3 < hi and toks[i + 1].kind in ("name", "quoted") and toks[i + 2].word == "IN":
        return _comprehension(text, toks, i, hi, notes)
    if not (_is_bare(toks, i) and i + 1 < hi and toks[i + 1].text == "("):
        return None
    end = _closing(toks, i + 1)
    if end is None or end >= hi:
        return None
    spans = _split(toks, i + 2, end)
    name = t.text.lower()
    if name in _FUNCTIONS and len(spans) == _FUNCTIONS[name][0]:
        _, template, note = _FUNCTIONS[name]
        _note(notes, note)
        return template.format(*(_rewrite(text, toks, a, b, notes) for a, b in spans)), end + 1
    if name == "exists" and len(spans) == 1:
        a, b = spans[0]
        inner = _rewrite(text, toks, a, b, notes)
        depths = _depths(toks[a:b])
        if toks[a].text == "(" and any(x.text in ("-", "->", "<-") and d == 0 for x, d in zip(toks[a:b], depths)):
            _note(notes, "exists(pattern) → EXISTS { MATCH pattern }")
            return f"EXISTS {{ MATCH {inner} }}", end + 1
        _note(notes, "exists(x.prop) → (x.prop IS NOT NULL)")
        return f"({inner} IS NOT NULL)", end + 1
    if name in ("shortestpath", "allshortestpaths") and len(spans) == 1:
        return _shortest(text, toks, *spans[0], name == "allshortestpaths", notes, end)
    return None


def _comprehension(text, toks, i, hi, notes):
    """[x IN list WHERE p | e] → list_transform(list_filter(list, x -> p), x -> e)."""
    end = _closing(toks, i)
    if end is None or end >= hi:
        return None
    var, body = toks[i + 1].text, i + 3
    top = [j for j, d in zip(range(body, end), _depths(toks[body:end])) if d == 0]
    bar = next((j for j in top if toks[j].text == "|"), None)
    where = next((j for j in top if toks[j].word == "WHERE" and j < (bar or end)), None)
    list_end = min(j for j in (where, bar, end) if j is not None)
    out = _rewrite(text, toks, body, list_end, notes)
    if where is not None:
        out = f"list_filter({out}, {var} -> {_rewrite(text, toks, where + 1, bar or end, notes)})"
    if bar is not None:
        out = f"list_transform({out}, {var} -> {_rewrite(text, toks, bar + 1, end, notes)})"
    _note(notes, "[x IN l WHERE p | e] → list_transform(list_filter(l, x -> p), x -> e)")
    return out, end + 1


def _shortest(text, toks, a, b, every, notes, end):
    """shortestPath((a)-[:R*..n]->(b)) → (a)-[:R* SHORTEST 1..n]->(b); only for a lower bound of 1 (or none)."""
    stars = [j for j in range(a, b) if toks[j].text == "*"]
    if len(stars) != 1:
        return None
    j = stars[0] + 1
    lower = upper = None
    if j < b and toks[j].kind == "number":
        lower, j = toks[j].text, j + 1
    ranged = j < b and toks[j].text == ".."
    if ranged:
        j += 1
        if j < b and toks[j].kind == "number":
            upper, j = toks[j].text, j + 1
    if (lower is not None and (lower != "1" or not ranged)) or not re.fullmatch(r"\d*", upper or ""):
        return None  # a fixed length or a lower bound other than 1 has no Ladybug equivalent
    kind = "ALL SHORTEST" if every else "SHORTEST"
    star = f"* {kind}" + (f" 1..{upper}" if upper else "")
    out = text[toks[a].start:toks[stars[0]].start] + star + text[toks[j - 1].end:toks[b - 1].end]
    _note(notes, f"{'allShortestPaths' if every else 'shortestPath'}((a)-[:R*]->(b)) → (a)-[:R* {kind}]->(b) "
                 "(at most 30 hops)")
    return out, end + 1


def _keep_order(text: str, notes: list[str]) -> str:
    """Work around a Ladybug 0.22 bug: ``WITH ... ORDER BY ... LIMIT k`` directly followed by an aggregation
    loses its ORDER BY (the k rows are taken in storage order). A no-op UNWIND after that WITH keeps it."""
    toks = tokens(text)
    depths = _depths(toks)
    starts = [i for i, (t, d) in enumerate(zip(toks, depths)) if d == 0 and _is_bare(toks, i) and (
        t.word in ("MATCH", "UNWIND", "RETURN", "UNION", "CALL", "OPTIONAL")
        or (t.word == "WITH" and (i == 0 or toks[i - 1].word not in ("STARTS", "ENDS"))))]
    starts = [i for i in starts if not (toks[i].word == "MATCH" and i and toks[i - 1].word == "OPTIONAL")]
    clauses = list(zip(starts, starts[1:] + [len(toks)]))
    inserts = []
    for k, (a, b) in enumerate(clauses):
        words = {toks[j].word for j in range(a, b) if depths[j] == 0}
        if toks[a].word != "WITH" or "ORDER" not in words or not words & {"LIMIT", "SKIP"}:
            continue
        for c, d in clauses[k + 1:]:
            if toks[c].word not in ("WITH", "RETURN"):
                break
            clause = toks[c:d]
            if any(x.word in _AGGREGATES and y.text == "(" for x, y in zip(clause, clause[1:])):
                if not any(x.text == "*" and y.word in ("WITH", "RETURN", "DISTINCT")
                           for x, y in zip(clause[1:], clause)):
                    inserts.append(toks[b - 1].end)
                break
            if "ORDER" in {x.word for x in clause}:
                break
    for pos in reversed(inserts):
        text = text[:pos] + _ORDER_GUARD + text[pos:]
    if inserts:
        _note(notes, "WITH ... ORDER BY ... LIMIT before an aggregation: added UNWIND [0] AS _keep_order "
                     "(Ladybug would otherwise drop the ORDER BY)")
    return text


# --- results and schema -------------------------------------------------------------------------------
def column_names(text: str, count: int) -> list[str] | None:
    """The column names Neo4j gives ``text``'s result (an item's alias, else its text as written), or None
    when they cannot be told from the text (``RETURN *``, or not ``count`` items)."""
    toks = tokens(text)
    depths = _depths(toks)
    top = [i for i, d in enumerate(depths) if d == 0]
    union = next((i for i in top if toks[i].word == "UNION"), len(toks))
    returns = [i for i in top if i < union and toks[i].word == "RETURN"]
    if not returns:
        return None
    start = returns[-1] + 1 + (returns[-1] + 1 < len(toks) and toks[returns[-1] + 1].word == "DISTINCT")
    end = next((i for i in top if start <= i < union and toks[i].word in ("ORDER", "SKIP", "LIMIT")), union)
    names = []
    for a, b in _split(toks, start, end):
        if b - a >= 3 and toks[b - 2].word == "AS":
            alias = toks[b - 1]
            names.append(alias.text[1:-1].replace("``", "`") if alias.kind == "quoted" else alias.text)
        elif b - a == 1 and toks[a].text == "*":
            return None
        else:
            names.append(text[toks[a].start:toks[b - 1].end])
    return names if len(names) == count else None


def schema_text(graph: GraphData) -> str:
    """The graph schema as the paper's ``Graph DB`` tool gives it: node labels and relationship patterns,
    each with its properties and their types."""
    def props(names, types):
        return " {" + ", ".join(f"{p}: {types[p]}" for p in names) + "}" if names else ""

    lines = ["Nodes:"]
    lines += [f"(:{t.label}{props(t.properties, t.types)})" for t in graph.nodes.values()]
    lines.append("Relationships:")
    lines += [f"(:{r.src})-[:{r.type}{props(r.properties, r.types)}]->(:{r.dst})" for r in graph.rels.values()]
    return "\n".join(lines)
