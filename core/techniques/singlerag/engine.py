"""Its engine: the shared loop, with the improved setting's prompts (composed from its attributes), its own paper
setting's texts (prompts.py) and calls (paper.py), and AutoPlan's agent for a run given a plan in the paper setting
(its action call sent as SingleRAG's)."""
from core.agents.graph import IMPROVED, LoopEngine, paper_prompt_set
from core.techniques.autoplan import follow
from core.techniques.singlerag import paper, prompts

ENGINE = LoopEngine({"improved": IMPROVED, "paper": paper_prompt_set(prompts.PAPER_PREFIX, prompts.PAPER_FORMAT)},
                    parts=(follow.part(paper.SEND), paper.PART))
