"""Fixtures for the residual properties: the catalog CPU device and the committed tiny store
(``tests/residual_helpers.py``)."""

from __future__ import annotations

from residual_helpers import cpu, fitted

__all__ = ["cpu", "fitted"]
