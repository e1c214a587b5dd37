"""A process claiming one pause of a run in the run store (for the cross-process race test): it imports the run
store only, so that it starts fast."""
import os

from core.store.runs import PauseTaken, RunStore


def claim(path: str, run_ids: list[str], barrier, results) -> None:
    """Claim pause p1 of each run in turn, released with the other worker by ``barrier`` for each run; put
    (run id, "claimed" or "refused: ...") on ``results``."""
    store = RunStore(path)
    for run_id in run_ids:
        barrier.wait()
        try:
            store.claim_pause(run_id, "p1", {"action": "approve"}, f"pid{os.getpid()}", "plan")
            results.put((run_id, "claimed"))
        except PauseTaken as e:
            results.put((run_id, f"refused: {e}"))
