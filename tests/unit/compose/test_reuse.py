"""Reusing graphs, prices and corrections across predictions (``compose.reuse``) changes no number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmp.analytic.graph import decompose
from llmp.compose import predict, reuse
from llmp.dsl import load

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SPEC = EXAMPLES / "llama3_70b_dgx_h100.llmp"


def _fresh(spec, residuals="default"):
    reuse.clear()
    return _json(predict(spec, residuals))


def _json(pred):
    return json.dumps(pred.to_dict() | {"table": pred.to_table()}, sort_keys=True, default=str)


@pytest.mark.parametrize("residuals", ["default", None])
def test_a_warm_prediction_is_the_cold_one(residuals):
    spec = load(SPEC)
    cold = _fresh(spec, residuals)
    assert _json(predict(spec, residuals)) == cold
    assert _json(predict(load(SPEC), residuals)) == cold  # an equal spec read again


@pytest.mark.parametrize("overrides", [["parallel.tp=8", "parallel.dp=1"], ["parallel.pp=8", "parallel.dp=1"],
                                       ["parallel.cp=1", "parallel.dp=4"], ["train.micro_batch=2"],
                                       ["model.layers=60"], ["train.recompute=full"],
                                       ["parallel.vp=1", "parallel.schedule=1f1b"],
                                       ["cluster.nodes=16", "parallel.dp=4"]])
def test_a_structural_change_is_not_served_from_the_cache(overrides):
    base = load(SPEC)
    predict(base)
    changed = load(SPEC, overrides=overrides)
    assert reuse.graph_key(changed) != reuse.graph_key(base)
    warm = _json(predict(changed))
    assert warm == _fresh(changed)
    assert warm != _fresh(base)


@pytest.mark.parametrize("override", ["gpu.mem_bandwidth=2 TB/s", "gpu.flops.bf16=1500 TFLOP/s",
                                      "node.intra.bandwidth=300 GB/s", "cluster.inter.latency=9 us"])
def test_a_hardware_change_reuses_the_graph_and_reprices(override):
    base, changed = load(SPEC), load(SPEC, overrides=[override])
    reuse.clear()
    before = predict(base).step_time_s
    after = predict(changed)
    assert len(reuse.GRAPHS) == 1  # one graph served both
    assert after.step_time_s != before
    assert _json(after) == _fresh(changed)


@pytest.mark.parametrize("override", ["gpu.mem_bandwidth=2 TB/s", "gpu.flops.bf16=1500 TFLOP/s",
                                      "gpu.memory=40 GiB", "node.intra.bandwidth=300 GB/s",
                                      "cluster.inter.bandwidth=50 GB/s", "gpu.launch_overhead=9 us"])
def test_the_graph_reads_no_hardware_number(override):
    """Why ``reuse.graph_key`` leaves device and link numbers out: the graph is the same."""
    base, changed = load(SPEC), load(SPEC, overrides=[override])
    assert reuse.graph_key(base) == reuse.graph_key(changed)
    assert decompose(changed).ops == decompose(base).ops


def test_a_device_that_changes_the_quantize_kernels_is_a_new_graph():
    """The one device fact the graph reads (llmp.analytic.lowp.any_layout): an FP8 run on a device
    with an MXFP8 peak quantises once for both GEMM layouts, so its graph differs and is not served
    from the Hopper one."""
    spec = EXAMPLES / "llama3_70b_fp8_dgx_h100.llmp"
    base, changed = load(spec), load(spec, overrides=["gpu.flops.mxfp8=1979 TFLOP/s"])
    reuse.clear()
    predict(base)
    assert reuse.graph_key(changed) != reuse.graph_key(base)
    assert decompose(changed).ops != decompose(base).ops
    assert _json(predict(changed)) == _fresh(changed)


def test_keys_kept_by_spec_identity_follow_each_spec():
    """Two loaded specs that differ in one number keep their own keys, whichever came first, and
    a spec made by ``dataclasses.replace`` (a new object) gets its own."""
    import dataclasses

    base, changed = load(SPEC), load(SPEC, overrides=["gpu.mem_bandwidth=2 TB/s"])
    for _ in range(2):
        assert reuse.graph_key(base) == reuse.graph_key(changed)
        assert reuse.hardware_key(base) != reuse.hardware_key(changed)
        assert reuse.hardware_key(base) == repr(base.cluster)
        assert reuse.hardware_key(changed) == repr(changed.cluster)
    other = dataclasses.replace(base, cluster=changed.cluster)
    assert reuse.hardware_key(other) == repr(changed.cluster)
    alternating = [predict(s).step_time_s for s in (base, changed, base, changed)]
    assert alternating[0] == alternating[2] != alternating[1] == alternating[3]
    assert alternating[1] == json.loads(_fresh(changed))["step_time_s"]
