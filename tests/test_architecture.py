"""The structure holds (issue 24): the import graph of app.py, pages/, ui/, core/ and sims/, counting the imports
inside functions, has no cycle and no import against the layer map (docs/architecture.md), and every import inside
a function says why it is there (a short comment: heavy or optional)."""
# restructure-apply: skip (names the new packages as text)
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from core.scenarios.network_view import strong_components

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("app.py", "pages", "ui", "core", "sims")

#: Which layer may import which (besides itself). A layer is a top-level folder or a package of core/.
ALL_CORE = {"core.model", "core.config", "core.backends", "core.scenarios", "core.llm", "core.auth", "core.store",
            "core.analysis", "core.telemetry", "core.agents", "core.benchmark", "core.techniques", "core.actions",
            "core.jobs"}
MAY_IMPORT = {
    "app": {"ui"} | ALL_CORE,
    "pages": {"ui", "sims"} | ALL_CORE,
    "ui": ALL_CORE,
    "core.model": {"sims"},
    "core.config": {"core.model"},
    "core.backends": {"core.model", "core.config", "sims"},
    "core.llm": {"core.model", "core.config", "sims"},
    "core.auth": {"core.model", "core.config", "core.llm", "core.store"},
    "core.store": {"core.model", "core.config"},
    "core.telemetry": {"core.model", "core.config"},
    "core.scenarios": {"core.model", "core.config", "core.backends", "sims"},
    "core.analysis": {"core.model", "core.config", "core.backends", "core.scenarios", "core.llm", "core.store",
                      "sims"},
    "core.agents": {"core.model", "core.config", "core.backends", "core.scenarios", "core.llm", "core.auth",
                    "core.store", "core.analysis", "core.telemetry", "sims"},
    "core.benchmark": {"core.model", "core.config", "core.backends", "core.scenarios", "core.llm", "core.auth",
                       "core.store", "core.analysis", "core.telemetry", "core.agents", "sims"},
    "core.techniques": {"core.model", "core.config", "core.backends", "core.scenarios", "core.llm", "core.auth",
                        "core.store", "core.analysis", "core.telemetry", "core.agents", "sims"},
    "core.actions": {"core.model", "core.config", "core.backends", "core.scenarios", "core.llm", "core.auth",
                     "core.store", "core.analysis", "sims"},
    "core.evals": ALL_CORE - {"core.jobs", "core.actions"} | {"sims"},
    "core.jobs": ALL_CORE - {"core.jobs"} | {"sims"},
    "core.cli": ALL_CORE | {"core.evals", "sims"},
    "core.__main__": {"core.cli"},
    "sims": set(),
}
WHY = ("heavy", "optional")  # the words a function-local import's comment says why with


def modules() -> dict[str, Path]:
    out = {}
    for root in ROOTS:
        path = ROOT / root
        files = [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
        for f in files:
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = f
    return out


def _resolve(name: str, mods: dict) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def graph(mods: dict) -> tuple[dict[str, set[str]], list[tuple[str, int, str, str]]]:
    """Edges module -> imported modules (a ``from X import y`` imports X, and X.y when that is a module), and the
    function-local imports as (module, line, imported, the comment on its line)."""
    edges, local = defaultdict(set), []
    for m, path in mods.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, str(path))
        package = m if path.name == "__init__.py" else m.rpartition(".")[0]
        inner = {id(node) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for node in ast.walk(f) if isinstance(node, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                found = _resolve(target, mods)
                if found and found != m:
                    edges[m].add(found)
                    if id(node) in inner:
                        comment = lines[node.lineno - 1].partition("#")[2] or lines[node.end_lineno - 1].partition("#")[2]
                        local.append((m, node.lineno, found, comment.strip()))
    return edges, local


def layer(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "core" and len(parts) > 1 else parts[0]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (network_view's Tarjan, the network figures' own)."""
    dests = {n: [] for targets in edges.values() for n in targets} | {n: sorted(t) for n, t in sorted(edges.items())}
    return [sorted(group) for group in strong_components(dests) if len(group) > 1]


def test_the_import_graph_has_no_cycle():
    edges, _ = graph(modules())
    assert cycles(edges) == []


def test_no_import_breaks_the_layers():
    edges, _ = graph(modules())
    breaks = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                    if layer(a) != layer(b) and b != "core" and layer(b) not in MAY_IMPORT[layer(a)])
    assert breaks == []


def test_nothing_imports_the_command_line():
    edges, _ = graph(modules())
    assert sorted(a for a, targets in edges.items() for b in targets
                  if layer(b) == "core.cli" and layer(a) not in ("core.cli", "core.__main__")) == []


def test_a_function_local_import_says_why():
    _, local = graph(modules())
    unexplained = sorted({f"{m}:{line} imports {target}" for m, line, target, comment in local
                          if not any(word in comment.lower() for word in WHY)})
    assert unexplained == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Where a database connection may be opened: the store opener (docs/architecture.md, "opening a store") and the
#: engines of the databases the agents query (a question's database, a plugin scenario's data).
CONNECTS = {"core.store.database", "core.store.sqlite", "core.backends.engines", "core.backends.sqlite",
            "core.scenarios.plugins.data"}


def test_only_the_store_opener_connects():
    """No ``psycopg.connect`` or ``sqlite3.connect`` outside the store opener and the query engines."""
    found = []
    for m, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("psycopg", "sqlite3")
                    and m not in CONNECTS):
                found.append(f"{m}:{node.lineno}")
    assert found == []


#: Where a technique's id may appear as text outside the technique folders, each for a reason that is not the
#: technique: (module, the text) -> why.
NOT_A_TECHNIQUE = {
    ("core.auth.config", "planrag"): "the secrets file's [planrag] table: the project's name",
    ("core.cli.main", "autoplan"): "the `core autoplan` command's name (AutoPlan's training, in its folder)",
}


def technique_ids() -> set[str]:
    import tomllib

    return {tomllib.loads(f.read_text(encoding="utf-8"))["id"]
            for f in (ROOT / "core" / "techniques").glob("*/technique.toml")}


def test_no_module_outside_a_technique_folder_names_a_technique():
    """Every string constant equal to a technique's id, outside core/techniques/: what the workbench knows of a
    technique comes from the registry (core.model.technique), never from a check on its name."""
    ids, named = technique_ids(), []
    for m, path in modules().items():
        if m.startswith("core.techniques."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Constant) and node.value in ids and (m, node.value) not in NOT_A_TECHNIQUE:
                named.append(f"{m}:{node.lineno} {node.value!r}")
    assert named == []


def test_every_technique_folder_registers_one_technique():
    from core.model.technique import TECHNIQUES

    folders = sorted(f.parent.name for f in (ROOT / "core" / "techniques").glob("*/technique.toml"))
    assert sorted(t.folder for t in TECHNIQUES.values()) == folders and set(TECHNIQUES) == technique_ids()


def job_kinds() -> set[str]:
    """The names of core.jobs.job.Job and of every class of core/jobs/ deriving from it."""
    bases = {node.name: {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
             for f in (ROOT / "core" / "jobs").glob("*.py")
             for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)}
    kinds = {"Job"}
    while new := {name for name, of in bases.items() if of & kinds} - kinds:
        kinds |= new
    return kinds


def test_no_caller_branches_on_a_job_kind():
    """A job of any kind (a run driven here, a run another process drives, a benchmark) is followed through the one
    interface of core.jobs.job.Job: no ``isinstance`` or ``issubclass`` on a job class anywhere."""
    kinds, found = job_kinds(), []
    assert {"Job", "RunJob", "RunFollower", "BenchJob"} <= kinds
    for m, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
                classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                if {c.id if isinstance(c, ast.Name) else getattr(c, "attr", "") for c in classes} & kinds:
                    found.append(f"{m}:{node.lineno}")
    assert found == []


_PERCENT_CODE = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[dfeEgGHMSYmb]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*:[^{}]*\}")


def hand_formatted(tree: ast.AST) -> list[tuple[int, str]]:
    """Where ``tree`` formats a number or a moment by hand: a format spec in an f-string (``{x:.2f}``, ``{x:,}``,
    ``{t:%H:%M}``), ``format(x, spec)``, ``"{:.1f}".format(x)``, ``"%.1f" % x``, any ``strftime``, or a time
    format written out (``"%Y-%m-%d"``: TIME_FORMAT's bypass)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            found.append((node.lineno, f"{{{ast.unparse(node.value)}:{ast.unparse(node.format_spec)[2:-1]}}}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "strftime":
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format":
            found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
              and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
              and _FORMAT_FIELD.search(node.func.value.value)):
            found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)
              and isinstance(node.left.value, str) and _PERCENT_CODE.search(node.left.value)):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"%[HMSYmd][-:/ ]%",
                                                                                           node.value):
            found.append((node.lineno, repr(node.value)))
    return found


def test_pages_format_numbers_and_moments_through_the_one_formatter():
    """Every number and moment a page shows as text is formatted by core.analysis.format (number, percent, usd,
    duration, timestamp, clock): no page or ui module formats one by hand or writes its own time format."""
    found = [f"{m}:{line} {what}" for m, path in modules().items() if m.split(".")[0] in ("app", "pages", "ui")
             for line, what in hand_formatted(ast.parse(path.read_text(encoding="utf-8"), str(path)))]
    assert found == []


def test_the_command_line_and_the_stores_write_moments_through_the_one_formatter():
    """Every moment core/cli and core/store write as text is formatted by core.analysis.format / core.model.moments
    (timestamp, clock, file_stamp): no ``strftime`` and no time format written out there."""
    found = [f"{m}:{line} {what}" for m, path in modules().items() if m.startswith(("core.cli", "core.store"))
             for line, what in hand_formatted(ast.parse(path.read_text(encoding="utf-8"), str(path)))
             if "strftime" in what or "%" in what]
    assert found == []


_NUMBER_SPEC = re.compile(r"[.,]|[bcdeEfFgGnoxX%]$")  # a precision, grouping or a number's type (not ``:<9``)


def test_the_command_line_and_the_model_checks_format_numbers_through_the_one_formatter():
    """Every number core/cli prints and the model checks (core/llm/checks.py) say is formatted by
    core.analysis.format / core.model.quantities (number, percent, usd, duration): no number format spec there
    (a column's width, ``{name:<9}``, is text)."""
    found = [f"{m}:{line} {what}" for m, path in modules().items() if m.startswith("core.cli") or m == "core.llm.checks"
             for line, what in hand_formatted(ast.parse(path.read_text(encoding="utf-8"), str(path)))
             if not what.startswith("{") or _NUMBER_SPEC.search(what.rsplit(":", 1)[-1].rstrip("}"))]
    assert found == []


@pytest.mark.parametrize("code", ['f"{x:.2f}"', 'f"{n:,} tokens"', 'f"{t:%H:%M}"', 'format(x, ".1f")',
                                  '"{:.1f}%".format(x)', '"%.2f s" % x', 'd.strftime(FMT)',
                                  'FMT = "%Y-%m-%d %H:%M"'])
def test_the_formatting_check_finds_each_way_of_formatting_by_hand(code):
    assert hand_formatted(ast.parse(code))


def test_the_formatting_check_lets_text_be():
    assert hand_formatted(ast.parse('f"{name!r} at {at} · 100%" + "{x}".format(x=1) + "50% of %s" % n')) == []


DOCSTRING_CHARS = 400  # a docstring says what a thing is and what a caller must know; detail goes to comments, docs/


def test_docstrings_are_short():
    """No class or function docstring in app.py, pages/, ui/, core/ or sims/ runs past DOCSTRING_CHARS characters."""
    long = [f"{m}:{node.lineno} {node.name} ({len(ast.get_docstring(node))} characters)"
            for m, path in modules().items()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and len(ast.get_docstring(node) or "") > DOCSTRING_CHARS]
    assert long == []
