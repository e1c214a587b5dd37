"""Which example retrieval plans REAPER's planner prompt shows (``reaper_planner`` ``examples``, the default;
``zero-shot`` leaves them out): each scenario type's own ``planner_examples`` (the DQA ones:
core.scenarios.dqa.examples)."""
from __future__ import annotations

from core import scenarios
from core.model.run_settings import RunSettings


def all_examples() -> dict[tuple[str, str], tuple[str, str]]:
    """(scenario, language) -> (question, plan): every scenario type's example plans."""
    return {(kind.name, language): example for kind in scenarios.all_types()
            for language, example in kind.planner_examples.items()}


def examples(scenario: str, language: str) -> str:
    """The planner prompt's examples for a scenario's schema in a query language ("" when there are none)."""
    found = scenarios.get(scenario).planner_examples.get(language)
    if not found:
        return ""
    question, plan = found
    return f"An example of a good plan, for another question of this kind:\nQuestion: {question}\n{plan}"


def for_planner(settings: RunSettings, language: str) -> str:
    """What a run's planner prompt shows as examples: the scenario's, unless its planner is ``zero-shot``."""
    return "" if settings.reaper_planner == "zero-shot" else examples(settings.scenario, language)


def planner_used(settings: RunSettings, language: str) -> str:
    """The planner setting a run really had: ``zero-shot`` when its scenario has no example plan for the query
    language, whatever was asked for."""
    return "examples" if for_planner(settings, language) else "zero-shot"


def paper_examples(scenario: str, language: str) -> list[tuple[str, str]]:
    """Every example plan of a scenario in a query language, for the paper setting's planner prompt: its own and
    the shorter ones (``more_planner_examples``)."""
    kind = scenarios.get(scenario)
    found = kind.planner_examples.get(language)
    return ([found] if found else []) + list(kind.more_planner_examples.get(language, []))


def for_paper_planner(settings: RunSettings, language: str) -> list[tuple[str, str]]:
    """The paper setting's in-context examples: none for the ``zero-shot`` planner."""
    return [] if settings.reaper_planner == "zero-shot" else paper_examples(settings.scenario, language)
