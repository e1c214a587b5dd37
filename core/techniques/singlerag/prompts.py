"""SingleRAG's own texts of the paper setting: the prefix and format instructions of the PlanRAG authors' SingleRAG
template (the trailing spaces theirs); its improved prompt is composed from its attributes (core.agents.prompts)."""
from core.agents.paper_prompts import ACT, ANSWER, HEAD, THOUGHT

PAPER_PREFIX = f"{HEAD} \nTo answer the question, you should collect the data from the following databases: "
PAPER_FORMAT = f"{THOUGHT}{ACT}Observation: the result of the action.\n{ANSWER}\n"


def answer_message(question: str, query: str, data: str) -> str:
    """The user message of SingleRAG's answer call, as the original filled its ``Question: {input}`` template: the
    question, the query as cut from the reply, and what the database returned."""
    return f"Question: \n{question}\nRetrieving query:{query}\nRetrieved data: {data}        \n"
