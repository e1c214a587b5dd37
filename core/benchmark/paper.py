"""The PlanRAG paper's published figures (GPT-4, temperature 0, zero-shot), to show beside a benchmark's own.

Source: Lee, An & Kim, "PlanRAG: A Plan-then-Retrieval Augmented Generation for Generative Large Language Models
as Decision Makers", NAACL 2024 — Tables 4-7 and Figure 5 (its bar labels); Tables 4-5 also in the DQA
README's "Published results". Databases: RDB (SQL) and GDB (graph); techniques by their command-line names.
"""

#: Table 5: accuracy % per scenario and database kind.
ACCURACY = {
    ("locating", "RDB"): {"singlerag": 25.5, "iterrag": 37.5, "planrag": 64.5},
    ("locating", "GDB"): {"singlerag": 35.5, "iterrag": 59.5, "planrag": 64.0},
    ("building", "RDB"): {"singlerag": 2.0, "iterrag": 34.7, "planrag": 40.6},
    ("building", "GDB"): {"singlerag": 3.0, "iterrag": 40.6, "planrag": 49.5},
}
#: Table 4: accuracy %, the average of RDB and GDB.
AVERAGE = {
    "locating": {"singlerag": 30.5, "iterrag": 48.5, "planrag": 64.3, "planrag-norp": 53.5},
    "building": {"singlerag": 2.5, "iterrag": 37.6, "planrag": 45.0, "planrag-norp": 44.1},
}
#: Figure 5: accuracy % on single-retrieval (SR) and multi-retrieval (MR) questions, split by the number of
#: retrievals IterRAG made; ``share`` is the split's share of the scenario's question-database pairs.
RETRIEVAL_SPLIT = {
    ("locating", "SR"): {"share": 20.1, "iterrag": 43.9, "planrag": 65.6},
    ("locating", "MR"): {"share": 79.9, "iterrag": 49.4, "planrag": 61.9},
    ("building", "SR"): {"share": 14.5, "iterrag": 12.5, "planrag": 20.2},
    ("building", "MR"): {"share": 85.5, "iterrag": 40.3, "planrag": 47.9},
}
#: Table 6: rate % of missed data analysis (critical values never queried).
MISSED = {"locating": {"iterrag": 3.3, "planrag": 1.3}, "building": {"iterrag": 33.2, "planrag": 21.8}}
#: Table 7: PlanRAG's question-database pairs by number of re-plans: (pairs, accuracy %); the paper's last
#: bucket reads "more than 4".
REPLANS = {
    "locating": {"0": (376, 66.8), "1": (0, None), "2": (12, 41.7), "3": (5, 20.0), "4+": (7, 0.0)},
    "building": {"0": (125, 57.6), "1": (0, None), "2": (24, 41.7), "3": (23, 21.7), "4+": (30, 13.3)},
}
