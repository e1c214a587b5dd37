"""Its engine: the shared loop, with the improved setting's prompts (composed from its attributes), its own paper
setting's texts (prompts.py), and AutoPlan's agent for a run given a plan in the paper setting."""
from core.agents.graph import IMPROVED, LoopEngine, paper_prompt_set
from core.techniques.autoplan import follow
from core.techniques.planrag_norp import prompts

ENGINE = LoopEngine({"improved": IMPROVED, "paper": paper_prompt_set(prompts.PAPER_PREFIX, prompts.PAPER_FORMAT)},
                    parts=(follow.PART,))
