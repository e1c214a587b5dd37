"""Decision QA in Inspect AI (README: Use with Inspect AI): the task (``task``: ``inspect eval core/evals/task.py``),
the simulator-backed scorer (``scoring``), the workbench's techniques as solvers on Inspect's model API
(``solvers``, ``model``), the read-only bounded database query as an Inspect tool (``tools``), and ``core bench``
results as an Inspect log (``bench_log``). Loaded only by Inspect and by ``core bench --inspect-log``."""
