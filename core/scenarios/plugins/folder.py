"""A scenario plugin: a folder with a ``scenario.toml`` (docs/scenarios.md describes every key), its business rules
(markdown), its data, and optionally a ``simulator.py``. Loading checks the declaration and says what is wrong with
the file and line; ``check`` also runs the candidates and the simulator on every candidate of every question.
"""
from __future__ import annotations

import importlib.util
import os
import re
import string
import sys
import tomllib
import traceback
from dataclasses import replace
from functools import cached_property
from pathlib import Path

from core.backends.base import DEFAULT_TIMEOUT_S, QueryError
from core.scenarios.dqa.source import SCENARIOS as DQA_SCENARIOS
from core.scenarios.dqa.source import DQAError
from core.scenarios.base import Effect, ScenarioType, Source
from core.scenarios.plugins.data import DataError, graph_of, read_csv_folder, read_mysql, read_neo4j, read_sqlite
from sims.files import FileRefused, check_file, check_folder, read_text
from sims.ranking import InputError, make_ranking
from sims.sqldump import DumpError, read_sql_dump
from core.model.question import DecisionWords
from core.model.question import Question
from core.model.question import Database
from sims.tables import Table

MANIFEST = "scenario.toml"
SOURCE = Source("scenario", "The scenario's own questions")
NAME = re.compile(r"^[a-z][a-z0-9-]{0,40}$")
DATA_KINDS = ("sqlite", "sql", "csv", "mysql", "neo4j")


#: A plugin's bounds: questions, the characters of a question's text once formatted, the width or precision a
#: template may give a parameter, and its queries' time and rows (an agent query's default time limit).
MAX_QUESTIONS = 1000
MAX_QUESTION_CHARS = 20_000
MAX_FORMAT_WIDTH = 100
QUERY_TIMEOUT_S = DEFAULT_TIMEOUT_S
QUERY_ROW_CAP = 10_000


class _BoundedFormatter(string.Formatter):
    """``str.format`` on a plugin's parameters with bounded widths: a field names a parameter (no attribute or
    index), its width and precision are at most MAX_FORMAT_WIDTH, and the text at most MAX_QUESTION_CHARS."""

    def get_field(self, field_name, args, kwargs):
        if not re.fullmatch(r"\w+", field_name):
            raise ValueError(f"{{{field_name}}} is not a parameter's name (no attribute, no index)")
        return super().get_field(field_name, args, kwargs)

    def format_field(self, value, format_spec):
        if any(int(n) > MAX_FORMAT_WIDTH for n in re.findall(r"\d+", format_spec)):
            raise ValueError(f"the format {{:{format_spec[:40]}}} is wider than {MAX_FORMAT_WIDTH} characters")
        return super().format_field(value, format_spec)


def bounded_format(template: str, params: dict) -> str:
    """``template`` with ``params`` (see _BoundedFormatter); ValueError, KeyError or IndexError when it cannot."""
    text = _BoundedFormatter().vformat(template, (), params)
    if len(text) > MAX_QUESTION_CHARS:
        raise ValueError(f"the text is {len(text):,} characters long once formatted; at most "
                         f"{MAX_QUESTION_CHARS:,}")
    return text


class ScenarioError(DQAError, ValueError):
    """A scenario folder that cannot be used; the message names the file (and line) and what to fix."""

    def __init__(self, path, message: str, line: int | None = None):
        where = f"{path}, line {line}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.reason = str(path), line, message


def _line_of(path: Path, needle: str) -> int | None:
    """The first line of a file holding ``needle`` (for messages about a key)."""
    try:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if needle in line:
                return i
    except OSError:
        pass
    return None


class FolderScenario(ScenarioType):
    """A scenario declared by a folder (see the module doc)."""

    sources = (SOURCE,)

    def __init__(self, folder: str | Path):
        try:
            self.folder = check_folder(folder)
        except FileNotFoundError:
            self.folder = Path(os.path.realpath(folder))  # said below: no manifest
        except FileRefused as e:
            raise ScenarioError(folder, e.rule) from None
        self.manifest = self.folder / MANIFEST
        self.origin = str(self.folder)
        if not os.path.lexists(self.manifest):
            raise ScenarioError(self.folder, f"no {MANIFEST}: not a scenario folder "
                                             "(python -m core scenario new NAME writes one)")
        try:
            self.spec = tomllib.loads(read_text(self.manifest, "scenario file"))
        except FileRefused as e:
            raise ScenarioError(self.manifest, e.rule) from None
        except UnicodeDecodeError:
            raise ScenarioError(self.manifest, "not UTF-8 text") from None
        except tomllib.TOMLDecodeError as e:
            m = re.search(r"line (\d+)", str(e))
            raise ScenarioError(self.manifest, f"not valid TOML ({e})", int(m.group(1)) if m else None) from None
        self._validate()
        self._questions: list | None = None
        self._database = None

    # --- the declaration ---
    def _fail(self, key: str, message: str):
        raise ScenarioError(self.manifest, message, _line_of(self.manifest, key))

    def _check_file(self, name: str, key: str, what: str) -> None:
        """Fail (at ``key``) unless the folder's file ``name`` is a regular scenario file within its cap."""
        try:
            check_file(self.folder / name, "scenario file")
        except FileNotFoundError:
            self._fail(key, f"{what} {name} not found in {self.folder}")
        except FileRefused as e:
            self._fail(key, f"{what} {e}")

    def _validate(self) -> None:
        s = self.spec
        name = s.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            self._fail("name", f"name must be lowercase letters, digits and hyphens, starting with a letter "
                               f"(got {name!r})")
        if name in DQA_SCENARIOS:
            self._fail("name", f"name {name!r} is taken by a built-in scenario")
        self.name, self.title = name, str(s.get("title") or name.replace("-", " ").title())
        self.description = str(s.get("description", ""))
        data = s.get("data")
        if not isinstance(data, dict) or sum(k in data for k in DATA_KINDS) != 1:
            self._fail("[data]", f"[data] must give exactly one of {', '.join(DATA_KINDS)}")
        rules = s.get("rules", {}).get("file")
        if rules:
            self._check_file(rules, "[rules]", "rules file")
        q = s.get("questions")
        if not isinstance(q, dict) or not isinstance(q.get("template"), str):
            self._fail("[questions]", "[questions] needs a template (the question text, with {parameters})")
        params = q.get("parameters", {})
        asks = q.get("ask")
        if not isinstance(asks, list) or not asks:
            self._fail("[[questions.ask]]", "no question: add [[questions.ask]] tables, one per question")
        if len(asks) > MAX_QUESTIONS:
            self._fail("[[questions.ask]]", f"{len(asks):,} questions: a scenario has at most {MAX_QUESTIONS:,} "
                                            "(split it into several scenarios)")
        for i, ask in enumerate(asks, 1):
            unknown = sorted(set(ask) - set(params) - {"answer"})
            missing = sorted(set(params) - set(ask))
            if unknown or missing:
                self._fail("[[questions.ask]]", f"question {i}: " + "; ".join(
                    ([f"parameter {', '.join(unknown)} is not declared in [questions.parameters]"] if unknown else [])
                    + ([f"lacks parameter {', '.join(missing)}"] if missing else [])))
        for key in ("template", "goal", "target"):
            try:
                for ask in asks:
                    bounded_format(str(q.get(key, "")), ask)
            except (KeyError, IndexError) as e:
                self._fail(key, f"questions.{key} uses {e} which is not a parameter")
            except ValueError as e:
                self._fail(key, f"questions.{key}: {e}")
        c = s.get("candidates")
        if not isinstance(c, dict) or sum(k in c for k in ("query", "function")) != 1:
            self._fail("[candidates]", "[candidates] must give a query (SQL on the data) or a function "
                                       "(name in simulator.py)")
        if c.get("by", "name") not in ("name", "id"):
            self._fail("by", "candidates.by must be \"name\" or \"id\"")
        sim = s.get("simulator")
        self.can_check = isinstance(sim, dict) and bool(sim.get("file"))
        if self.can_check:
            if sim.get("direction") not in ("min", "max"):
                self._fail("direction", 'simulator.direction must be "min" (lower scores are better) or "max"')
            self._check_file(sim["file"], "[simulator]", "simulator file")
        planner = s.get("planner", {})
        if planner and (not isinstance(planner.get("question"), str)
                        or not any(isinstance(planner.get(k), str) for k in ("sql", "cypher"))):
            self._fail("[planner]", "[planner] needs a question and an example plan for sql and/or cypher")
        net = s.get("network", {})
        for n in net.get("nodes", []):
            if "table" not in n:
                self._fail("[[network.nodes]]", "a [[network.nodes]] entry needs a table")
        for e in net.get("edges", []):
            if not all(k in e for k in ("table", "source", "target")):
                self._fail("[[network.edges]]", "a [[network.edges]] entry needs table, source and target")

    @property
    def planner_examples(self) -> dict:
        """``[planner]``: an example question and its retrieval plan per query language, for REAPER's planner."""
        planner = self.spec.get("planner", {})
        return {language: (planner["question"], planner[language].strip()) for language in ("sql", "cypher")
                if isinstance(planner.get(language), str)}

    @property
    def words(self):
        c = self.spec["candidates"]
        cues = tuple(str(w).lower() for w in c.get("id_cues", ()))
        return DecisionWords(c.get("by", "name"), id_cues=cues + ("id", "#", "no", "number"),
                             quantity_before=("by", "to", "from", "of", "at", "$", "£", "€", "x", "cost", "price"),
                             quantity_after=("%", "percent", "units", "km", "x", "times", "$", "£", "€"))

    @cached_property
    def module(self):
        """The simulator module (simulator.py), imported once; ScenarioError with its file and line on a failure."""
        path = self.folder / self.spec["simulator"]["file"] if self.can_check else None
        if path is None:
            return None
        return self._import(path)

    def _text(self, path: Path) -> str:
        """A scenario file's text; ScenarioError when it is refused or not UTF-8."""
        try:
            return read_text(path, "scenario file")
        except FileRefused as e:
            raise ScenarioError(path, e.rule) from None
        except UnicodeDecodeError:
            raise ScenarioError(path, "not UTF-8 text") from None
        except FileNotFoundError:
            raise ScenarioError(path, "not found") from None

    def _import(self, path: Path):
        self._text(path)  # checked (a regular file, within its cap) before Python reads it
        name = f"planrag_scenario_{self.name.replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # the user's code: report where it failed
            raise self._code_error(path, e) from None
        sys.modules[name] = module
        return module

    def _code_error(self, path: Path, e: BaseException) -> ScenarioError:
        line = getattr(e, "lineno", None) if isinstance(e, SyntaxError) else None
        for frame in traceback.extract_tb(e.__traceback__):
            if Path(frame.filename).resolve() == path.resolve():
                line = frame.lineno
        return ScenarioError(path, f"{type(e).__name__}: {e}", line)

    def _function(self, key: str, default: str | None = None, required: bool = False):
        mod = self.module
        name = (self.spec.get("simulator") or {}).get(key, default)
        fn = getattr(mod, name, None) if mod is not None and name else None
        if fn is None and required:
            path = self.folder / self.spec["simulator"]["file"]
            raise ScenarioError(path, f"defines no function {name}() (simulator.{key} in {MANIFEST})")
        return fn

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # the user's code
            path = Path(fn.__code__.co_filename)
            raise InputError(str(self._code_error(path, e))) from None

    # --- questions and data ---
    def questions(self, source: str = "scenario", root=None) -> list:
        if self._questions is None:
            q = self.spec["questions"]
            rules_file = self.spec.get("rules", {}).get("file")
            rules = self._text(self.folder / rules_file) if rules_file else ""
            out = []
            for n, ask in enumerate(q["ask"], 1):
                params = {k: v for k, v in ask.items() if k != "answer"}
                question = Question(self.name, SOURCE.key, n, n, rules, bounded_format(q["template"], params),
                                    bounded_format(q.get("goal", ""), params), "", year=None,
                                    answer=ask.get("answer"), database_ref=self._data_label(),
                                    params=tuple((k, tuple(v) if isinstance(v, list) else v)
                                                 for k, v in params.items()))
                if question.answer is None and self.can_check:
                    try:
                        question = replace(question, answer=self.ranking(question, self.database(question)).label())
                    except InputError:
                        pass  # check reports it; the question stays unlabelled
                out.append(question)
            self._questions = out
        return self._questions

    def database(self, question=None, root=None):
        if self._database is None:
            tables = self._read()
            net = self.spec.get("network", {})
            try:
                graph = graph_of(tables, net.get("nodes", []), net.get("edges", []))
            except (DataError, KeyError, ValueError) as e:
                self._fail("[network", f"cannot build the graph view: {e}")
            key = f"{self.name}-{tables.content_hash()[:12]}"
            self._database = Database(key, self.name, tables, graph, [str(self.folder)])
        return self._database

    def _data_source(self) -> tuple[str, str]:
        """The ``[data]`` kind (one of DATA_KINDS) and its value (a path, or a server's address)."""
        data = self.spec["data"]
        kind = next(k for k in DATA_KINDS if k in data)
        return kind, str(data[kind])

    def _data_label(self) -> str:
        """Where the data comes from, as a person reads it (a server's address, which may hold a password, never)."""
        kind, value = self._data_source()
        return {"csv": f"{value}/ (CSV files)", "sqlite": f"{value} (SQLite)", "sql": f"{value} (SQL dump)",
                "mysql": "a MySQL database (read-only snapshot)",
                "neo4j": "a Neo4j database (read-only snapshot)"}[kind]

    def _read(self):
        data = self.spec["data"]
        kind, value = self._data_source()
        try:
            if kind == "csv":
                return read_csv_folder(self.folder / value)
            if kind == "sqlite":
                return read_sqlite(self.folder / value)
            if kind == "sql":
                try:
                    return read_sql_dump(self.folder / value)
                except (DumpError, FileNotFoundError, FileRefused) as e:
                    raise DataError(str(e)) from None
            if kind == "mysql":
                return read_mysql(value, data.get("tables"))
            return read_neo4j(value, data.get("user", "neo4j"), data.get("password", ""))
        except DataError as e:
            raise ScenarioError(self.manifest, f"data: {e}", _line_of(self.manifest, kind)) from None

    # --- decisions ---
    def _query(self, database, sql: str, key: str) -> list[tuple]:
        """The rows of a plugin's query (SQLite, on its tables as given), run as an agent's query is: read-only, in
        a worker process, within QUERY_TIMEOUT_S, QUERY_ROW_CAP rows and the result's character caps; a query
        past one of them fails, saying which."""
        from core.backends import sqlite as sqlite_backend  # heavy (sqlglot, 45 ms): not for a page that only lists

        try:
            result = sqlite_backend.query_file(sqlite_backend.database_file(database, typed=False), sql,
                                               QUERY_TIMEOUT_S, QUERY_ROW_CAP)
        except QueryError as e:
            self._fail(key, f"candidates.{key} query failed: {e}")
        if result.truncated:
            self._fail(key, f"candidates.{key} query gives more than {QUERY_ROW_CAP:,} rows")
        if result.notes:
            self._fail(key, f"candidates.{key} query gives more than it may: {'; '.join(result.notes)}")
        return [tuple(r) for r in result.rows]

    def candidates(self, question, database) -> list:
        c = self.spec["candidates"]
        if "query" in c:
            found = [r[0] for r in self._query(database, c["query"], "query")]
        else:
            fn = self._function("candidates", c["function"], True) if self.can_check else None
            if fn is None:
                self._fail("function", "candidates.function needs a [simulator] file that defines it")
            found = list(self._call(fn, database.tables, question))
        return [int(x) for x in found] if c.get("by") == "id" else [str(x) for x in found]

    def candidate_names(self, question, database) -> dict:
        c = self.spec["candidates"]
        cands = self.candidates(question, database)
        if "names" not in c:
            return {x: str(x) for x in cands}
        named = {(int(a) if c.get("by") == "id" else str(a)): str(b) for a, b in self._query(database, c["names"],
                                                                                               "names")}
        return {x: named.get(x, str(x)) for x in cands}

    def target(self, question) -> str:
        template = self.spec["questions"].get("target")
        if template:
            return bounded_format(template, question.parameters)
        return ", ".join(f"{k} {v}" for k, v in question.parameters.items()) or self.title

    def score_name(self, question) -> str:
        sim = self.spec.get("simulator") or {}
        return bounded_format(str(sim.get("score_name", "score")), question.parameters)

    def ranking(self, question, database, mode=None):
        if not self.can_check:
            return super().ranking(question, database, mode)
        score = self._function("score", "score", True)
        cands = self.candidates(question, database)
        scores = []
        for c in cands:
            value = self._call(score, database.tables, question, c)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
                raise InputError(f"{self.folder / self.spec['simulator']['file']}: score() returned {value!r} for "
                                 f"candidate {c!r}; it must return a number")
            scores.append(float(value))
        higher = self.spec["simulator"]["direction"] == "max"
        baseline_fn = self._function("baseline", "baseline")
        if baseline_fn is not None:
            baseline = float(self._call(baseline_fn, database.tables, question))
        else:  # no "no decision" score: gains are over the worst candidate
            baseline = (min if higher else max)(scores, default=0.0)
        return make_ranking(self.name, mode or "default", cands, scores, baseline, baseline, higher)

    def what_if(self, question, database, decision, mode):
        fn = self._function("what_if", "what_if") if self.can_check else None
        if fn is None:
            return None
        ranking = self.ranking(question, database, mode)
        changes = self._call(fn, database.tables, question, decision)
        sim = self.spec["simulator"]
        return Effect(decision, self.score_name(question), ranking.baseline, ranking.score_of(decision),
                      {k: (float(b), float(a)) for k, (b, a) in dict(changes).items()},
                      str(sim.get("measure", "value")), item=str(sim.get("item", "item")))

    # --- drawing ---
    def _network(self) -> dict | None:
        """The ``[network]`` declaration, when it names both nodes and edges (else the scenario draws no network)."""
        net = self.spec.get("network", {})
        return net if net.get("nodes") and net.get("edges") else None

    def network(self, question, database, *, pick=None, best=None, pick_label="agent's pick", change=None,
                around=None, **options):
        net = self._network()
        if net is None:
            return None
        from core.scenarios.plugins.network import draw  # heavy: loads networkx, plotly

        to_node = {}
        place = net.get("candidates")
        if place:
            rows = self._query(database, f'SELECT "{place["key"]}", "{place["node"]}" FROM "{place["table"]}"',
                               "candidates")
            to_node = {(int(a) if self.spec["candidates"].get("by") == "id" else str(a)): str(b) for a, b in rows}
        cands = self.candidates(question, database)
        return draw(database.tables, net["nodes"][0], net["edges"][0], pick=to_node.get(pick, pick),
                    best=to_node.get(best, best), pick_label=pick_label, change=change,
                    candidates={str(to_node.get(c, c)) for c in cands}, around=around,
                    existing={node for site, node in to_node.items() if site not in set(cands)})

    def node_names(self, question, database) -> dict:
        """Every node of the declared network, by its label column (else its id), for the view's search."""
        net = self._network()
        if net is None:
            return {}
        from core.scenarios.plugins.network import node_key  # heavy: loads networkx, plotly

        nodes = net["nodes"][0]
        table = next((t for t in database.tables if t.name == nodes["table"]), None)
        if table is None:
            return {}
        key = node_key(table, nodes)
        label = nodes.get("label") or key
        return {str(r[key]): str(r[label]) for r in table.records()}

    def node_rows(self, database, node_id: str) -> dict:
        out = {}
        for t in database.tables:
            keep = [row for row in t.rows if any(str(v) == str(node_id) for v in row)]
            if keep:
                out[t.name] = Table(t.name, t.columns, t.primary_key, keep)
        return out
