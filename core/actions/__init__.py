"""What a person does on the pages besides runs and benchmarks (those are core.jobs), each function asking the gate
(core.auth.gate) with the acting identity before it acts: a session's settings, connection tests and rescans
(``choices``), grade overrides (``grades``)."""
