"""Fixtures for the validate tests: CSV snippets written and mapped (``tests/validate_fixtures.py``)."""

from __future__ import annotations

from validate_fixtures import csv_file, map_snippet

__all__ = ["csv_file", "map_snippet"]
