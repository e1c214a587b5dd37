"""The one table of who may take each action of the gate (core.auth.gate), shared by the core test
(tests/test_gate.py: every action by every role) and the browser test (tests/test_e2e_gate.py: the rows with a
button, for a viewer and an analyst; each test also carries every action out, through core or by its button). A
new action without a row here fails both."""
from __future__ import annotations

#: action -> (the least role that may take it, (page path, button name) where a button takes it, or None)
TABLE = {
    "start": ("analyst", ("run?q=demo/locating/1", "Start")),
    "samples": ("analyst", None),  # "Run N times" appears once Samples is 2 or more
    "review": ("analyst", None),  # on a paused run's page (tests/test_e2e_signin.py drives it)
    "query_decision": ("analyst", None),
    "inbox_approve": ("analyst", None),  # in the Run page's inbox (driven in tests/test_e2e_gate.py)
    "inbox_reject": ("analyst", None),
    "inbox_close": ("analyst", None),
    "stop": ("analyst", None),
    "resume": ("analyst", None),
    "branch": ("analyst", None),
    "override": ("analyst", None),
    "benchmark_start": ("analyst", ("benchmark", "Run the smoke benchmark")),
    "benchmark_stop": ("analyst", None),
    "benchmark_rerun": ("analyst", None),
    "test_connections": ("analyst", ("settings", "Test connections")),
    "rescan": ("analyst", ("scenarios", "Rescan")),
    "store_switch": ("admin", ("history", "Go on with this run store")),  # shown when the store lost runs
    "settings": ("analyst", ("settings", "Use this endpoint")),
    "endpoints": ("admin", None),
    "databases": ("admin", None),
    "server_paths": ("admin", ("settings", "Use and test")),
}
