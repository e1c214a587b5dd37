"""PlanRAG w/o RP's own texts of the paper setting: the prefix and format instructions of the PlanRAG authors'
template without re-planning ("firstly" here, "first" in PlanRAG's); its improved prompt is composed from its
attributes (core.agents.prompts)."""
from core.agents.paper_prompts import ACT, ANSWER, COLLECT, HEAD, MULTIPLE, PLANNED

PAPER_PREFIX = (f"{HEAD}\n{COLLECT}\nTo this end, firstly, you need to plan which data would be needed in what "
                f"order.\n{MULTIPLE}")
PAPER_FORMAT = (f"{PLANNED}{ACT}Observation: the data from the database.\n... (a process of Current step, Thought, "
                f"Action, Action input, and Observation can repeat N times)\n{ANSWER}")
