"""Fixtures for the plan tests: the small Llama on DGX H100 nodes and its plan on 8 GPUs
(``tests/tiny_specs.py``)."""

from __future__ import annotations

from tiny_specs import on8, small_spec

__all__ = ["on8", "small_spec"]
