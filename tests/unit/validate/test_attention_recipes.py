"""Which attention kernel a published row ran, from the recipe behind its source (``source_recipes``)."""

from __future__ import annotations

import published_rows as P

from llmp.spec.spec import Attention
from llmp.validate.mapping import Mapped


def test_a_pure_bf16_llm_foundry_row_ran_the_first_drivers_triton_attention(map_snippet):
    m = map_snippet(P.MPT_7B_A100_40GB)
    assert isinstance(m, Mapped)
    assert m.spec.train.attention is Attention.TRITON
    assert any(a.startswith("attention = triton") and "12a6319" in a for a in m.assumptions)


def test_an_amp_llm_foundry_row_keeps_the_stacks_flash_attention(map_snippet):
    m = map_snippet(P.MPT_70B_H100)
    assert isinstance(m, Mapped)
    assert m.spec.train.attention is Attention.FLASH2
    assert not any(a.startswith("attention =") for a in m.assumptions)


def test_the_rule_reads_the_precision_cell_not_the_gpu(map_snippet):
    amp = P.edit(P.MPT_7B_A100_40GB, "precision", "amp_bf16 (FSDP mixed_precision=DEFAULT)")
    m = map_snippet(amp)
    assert isinstance(m, Mapped) and m.spec.train.attention is Attention.FLASH2
