"""The prices kept by ``pricing.price`` equal fresh ones, and the memo's keys cover every field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import llmp
from llmp.analytic import pricing
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Collective, Family, Kernel
from llmp.analytic.pricing import Hardware, collective_price, kernel_price, price
from llmp.hardware.spec import Dtype

ROOT = Path(__file__).parents[3]


def test_the_memo_keys_name_every_field_of_a_kernel_and_a_collective():
    # _Memo keys kernels and collectives by their fields: a new field must join the key.
    assert [f.name for f in dataclasses.fields(Kernel)] == ["family", "dims", "dtype", "pass_", "variant"]
    assert [f.name for f in dataclasses.fields(Collective)] == ["kind", "bytes", "group", "ranks_per_node", "tier"]


@pytest.mark.parametrize("sets", [[], ["parallel.tp=2", "parallel.dp=1", "parallel.pp=2", "parallel.zero=3"],
                                  ["parallel.tp=4", "parallel.dp=1", "train.recompute=full",
                                   "parallel.sequence_parallel=true"]])
def test_kept_prices_equal_fresh_ones(sets):
    spec = llmp.load(ROOT / "examples" / "llama3_8b_dgx_h100.llmp", sets)
    graph = decompose(spec)
    hw = Hardware.of(spec)
    fresh = [kernel_price(op.work, hw) if isinstance(op.work, Kernel) else collective_price(op.work, hw)[:3]
             for op in graph.ops]
    for _ in range(2):  # the second time from the memo
        prices = price(graph, spec)
        assert list(zip(prices.flops, prices.bytes, prices.time)) == fresh


def test_equal_dims_of_other_types_are_priced_apart():
    # Equal kernels (4096 == 4096.0) whose FLOPs round differently as ints and as floats.
    spec = llmp.load(ROOT / "examples" / "llama3_8b_dgx_h100.llmp")
    hw = Hardware.of(spec)
    n = 2**27 + 1
    ints = Kernel.make(Family.GEMM, Dtype.BF16, m=n, n=n, k=n, batch=1)
    floats = Kernel.make(Family.GEMM, Dtype.BF16, m=float(n), n=float(n), k=float(n), batch=1.0)
    assert ints == floats and kernel_price(ints, hw)[0] != kernel_price(floats, hw)[0]
    memo = pricing._MEMOS.of(hw.device, pricing._Memo)
    for _ in range(2):
        assert memo.kernel(ints, hw) == kernel_price(ints, hw)
        assert memo.kernel(floats, hw) == kernel_price(floats, hw)
