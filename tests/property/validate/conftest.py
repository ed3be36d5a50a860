"""Fixtures for the validate properties: the SC21 1.7B row mapped (``tests/validate_fixtures.py``)."""

from __future__ import annotations

from validate_fixtures import mapped

__all__ = ["mapped"]
