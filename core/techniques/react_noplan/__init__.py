"""ReAct (Yao et al., "ReAct: Synergizing Reasoning and Acting in Language Models", ICLR 2023) without a plan:
the interleaved Thought, Action, Observation loop over the run's database tools, with no planning step; on the
shared loop (core.agents.graph) with its own prompt (``prompts``)."""
