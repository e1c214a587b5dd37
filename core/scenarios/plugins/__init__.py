"""Scenario plugins: a folder with a ``scenario.toml`` (docs/scenarios.md) read as a scenario type (``folder``), its
data (``data``), its network view (``network``), the skeleton ``python -m core scenario new`` writes (``skeleton``)
and the check of a folder (``checks``)."""
