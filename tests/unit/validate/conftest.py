"""Fixtures for the validate tests: CSV snippets written and mapped, the SC21 1.7B row mapped
(``tests/validate_fixtures.py``)."""

from __future__ import annotations

from validate_fixtures import csv_file, map_snippet, mapped

__all__ = ["csv_file", "map_snippet", "mapped"]
