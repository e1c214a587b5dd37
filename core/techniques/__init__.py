"""The techniques, one folder each: its ``technique.toml`` (its id, label and attributes: the registry,
core.model.technique, reads them once per process) and its code, loaded when a run needs it (``engine.py``: its
``ENGINE``, core.agents.engine). A new technique is a new folder; nothing outside it names it."""
