"""AutoPlan (Ouyang & Li, 2023): PlanRAG started from the scenario's learned plan, on the shared loop
(core.agents.graph; in the paper setting a run with a plan acts as AutoPlan's agent: thought, action and formalizer
calls). Its training, which learns the plans: ``train`` and its prompts ``prompts``."""
