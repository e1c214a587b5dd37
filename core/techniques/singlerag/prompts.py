"""SingleRAG's own texts of the paper setting: the prefix and format instructions of the PlanRAG authors' SingleRAG
template (the trailing spaces theirs); its improved prompt is composed from its attributes (core.agents.prompts)."""
from core.agents.paper_prompts import ACT, ANSWER, HEAD, THOUGHT

PAPER_PREFIX = f"{HEAD} \nTo answer the question, you should collect the data from the following databases: "
PAPER_FORMAT = f"{THOUGHT}{ACT}Observation: the result of the action.\n{ANSWER}\n"
