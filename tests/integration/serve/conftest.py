"""A small Llama on one DGX H100 node: every tab answers in about a second."""

from __future__ import annotations

from pathlib import Path

import pytest

SMALL = """use "dgx_h100"
model small_llama { arch = llama  layers = 8  hidden = 2048  heads = 16  kv_heads = 8
                    ffn_hidden = 5632  vocab = 32000  seq_len = 2048 }
cluster one_node { node = dgx_h100  nodes = 1 }
train { precision = bf16  optimizer = adamw  global_batch = 64  micro_batch = 1  recompute = none
        parallel { tp = 2  pp = 1  zero = 1 } }
"""


@pytest.fixture(scope="session")
def small_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "small.llmp"
    path.write_text(SMALL)
    return path
