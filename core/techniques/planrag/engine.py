"""Its engine: the shared loop with the loop's prompt sets."""
from core.agents.graph import LoopEngine

ENGINE = LoopEngine()
