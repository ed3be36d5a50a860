"""Free-text cells → meanings: every distinct value published so far (synthetic variants:
``tests/property/validate/test_cells_properties.py``).

The tables below hold every distinct value of the free-text columns of every CSV in
``validation/`` (which carries the shared published files byte for byte, plus rows typed in
with their sources); :func:`test_the_tables_hold_every_published_value` fails when a new file
brings a value no table pins, so the parser is always tested on real text.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from llmp.spec.spec import Recompute, ZeroStage
from llmp.validate import cells
from llmp.validate.cells import CellError, Dtype, Framework

VALIDATION = Path(__file__).resolve().parents[3] / "validation"

SHARDING = {
    "FSDP (DP dimension)": (ZeroStage.FSDP, None, Framework.TORCH_FSDP),
    "FSDP (FairScale) + Megatron tensor parallelism": (ZeroStage.FSDP, None, Framework.FAIRSCALE),
    "FSDP FULL_SHARD": (ZeroStage.FSDP, None, Framework.TORCH_FSDP),
    "FSDP SHARD_GRAD_OP": (ZeroStage.Z2, None, Framework.TORCH_FSDP),
    "FSDP2 (FSDP=1)": (ZeroStage.FSDP, 1, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=2)": (ZeroStage.FSDP, 2, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=4)": (ZeroStage.FSDP, 4, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=8)": (ZeroStage.FSDP, 8, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=32)": (ZeroStage.FSDP, 32, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=64)": (ZeroStage.FSDP, 64, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=128)": (ZeroStage.FSDP, 128, Framework.TORCH_FSDP2),
    "FSDP2 (FSDP=256)": (ZeroStage.FSDP, 256, Framework.TORCH_FSDP2),
    "Megatron FSDP (optim_grads_params)": (ZeroStage.FSDP, None, Framework.MEGATRON),
    "Megatron distributed optimizer (ZeRO-1-like)": (ZeroStage.Z1, None, Framework.MEGATRON),
    "ZeRO-1 (DeepSpeed BF16_Optimizer)": (ZeroStage.Z1, None, Framework.DEEPSPEED),
    "ZeRO-3 (DeepSpeed)": (ZeroStage.Z3, None, Framework.DEEPSPEED),
    "none": (ZeroStage.NONE, None, None),
    "none (Megatron DDP)": (ZeroStage.NONE, None, Framework.MEGATRON),
    "none (PyTorch DDP)": (ZeroStage.NONE, None, None),
    # spellings of other hands (DGX Cloud / Megatron-Bridge / torchtitan tables and the like)
    "DDP (FSDP=0)": (ZeroStage.NONE, 0, Framework.TORCH_FSDP),
    "zero1": (ZeroStage.Z1, None, None),
    "ZeRO stage 2": (ZeroStage.Z2, None, None),
    "DeepSpeed ZeRO 3": (ZeroStage.Z3, None, Framework.DEEPSPEED),
    "distributed optimizer": (ZeroStage.Z1, None, None),
    "dist-opt": (ZeroStage.Z1, None, None),
    "FSDP NO_SHARD": (ZeroStage.NONE, None, Framework.TORCH_FSDP),
    "HSDP (hybrid_shard)": (ZeroStage.FSDP, None, None),
    "fully_shard (FSDP2)": (ZeroStage.FSDP, None, Framework.TORCH_FSDP2),
    "Megatron FSDP (optim_grads)": (ZeroStage.Z2, None, Framework.MEGATRON),
    "DDP + ZeRO-1": (ZeroStage.Z1, None, None),
    "ZeRO-0": (ZeroStage.NONE, None, None),
    "no": (ZeroStage.NONE, None, None),
}
"""``zero_stage_or_fsdp`` cell → (stage, sharding degree, framework named)."""

RECOMPUTE = {
    "full": Recompute.FULL, "none": Recompute.NONE, "selective (op)": Recompute.SELECTIVE,
    "selective": Recompute.SELECTIVE, "Full (uniform, 1 layer)": Recompute.FULL, "no": Recompute.NONE,
    "yes": Recompute.FULL, "true": Recompute.FULL, "activation checkpointing": Recompute.FULL,
    "selective (core_attn)": Recompute.SELECTIVE, "SAC": Recompute.SELECTIVE, "off": Recompute.NONE,
}

BOOLEANS = {"yes": True, "no": False, "true": True, "false": False, "True": True, "FALSE": False, "on": True,
            "off": False, "1": True, "0": False, "yes (tp > 1)": True, "enabled": True, "disabled": False}

PRECISION = {
    "": None, "BF16": Dtype.BF16, "BF16 mixed": Dtype.BF16, "BF16 mixed (FSDP2 param bf16, reduce fp32)": Dtype.BF16,
    "BF16 mixed (FSDP2 param bf16, reduce fp32) + Float8 nn.Linear (torchao)": Dtype.FP8,
    "FP16 mixed": Dtype.FP16, "FP8": Dtype.FP8, "FP8 hybrid tensorwise (TE)": Dtype.FP8,
    "amp_bf16 (FSDP mixed_precision=DEFAULT)": Dtype.BF16, "amp_fp8 (FSDP mixed_precision=DEFAULT)": Dtype.FP8,
    "bf16": Dtype.BF16, "bf16 (FSDP mixed_precision=PURE)": Dtype.BF16, "fp16": Dtype.FP16, "fp16 mixed": Dtype.FP16,
    "fp16 weights, fp32 Adam state": Dtype.FP16, "fp16 mixed (assumed; not stated)": Dtype.FP16,
    "fp8": Dtype.FP8, "mixed precision (type not stated)": None,
    # other hands
    "FP8 (delayed scaling)": Dtype.FP8, "bfloat16": Dtype.BF16, "MXFP8": Dtype.MXFP8, "NVFP4": Dtype.NVFP4,
    "mxfp8": Dtype.MXFP8, "fp32": Dtype.FP32, "TF32": Dtype.TF32, "float16 AMP": Dtype.FP16,
}
"""``precision`` and ``dtype`` cells → the format GEMMs run in."""


def _published(*columns: str) -> set[str]:
    found: set[str] = set()
    for path in sorted(VALIDATION.glob("*.csv")):
        with path.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                found.update(row[c] for c in columns)
    return found


def test_the_tables_hold_every_published_value():
    assert _published("zero_stage_or_fsdp") - {""} <= set(SHARDING)
    assert _published("recompute") - {""} <= set(RECOMPUTE)
    assert _published("sequence_parallel") - {""} <= set(BOOLEANS)
    assert _published("precision", "dtype") <= set(PRECISION)


@pytest.mark.parametrize("cell, meaning", SHARDING.items(), ids=list(SHARDING))
def test_sharding_cells(cell, meaning):
    read = cells.sharding(cell)
    assert (read.stage, read.degree, read.framework) == meaning


@pytest.mark.parametrize("cell", ["tensor sharding of some kind", "Colossal gemini", "ZeRO-1 and ZeRO-3",
                                  "FSDP + CPU offload", "ZeRO-Infinity", ""])
def test_sharding_cells_without_one_meaning_are_refused(cell):
    with pytest.raises(CellError):
        cells.sharding(cell)


@pytest.mark.parametrize("cell, meaning", RECOMPUTE.items(), ids=list(RECOMPUTE))
def test_recompute_cells(cell, meaning):
    assert cells.recompute(cell).recompute is meaning


@pytest.mark.parametrize("cell", ["full + selective", "sometimes", "full (8 of 32 layers)", "cpu offload"])
def test_recompute_cells_without_one_meaning_are_refused(cell):
    with pytest.raises(CellError):
        cells.recompute(cell)


@pytest.mark.parametrize("cell, meaning", BOOLEANS.items(), ids=list(BOOLEANS))
def test_boolean_cells(cell, meaning):
    assert cells.boolean(cell) is meaning


@pytest.mark.parametrize("cell", ["maybe", "yes no", "", "tp"])
def test_boolean_cells_without_one_meaning_are_refused(cell):
    with pytest.raises(CellError):
        cells.boolean(cell)


@pytest.mark.parametrize("cell, meaning", PRECISION.items(), ids=[k or "blank" for k in PRECISION])
def test_precision_cells(cell, meaning):
    assert cells.compute_dtype(cell) is meaning


def test_two_16_bit_formats_contradict():
    with pytest.raises(CellError, match="bf16 and fp16"):
        cells.compute_dtype("bf16 or fp16")
