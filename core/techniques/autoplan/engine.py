"""Its engine: the shared loop, with the improved setting's prompts and, in the paper setting, PlanRAG's texts (the
agent AutoPlan starts from a plan is PlanRAG's), acting as the AutoPlan paper's agent (follow.py)."""
from core.agents.graph import IMPROVED, LoopEngine, paper_prompt_set
from core.techniques.autoplan import follow
from core.techniques.planrag import prompts

ENGINE = LoopEngine({"improved": IMPROVED, "paper": paper_prompt_set(prompts.PAPER_PREFIX, prompts.PAPER_FORMAT)},
                    parts=(follow.PART,))
