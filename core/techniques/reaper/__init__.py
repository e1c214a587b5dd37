"""REAPER (Joshi et al., CIKM 2024): one LLM call writes the whole retrieval plan, the plan runs, one call answers
(``graph``); its plan's grammar (``plan``), its prompts (``prompts``), the example plans its planner is shown
(``examples``)."""
