"""PlanRAG's own texts of the paper setting: the prefix and format instructions of the PlanRAG authors' template
("first" here, "firstly" in PlanRAG w/o RP's); its improved prompt is composed from its attributes
(core.agents.prompts)."""
from core.agents.paper_prompts import ACT, ANSWER, COLLECT, HEAD, MULTIPLE, PLANNED, REPLAN

PAPER_PREFIX = (f"{HEAD}\n{COLLECT}\nTo this end, first, you need to plan which data would be needed in what order.\n"
                f"{MULTIPLE}")
PAPER_FORMAT = (f"{PLANNED}{ACT}Observation: the data from the database.\n{REPLAN}... (a process of Plan, Current "
                f"step, Thought, Action, Action input, Observation, and Re-plan can repeat N times)\n{ANSWER}")
