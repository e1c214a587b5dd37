"""The smoke benchmark: a benchmark without a model, played from the shipped scripted transcripts
(``core bench --smoke``, the Benchmark page's smoke run)."""
from __future__ import annotations

from core import scenarios
from core.benchmark.config import BenchConfig
from core.config.settings import PROJECT_ROOT
from core.model.technique import FEATURED

#: The techniques it runs: those with shipped transcripts (``featured``).
SMOKE_TECHNIQUES = FEATURED


def smoke_config(techniques: list[str] | None = None, **kw):
    """The smoke benchmark: demo question 1 of each scenario (``source="scenario"``: question 1 of each plugin
    scenario with a shipped transcript), played from the shipped scripted transcripts (assets/replays), results
    under bench/smoke (or bench/smoke-scenario) unless ``name`` or ``out`` say otherwise; no model, no key."""
    shipped = PROJECT_ROOT / "assets" / "replays"
    kw = {k: v for k, v in kw.items() if v is not None}
    kw.setdefault("source", "demo")
    if kw["source"] == "scenario" and kw.get("scenario", "all") == "all":  # those with a shipped transcript
        kw["scenario"] = ",".join(k.name for k in scenarios.all_types() if "scenario" in k.source_keys()
                                  and any(shipped.glob(f"scenario_{k.name}_1_*.json"))) or "all"
    kw.setdefault("name", "smoke" if kw["source"] == "demo" else f"smoke-{kw['source']}")
    return BenchConfig(list(techniques or SMOKE_TECHNIQUES), f"replay:{shipped}",
                       questions="1", cache=False, **kw)
