"""Fixtures for the residual tests: the catalog CPU device, the committed tiny store and two tiny
specs (helpers live in ``tests/residual_helpers.py``, a uniquely named module, so they never clash
with other conftest files, and where the CLI tests and the tiny store's script import them too).
``test_score.py`` defines its own ``fitted`` (the loaded store alone), which wins there."""

from __future__ import annotations

from residual_helpers import cpu, fitted
from tiny_specs import gpt_spec, llama_spec

__all__ = ["cpu", "fitted", "gpt_spec", "llama_spec"]
