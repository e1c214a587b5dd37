"""DQA import: every question, each distinct database once, the data's defects repaired by rule."""
import json
import shutil

import pytest

from core.scenarios.dqa.source import DQA, DQAError
from core.scenarios import graph_from_tables
from core.scenarios.dqa.source import SCENARIOS
from core.scenarios import candidates
from sims.sqldump import DumpError


def test_question_counts_and_fields(dqa):
    loc, bld = dqa.questions("locating"), dqa.questions("building")
    assert len(loc) == 200 and len(bld) == 101
    assert [q.number for q in loc] == list(range(1, 201))
    assert all(q.question_num == q.number for q in loc)
    first = bld[0]
    assert (first.number, first.question_num, first.database_ref, first.goods) == (1, 2, "USA1836", "furniture")
    assert isinstance(first.answer, int)
    q1 = loc[0]
    assert (q1.country, q1.home, q1.answer) == ("SWE", "baltic_sea", "krakow")
    assert q1.text.startswith(q1.business_rules.strip("\n")) and q1.text.endswith(q1.goal)


def test_distinct_databases(dqa):
    assert dqa.distinct_databases("locating") == 3
    assert dqa.distinct_databases("building") == 37


def test_each_content_loaded_once(dqa):
    """Locating has one database content per year; every question of a year gets the same object."""
    by_year: dict[str, set[int]] = {}
    for q in dqa.questions("locating"):
        by_year.setdefault(q.year, set()).add(id(dqa.database(q)))
    assert len(by_year) == 3 and all(len(ids) == 1 for ids in by_year.values())


@pytest.mark.parametrize("number", [13, 97, 105, 143, 175, 140])
def test_has_has_merchant_read_as_has_merchant(dqa, number):
    q = dqa.question("locating", number)
    tables = dqa.database(q).tables
    assert "has_merchant" in tables["node_country"].column_names
    assert len(tables["node_country"].rows) > 1000  # no row dropped
    assert any("has_has_merchant read as" in n for n in dqa.notes(q))


def test_string_booleans_in_graph_files(dqa):
    q = dqa.question("locating", 1)
    graph = dqa.database(q).graph
    rel = graph.rels["NodeCountry"]
    assert rel.types["has_merchant"] == "BOOL"
    assert {r[2 + rel.properties.index("has_merchant")] for r in rel.rows} == {False}
    assert any('"True"/"False"' in n for n in dqa.notes(q))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_graph_file_matches_sql_file(dqa, scenario):
    """The .cql graph holds exactly the rows of the .sql tables, mapped as the README's schemas say."""
    seen = set()
    for q in dqa.questions(scenario):
        db = dqa.database(q)
        if db.key in seen:
            continue
        seen.add(db.key)
        derived = graph_from_tables(scenario, db.tables)
        for label, table in db.graph.nodes.items():
            assert table.rows == derived.nodes[label].rows, (q.id, label)
        for rtype, table in db.graph.rels.items():
            assert table.rows == derived.rels[rtype].rows, (q.id, rtype)


def test_candidates(dqa):
    q = dqa.question("locating", 1)
    cands = candidates(q, dqa.database(q))
    assert len(cands) == 79 and q.home not in cands and cands[0] == "african_great_lakes"
    b = dqa.question("building", 1)
    assert len(candidates(b, dqa.database(b))) == len(dqa.database(b).tables["building"].rows)


def test_unknown_question_is_a_clear_error(dqa):
    with pytest.raises(DQAError, match="questions 1-200"):
        dqa.question("locating", 201)
    with pytest.raises(DQAError, match="questions 1-101"):
        dqa.question("building", 0)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(DQAError, match="not found"):
        DQA(tmp_path)


def _copy_layout(dqa_dir, tmp_path):
    root = tmp_path / "dqa"
    for scenario in SCENARIOS:
        (root / scenario / "questions").mkdir(parents=True)
        for fmt in ("SQL_format", "LPG_format"):
            (root / scenario / "queries" / fmt).mkdir(parents=True)
    shutil.copy(dqa_dir / "locating/questions/simulated_question.json", root / "locating/questions")
    shutil.copy(dqa_dir / "building/questions/simulated_questions.json", root / "building/questions")
    return root


def test_truncated_database_file_names_file_and_line(dqa_dir, tmp_path):
    root = _copy_layout(dqa_dir, tmp_path)
    text = (dqa_dir / "locating/queries/SQL_format/q1.sql").read_text()
    lines = text.splitlines()
    (root / "locating/queries/SQL_format/q1.sql").write_text("\n".join(lines[:40]) + "\n" + lines[40][:25])
    shutil.copy(dqa_dir / "locating/queries/LPG_format/q1.cql", root / "locating/queries/LPG_format")
    bench = DQA(root)
    with pytest.raises(DumpError, match=r"q1\.sql, line 41"):
        bench.database(bench.question("locating", 1))
    with pytest.raises(DQAError, match="q2.sql not found"):
        bench.database(bench.question("locating", 2))


def test_malformed_question_file(dqa_dir, tmp_path):
    root = _copy_layout(dqa_dir, tmp_path)
    (root / "building/questions/simulated_questions.json").write_text(json.dumps([{"country": "USA1836"}]))
    with pytest.raises(DQAError, match="lacks a field"):
        DQA(root)
