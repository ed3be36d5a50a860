"""Fixtures for the measurement kit's tests: two tiny specs (``tests/tiny_specs.py``)."""

from __future__ import annotations

from tiny_specs import gpt_spec, llama_spec

__all__ = ["gpt_spec", "llama_spec"]
