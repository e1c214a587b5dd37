"""Benchmark runs over DQA: work lists, resumable concurrent runs, an LLM reply cache, the paper's reports.
Start here: runner.Bench (the CLI is ``python -m core bench``)."""
