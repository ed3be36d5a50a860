"""Two tiny specs on the catalog CPU host (a GPT and a Llama), for the residual and measurement
tests: real parsing, milliseconds to predict, seconds to run as a torch step; and a small Llama on
DGX H100 nodes for the plan tests (unit, property and command line): big enough for pipeline and
tensor layouts, small enough that a whole plan runs in about a second; and its plan on 8 GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmp import dsl
from llmp.planning import plan

TINY_GPT = """
use "cpu_host"
cluster local { node = cpu_host  nodes = 1 }
model tiny_gpt { arch = gpt  layers = 2  hidden = 64  heads = 4  vocab = 512  seq_len = 32 }
train { precision = fp32  global_batch = 4  micro_batch = 2 }
"""
TINY_LLAMA = """
use "cpu_host"
cluster local { node = cpu_host  nodes = 1 }
model tiny_llama { arch = llama  layers = 1  hidden = 64  heads = 4  kv_heads = 2  ffn_hidden = 176
                   vocab = 512  seq_len = 32 }
train { precision = fp32  global_batch = 2  micro_batch = 1  recompute = full }
"""


@pytest.fixture(scope="session")
def gpt_spec():
    return dsl.loads(TINY_GPT, filename="tiny_gpt.llmp")


@pytest.fixture(scope="session")
def llama_spec():
    return dsl.loads(TINY_LLAMA, filename="tiny_llama.llmp")

SMALL_H100 = """
use "dgx_h100"
model small_llama { arch = llama  layers = 8  hidden = 2048  heads = 16  kv_heads = 8
                    ffn_hidden = 5632  vocab = 32000  seq_len = 2048 }
cluster one_node { node = dgx_h100  nodes = 1 }
train { precision = bf16  optimizer = adamw  global_batch = 64  micro_batch = 1  recompute = none
        parallel { tp = 1  pp = 1  zero = 1 } }
"""


@pytest.fixture(scope="session")
def small_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "small.llmp"
    path.write_text(SMALL_H100)
    return path


@pytest.fixture(scope="module")
def on8(small_spec):
    return plan(small_spec, tokens="100B", gpus=8, price_per_gpu_hour=2.5)
