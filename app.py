"""PlanRAG Workbench: the Streamlit entry point and page router."""
from ui import threads

# First, before this session imports anything else: other sessions' first runs import the same modules at once, and
# each first import must hold the interpreter's lock (ui/threads.py).
threads.guard()

from ui import shell  # noqa: E402

shell.prepare()
try:
    shell.run(shell.navigation())
finally:  # after the first page: the warm-up's imports would hold the import lock the page's first imports take
    shell.warming()
