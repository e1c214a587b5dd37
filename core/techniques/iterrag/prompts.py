"""IterRAG's own texts of the paper setting: the prefix and format instructions of the PlanRAG authors' IterRAG
template (the trailing spaces theirs); its improved prompt is composed from its attributes (core.agents.prompts)."""
from core.agents.paper_prompts import ACT, ANSWER, COLLECT, HEAD, MULTIPLE, THOUGHT

PAPER_PREFIX = f"{HEAD} \n{COLLECT}\n{MULTIPLE}"
PAPER_FORMAT = (f"{THOUGHT}{ACT}Observation: the result of the action.\n... (a process of Thought, Action, Action "
                f"input, and Observation can repeat together N times)\n{ANSWER}")
