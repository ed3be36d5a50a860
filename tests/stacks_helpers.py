"""Helpers that the unit tests of ``llmp.stacks`` (``tests/unit/stacks/``) and their properties
(``tests/property/stacks/``) both use: one home.

Import with ``from stacks_helpers import BASE`` (pytest puts tests/ on ``sys.path``).
"""

from __future__ import annotations

# ---- stack profiles (test_stacks.py) ---------------------------------------------------------

BASE = """use "dgx_a100"
model m {{
  arch = {arch}   layers = 4   hidden = 1024   heads = 16   vocab = 50257   seq_len = 2048
  {model}
}}
cluster c {{ node = dgx_a100   nodes = 1 }}
train {{
  {train}
  precision = fp16   global_batch = 32   micro_batch = 2
  parallel {{ tp = 2   pp = 2 {parallel} }}
}}
"""
"""A GPT or Llama on one DGX A100 (tp 2, pp 2), with ``{arch}``, ``{model}``, ``{train}`` and
``{parallel}`` left to fill."""
