"""Offloading to host memory: what leaves the GPU's memory, what crosses its host link and when,
and the rules a stack's offloading follows."""

from __future__ import annotations

import dataclasses

import pytest
from strategies_analytic import h100, llama, make_spec, with_parallel, with_train

from llmp.analytic.structure import structure_of
from llmp.compose import predict
from llmp.errors import InfeasibleError
from llmp.spec.spec import Recompute, ZeroStage

PCIE5 = dict(host_bandwidth=64e9, host_memory_bandwidth=76.8e9)
"""The catalog's H100 host: PCIe Gen5 x16 per direction, a DGX host's DDR5 per GPU."""


def _spec(**train):
    model = llama(layers=8, hidden=2048, heads=16, kv_heads=8, ffn=5632, vocab=32000, seq_len=2048)
    spec = make_spec(model, nodes=1, global_batch=32, device=h100(**PCIE5), zero=ZeroStage.Z1)
    return with_train(spec, **train)


def _run(spec):
    return predict(spec, residuals=None)


def test_an_offloaded_optimizer_leaves_the_gpu_and_costs_copies_and_a_host_update():
    base, half, whole = _run(_spec()), _run(_spec(offload_optimizer=0.5)), _run(_spec(offload_optimizer=1.0))
    assert half.memory.optimizer == pytest.approx(base.memory.optimizer / 2, rel=1e-12)
    assert half.memory.host == pytest.approx(base.memory.optimizer / 2, rel=1e-12)
    assert whole.memory.optimizer == 0 and whole.memory.host == pytest.approx(base.memory.optimizer, rel=1e-12)
    assert whole.memory.total == pytest.approx(base.memory.total - base.memory.optimizer, rel=1e-12)
    assert base.breakdown.get("offload", 0) == 0 < half.breakdown["offload"] < whole.breakdown["offload"]
    assert whole.breakdown.get("optimizer", 0) == 0 < base.breakdown["optimizer"]
    ops = {r.name: r for r in whole.ops if r.category == "offload"}
    assert set(ops) == {"step.host_optimizer", "step.host_optimizer.grads_d2h", "step.host_optimizer.params_h2d"}
    # the update streams 30 bytes of host memory per Adam parameter (2 x (4 + 8) + 4 + 2)
    d2h, update = ops["step.host_optimizer.grads_d2h"], ops["step.host_optimizer"]
    params = d2h.bytes / 4  # FP32 gradients
    assert update.bytes == pytest.approx(30 * params, rel=1e-12)
    assert update.roofline_s == pytest.approx(5e-6 + 30 * params / 76.8e9, rel=1e-9)


def test_overlapping_the_host_optimizers_copies_shows_only_their_excess():
    apart, overlapped = _run(_spec(offload_optimizer=1.0)), _run(_spec(offload_optimizer=1.0, offload_overlap=True))
    ops = {r.name: r.roofline_s for r in apart.ops if r.category == "offload"}
    assert apart.breakdown["offload"] == pytest.approx(sum(ops.values()), rel=1e-9)
    assert overlapped.breakdown["offload"] == pytest.approx(ops["step.host_optimizer"], rel=1e-9)  # copies < update
    assert overlapped.step_time_s < apart.step_time_s


def test_offloaded_activations_leave_the_gpu_and_cross_the_host_link_twice():
    base, off = _run(_spec()), _run(_spec(offload_activations=4))
    assert off.memory.activations < base.memory.activations and off.memory.host > 0
    names = {r.name for r in off.ops if r.category == "offload"}
    assert names == {"layer.offload.activations_d2h", "layer.offload.activations_h2d"}
    rows = [r for r in off.ops if r.name == "layer.offload.activations_d2h"]
    assert rows[0].count == pytest.approx(4 / 8)  # half of each chunk's layers
    assert off.step_time_s >= base.step_time_s


def test_a_faster_host_link_hides_more_of_the_copies():
    slow = _spec(offload_activations=6)
    fast = dataclasses.replace(slow, cluster=dataclasses.replace(slow.cluster, node=dataclasses.replace(
        slow.cluster.node, gpu=h100(host_bandwidth=450e9, host_memory_bandwidth=512e9))))  # NVLink-C2C
    assert _run(fast).breakdown.get("offload", 0) < _run(slow).breakdown["offload"]


def test_fsdp_offload_keeps_only_the_gathered_layers_and_a_gradient_bucket_on_the_gpu():
    spec = with_parallel(_spec(), zero=ZeroStage.FSDP)
    base = _run(spec)
    off = _run(with_train(spec, offload_optimizer=1.0, offload_grads=True, offload_params=True))
    assert off.memory.weights < base.memory.weights and off.memory.grads <= spec.parallel.dp_bucket_size
    assert off.memory.optimizer == 0
    assert off.memory.host == pytest.approx(base.memory.total - off.memory.total, rel=0.05)
    names = {r.name for r in off.ops if r.category == "offload"}
    assert {"layer.offload.params_h2d", "layer.offload.params_grad_h2d", "layer.offload.grads_d2h"} <= names
    assert "step.host_optimizer.grads_d2h" not in names  # the layers sent theirs during the backward


@pytest.mark.parametrize("train, parallel, message", [
    (dict(offload_params=True, offload_optimizer=1.0), {}, "offload_params = true with parallel.zero = 1"),
    (dict(offload_params=True, offload_grads=True), dict(zero=ZeroStage.FSDP), "needs train.offload_optimizer = 1"),
    (dict(offload_optimizer=1.5), {}, "train.offload_optimizer(1.5) > 1"),
    (dict(offload_activations=8), {}, "train.offload_activations(8) >= the layers of a pipeline chunk"),
])
def test_offloading_a_stack_cannot_run_is_refused(train, parallel, message):
    spec = with_parallel(with_train(_spec(), **train), **parallel)
    with pytest.raises(InfeasibleError, match=message.replace("(", r"\(").replace(")", r"\)")):
        structure_of(spec)


def test_offloading_asks_for_the_host_rates_the_catalog_does_not_give():
    spec = make_spec(llama(layers=4, hidden=1024, heads=8, kv_heads=8, ffn=2816, vocab=32000, seq_len=1024),
                     global_batch=16, device=h100())
    with pytest.raises(InfeasibleError, match="host_bandwidth not given"):
        structure_of(with_train(spec, offload_activations=1, recompute=Recompute.NONE))
