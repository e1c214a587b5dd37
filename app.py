"""PlanRAG Workbench: the Streamlit entry point and page router."""
from ui import threads

# First, before this session imports anything else: other sessions' first runs import the same modules at once, and
# each first import must hold the interpreter's lock (ui/threads.py).
threads.guard()

import importlib  # noqa: E402

# By import_module, not ``from ui import shell``: as in ui/router.py, another session's import of it stopped midway
# must not fail this one.
shell = importlib.import_module("ui.shell")

shell.prepare()
try:
    shell.run(shell.navigation())
finally:  # after the first page: the warm-up's imports would hold the import lock the page's first imports take
    shell.warming()
