"""AutoPlan (Ouyang & Li, 2023): learn a task-level plan for a scenario from a batch of training questions by
experience collection, SIR reflection and plan update (train.py); learned plans are versioned (store.py) and
given to PlanRAG or IterRAG as the plan they start from (technique ``autoplan``)."""

#: the techniques that collect experience: the loop techniques that act over several steps
EXPERIENCE_TECHNIQUES = ("planrag", "planrag-norp", "iterrag")
