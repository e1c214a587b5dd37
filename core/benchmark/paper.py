"""The PlanRAG paper's published figures (GPT-4, temperature 0, zero-shot), to show beside a benchmark's own.

Source: Lee, An & Kim, "PlanRAG: A Plan-then-Retrieval Augmented Generation for Generative Large Language Models
as Decision Makers", NAACL 2024 — Tables 4-7 and Figure 5 (its bar labels); Tables 4-5 also in the DQA
README's "Published results". Databases: RDB (SQL) and GDB (graph); techniques by their ids. Each technique's figures are in its
``technique.toml`` (``[paper]``); here they are gathered by table.
"""

from core.model.technique import TECHNIQUES


def _by(table: str, split_key: bool = True) -> dict:
    """A table of the techniques' figures: key -> technique -> figure (keys ``scenario kind`` read as pairs)."""
    out: dict = {}
    for tech in TECHNIQUES.values():
        for key, figure in ((tech.paper or {}).get(table) or {}).items():
            out.setdefault(tuple(key.split()) if split_key else key, {})[tech.name] = figure
    return out


#: Table 5: accuracy % per scenario and database kind.
ACCURACY = _by("accuracy")
#: Table 4: accuracy %, the average of RDB and GDB.
AVERAGE = _by("average", split_key=False)
#: Figure 5's split: the share % of the scenario's question-database pairs with a single retrieval (SR) or
#: multiple (MR) by the number of retrievals of the retrieval baseline.
SHARE = {("locating", "SR"): 20.1, ("locating", "MR"): 79.9, ("building", "SR"): 14.5, ("building", "MR"): 85.5}
#: Figure 5: accuracy % on single-retrieval (SR) and multi-retrieval (MR) questions, with the split's ``share``.
RETRIEVAL_SPLIT = {key: {"share": SHARE[key], **figures} for key, figures in _by("retrieval_split").items()}
#: Table 6: rate % of missed data analysis (critical values never queried).
MISSED = _by("missed", split_key=False)
#: Table 7: question-database pairs by number of re-plans: technique -> scenario -> bucket -> (pairs, accuracy %).
REPLANS = {tech.name: {scenario: {bucket: (pair[0], pair[1] if len(pair) > 1 else None) for bucket, pair in buckets.items()}
                       for scenario, buckets in tech.paper["replans"].items()}
           for tech in TECHNIQUES.values() if tech.paper and "replans" in tech.paper}
