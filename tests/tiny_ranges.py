"""Tiny shape ranges for tests: a real timed case costs about a millisecond (numpy-only import)."""

from __future__ import annotations

from llmp.measure import design

TINY = design.Ranges(hidden=(64, 256), hidden_multiple=64, head_dims=(16, 32), tokens=(32, 256), tokens_multiple=32,
                     tp=(1, 2), vocab=(256, 2048), seq=(32, 128), max_flops=2e7, max_bytes=2e6, max_params=100_000)
