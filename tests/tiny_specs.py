"""Two tiny specs on the catalog CPU host (a GPT and a Llama), for the residual and measurement
tests: real parsing, milliseconds to predict, seconds to run as a torch step."""

from __future__ import annotations

import pytest

from llmp import dsl

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
