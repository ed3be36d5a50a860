"""Fixtures for the plan tests: the small Llama on DGX H100 nodes (``tests/tiny_specs.py``)."""

from __future__ import annotations

from tiny_specs import small_spec

__all__ = ["small_spec"]
