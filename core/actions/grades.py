"""A run's grade overridden, or restored to the automatic one, by whoever the gate's ``override`` lets."""
from __future__ import annotations

from core.analysis.grading import override_for
from core.auth.gate import authorize
from core.auth.roles import Identity
from core.model.grade import Override
from core.model.run_settings import RunSettings
from core.store.overrides import OverrideStore


def override(run_id: str, settings: RunSettings, decision, *, who: Identity, by: str = "", note: str = "", root=None,
             store: OverrideStore | None = None) -> Override:
    """Override the stored run ``run_id``'s grade (its ``settings``) to ``decision`` for ``who``, as the gate's
    ``override`` lets them; recorded as ``who`` (a signed-in person always; ``by`` names the one person of
    single-user mode or the command line when given). The override stored."""
    authorize(who, "override")
    made = override_for(settings, decision, (by.strip() if not who.signed_in else "") or who.name, note, root)
    (store or OverrideStore()).put(run_id, made)
    return made


def restore(run_id: str, *, who: Identity, store: OverrideStore | None = None) -> bool:
    """Restore the run's automatic grade for ``who`` (the gate's ``override``); whether it had an override."""
    authorize(who, "override")
    return (store or OverrideStore()).clear(run_id)
