"""Its engine: the shared loop, with the improved setting's prompts (composed from its attributes) and its own
paper setting's texts (prompts.py)."""
from core.agents.graph import IMPROVED, LoopEngine, paper_prompt_set
from core.techniques.iterrag import prompts

ENGINE = LoopEngine({"improved": IMPROVED, "paper": paper_prompt_set(prompts.PAPER_PREFIX, prompts.PAPER_FORMAT)})
