"""The inputs of a run's limits and of a benchmark's budget, shared by the Settings and Benchmark pages."""
from __future__ import annotations

import streamlit as st

from core.model.bounds import NUMBERS
from core.model.run_settings import Limits
from ui.kept import kept


def limit_inputs(limits: Limits, key: str) -> Limits:
    """Inputs for the limits of each run and of each of its queries, starting from ``limits`` (0 leaves an optional
    limit off); the Limits they give (not yet validated)."""
    a, b, c, d, e = st.columns(5)
    calls = a.number_input("LLM calls", *NUMBERS["max_llm_calls"], limits.max_llm_calls, key=kept(f"{key}_calls"),
                           help="Per run; the last call asks for the final answer")
    tokens = b.number_input("Tokens", *NUMBERS["max_tokens"], limits.max_tokens, step=10_000, key=kept(f"{key}_tokens"),
                            help="Prompt + completion tokens per run before the final answer is asked for")
    cost = c.number_input("Cost (USD)", *NUMBERS["max_cost_usd"], limits.max_cost_usd or 0.0, step=0.01, format="%.2f",
                          key=kept(f"{key}_cost"), help="Estimated from the price table; 0: no cost limit")
    repeats = d.number_input("Repeats", *NUMBERS["max_repeats"], limits.max_repeats, key=kept(f"{key}_repeats"),
                             help="Repeated actions (the same query again) that end a run as stuck")
    context = e.number_input("Context window", 0, NUMBERS["context_tokens"][1], limits.context_tokens or 0, step=1024,
                             key=kept(f"{key}_context"), help="The model's context in tokens: older observations are "
                                                       "shortened to fit, with room for the reply cap; 0: what "
                                                       "the server reports (llama.cpp, vLLM), else nothing "
                                                       "shortened")
    f, g, h, i = st.columns(4)
    bounds = NUMBERS
    timeout = f.number_input("Query timeout (s)", *map(float, bounds["query_timeout_s"]),
                             float(limits.query_timeout_s), step=1.0, key=f"{key}_timeout",
                             help="Seconds each database query may run; it is then stopped (an error the agent sees). On the "
                                  "local Neo4j-protocol server (ArcadeDB) the client stops waiting then, but the "
                                  "server may go on with the query until its own command timeout (graph-server "
                                  "--command-timeout, 60 s by default): its Bolt side cancels no query a client "
                                  "gave up on")
    row_cap = g.number_input("Row cap", *bounds["row_cap"], int(limits.row_cap), step=50, key=f"{key}_row_cap",
                             help="Rows of a query's result kept in the run's record")
    observation = h.number_input("Observation (characters)", *bounds["observation_chars"],
                                 int(limits.observation_chars), step=1000, key=f"{key}_observation",
                                 help="Characters of a query's result the model sees; the rest is summarised")
    cell = i.number_input("Cell (characters)", *bounds["cell_chars"], int(limits.cell_chars), step=1000,
                          key=f"{key}_cell", help="Characters of one value kept; longer values are cut and marked")
    return Limits(**{**limits.__dict__, "max_llm_calls": int(calls), "max_tokens": int(tokens),
                     "max_cost_usd": float(cost) or None, "max_repeats": int(repeats),
                     "context_tokens": int(context) or None, "query_timeout_s": float(timeout),
                     "row_cap": int(row_cap), "observation_chars": int(observation), "cell_chars": int(cell)})


def budget_inputs(key: str) -> tuple[int | None, float | None, int | None]:
    """Inputs for a benchmark's budget: tokens, estimated cost and LLM calls its calls may spend (None: no cap)."""
    a, b, c = st.columns(3)
    tokens = a.number_input("Budget: tokens", *NUMBERS["budget_tokens"], 0, step=100_000, key=kept(f"{key}_budget_tokens"),
                            help="What the benchmark's LLM calls may spend (cached replies are free); it stops "
                                 "before the call past it, keeping the finished items. 0: no cap")
    cost = b.number_input("Budget: cost (USD)", *NUMBERS["budget_cost"], 0.0, step=1.0, format="%.2f",
                          key=kept(f"{key}_budget_cost"), help="Estimated from the price table. 0: no cap")
    calls = c.number_input("Budget: LLM calls", *NUMBERS["budget_calls"], 0, step=100, key=kept(f"{key}_budget_calls"),
                           help="LLM calls the benchmark may make; those in flight count, so never more. 0: no cap")
    return int(tokens) or None, float(cost) or None, int(calls) or None
