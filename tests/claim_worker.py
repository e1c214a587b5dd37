"""A process claiming one pause of a run in the run store (for the cross-process race test): it imports the run
store only, so that it starts fast."""
import os

from core.store.runs import PauseTaken, RunStore


def claim(path: str, run_id: str, barrier, results) -> None:
    store = RunStore(path)
    barrier.wait()
    try:
        store.claim_pause(run_id, "p1", {"action": "approve"}, f"pid{os.getpid()}", "plan")
        results.put("claimed")
    except PauseTaken as e:
        results.put(f"refused: {e}")
