"""Its engine: its own graph (graph.py), the examples its planner is shown, its check of an edited plan."""
from __future__ import annotations

from core.agents.engine import Engine
from core.agents.workspace import Workspace
from core.model.run_settings import Review, RunSettings
from core.model.technique import Technique
from core.techniques.reaper import examples, graph


def _graph(prompt_setting: str):
    """Its graph, the same in both settings (its nodes read the run's setting from its state)."""
    return graph.build_graph()


class ReaperEngine(Engine):
    builder = staticmethod(_graph)
    llm_nodes = ("write_plan", "answer")

    def initial_state(self, tech: Technique, settings: RunSettings, ws: Workspace, hitl: str,
                      note: str | None) -> dict:
        backend = ws.backend
        return graph.initial_state(hitl, settings.limits, backend.language, backend.schema_text(), ws.question.text,
                                   note, settings.replan_on_failure is not False, settings.review_queries,
                                   examples=examples.for_planner(settings, backend.language), setting=settings.prompts,
                                   paper_examples=examples.for_paper_planner(settings, backend.language))

    def check_review(self, review: Review, values: dict) -> None:
        graph.check_review(review, values)

    def planner_used(self, settings: RunSettings, language: str) -> str | None:
        return examples.planner_used(settings, language)


ENGINE = ReaperEngine()
