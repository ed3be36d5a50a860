"""The host thread as a resource of the step (llmp.stacks.host, compose.overlap): the max-plus
pacing of a pass, where the stack waits, and what it changes in a prediction."""

from __future__ import annotations

import dataclasses

import pytest
from strategies_analytic import gpt, make_spec, with_train

from llmp.analytic.kernels import Family, Kernel
from llmp.analytic.op import Part
from llmp.compose import predict
from llmp.compose.overlap import OverlapRules, chunk_works, host_seconds
from llmp.compose.predictor import priced
from llmp.hardware.spec import HostCpu
from llmp.spec.spec import Recompute, Stack
from llmp.stacks import PROFILES
from llmp.stacks.host import SPEED, HostRules, measured


def _spec(stack: Stack = Stack.MEGATRON_DEEPSPEED, **train):
    spec = make_spec(gpt(layers=4, hidden=1024, heads=16, seq_len=1024, vocab=50304), tp=2, global_batch=16)
    return with_train(spec, stack=stack, **train)


def test_a_small_model_at_micro_batch_one_waits_on_its_host():
    p = predict(_spec(), None)
    assert p.breakdown["host"] > 0.3 * p.step_time_s  # the device idles waiting for kernels


def test_a_large_model_is_paced_by_the_device():
    spec = make_spec(gpt(layers=4, hidden=8192, heads=64, seq_len=4096, vocab=50304), tp=2, global_batch=16)
    p = predict(with_train(spec, stack=Stack.MEGATRON_DEEPSPEED, micro_batch=4), None)
    assert p.breakdown.get("host", 0.0) < 0.02 * p.step_time_s


def test_the_host_only_adds_time():
    spec = _spec()
    pr = priced(spec, None)
    with_host = chunk_works(pr.graph, pr.times, OverlapRules.of(spec), ((True, True, 4),))[0]
    alone = chunk_works(pr.graph, pr.times, dataclasses.replace(OverlapRules.of(spec), host=None),
                        ((True, True, 4),))[0]
    for a, b in ((with_host.fwd, alone.fwd), (with_host.bwd, alone.bwd)):
        assert a.total >= b.total and a.total - b.total == pytest.approx(a.by_category["host"])


def test_cuda_graphs_take_the_layers_off_the_host():
    eager, graphed = predict(_spec(), None), predict(_spec(cuda_graphs=True), None)
    assert graphed.breakdown["host"] < 0.2 * eager.breakdown["host"]
    assert graphed.step_time_s < eager.step_time_s


def test_the_cpu_device_is_its_own_host():
    from llmp.dsl import load

    spec = load("examples/tiny_cpu.llmp")
    assert HostRules.of(spec) is None
    assert "host" not in predict(spec, None).breakdown


def test_a_stack_that_syncs_each_pipeline_task_pays_host_and_device_in_series():
    # Megatron synchronises after every pipeline send/receive: each task starts on an empty
    # queue and pays the latency max_k(H_k + D_k..), not just the slower stream.
    spec = with_train(make_spec(gpt(layers=4, hidden=1024, heads=16, seq_len=1024, vocab=50304), pp=2,
                                global_batch=16), stack=Stack.MEGATRON_LM)
    rules = OverlapRules.of(spec)
    assert rules.host is not None and rules.host.pipeline_sync
    free = dataclasses.replace(rules, host=dataclasses.replace(rules.host, pipeline_sync=False))
    pr = priced(spec, None)
    synced = chunk_works(pr.graph, pr.times, rules, ((False, False, 2),))[0]
    ahead = chunk_works(pr.graph, pr.times, free, ((False, False, 2),))[0]
    assert synced.bwd.total > ahead.bwd.total


def test_full_recompute_issues_each_forward_twice():
    # The checkpointed forward and the recomputed one both cost the host.
    none, full = _spec(recompute=Recompute.NONE), _spec(recompute=Recompute.FULL)
    assert predict(full, None).breakdown["host"] > predict(none, None).breakdown["host"]


def test_a_quantize_kernel_costs_the_host_its_launch_only():
    from llmp.dsl import load

    spec = load("examples/llama3_70b_fp8_dgx_h100.llmp")
    rules = HostRules.of(spec)
    assert rules is not None
    ops = [o for o in priced(spec, None).graph.ops if isinstance(o.work, Kernel) and o.part is Part.FORWARD]
    quantize = next(o for o in ops if o.work.family is Family.QUANTIZE)
    gemm = next(o for o in ops if o.work.family is Family.GEMM)
    assert host_seconds(quantize, rules) == pytest.approx(rules.launch)
    assert host_seconds(gemm, rules) == pytest.approx(rules.forward + rules.launch)


def test_every_stack_names_a_measured_style():
    styles = measured().per_launch
    for profile in PROFILES.values():
        assert profile.host_style.value in styles
        assert all(v > 0 for v in styles[profile.host_style.value].values())


def test_the_band_carries_the_host_cpu_where_a_host_paces_the_step():
    p = predict(_spec(), None)
    host = next(t for t in p.uncertainty.terms if t.name == "host")
    assert host.kind == "host" and host.share > 0.05 and host.sigma_above > host.sigma_below
    large = make_spec(gpt(layers=4, hidden=8192, heads=64, seq_len=4096, vocab=50304), tp=2, global_batch=16)
    paced = predict(with_train(large, stack=Stack.MEGATRON_DEEPSPEED, micro_batch=4), None)
    assert next(t for t in paced.uncertainty.terms if t.name == "host").share < 0.02


def test_the_cpu_device_has_no_host_term():
    from llmp.dsl import load

    assert all(t.name != "host" for t in predict(load("examples/tiny_cpu.llmp"), None).uncertainty.terms)


@pytest.mark.parametrize("core", list(HostCpu))
def test_a_node_dispatches_at_its_host_cores_speed(core):
    spec = _spec()
    node = dataclasses.replace(spec.cluster.node, host_cpu=core)
    named = dataclasses.replace(spec, cluster=dataclasses.replace(spec.cluster, node=node))
    plain, slower = HostRules.of(spec), HostRules.of(named)
    ratio = SPEED[HostCpu(measured().machine["core"])] / SPEED[core]
    for field in ("forward", "recompute", "backward", "step"):
        assert getattr(slower, field) == pytest.approx(ratio * getattr(plain, field), rel=1e-12)
    assert slower.launch == plain.launch  # the driver's launch is the GPU's, cited per device
    # an older core never issues faster, and only the host's share of the step moves
    older = predict(named, None)
    base = predict(spec, None)
    assert (older.step_time_s >= base.step_time_s) == (ratio >= 1)
    assert older.breakdown.get("gemm") == pytest.approx(base.breakdown.get("gemm"))


def test_the_catalog_names_the_host_cpus_its_data_names():
    from llmp.dsl import loads

    for node, core in (("dgx_a100", HostCpu.ZEN2), ("perlmutter_gpu_80gb", HostCpu.ZEN3),
                       ("dgx_h100", HostCpu.SAPPHIRE_RAPIDS), ("gb200_nvl72_tray", HostCpu.GRACE),
                       ("gb300_nvl72", HostCpu.GRACE), ("vista_gh200", HostCpu.GRACE), ("alps_gh200", HostCpu.GRACE)):
        spec = loads(f'use "{node}"\n'
                     "model m { arch = gpt layers = 2 hidden = 256 heads = 4 vocab = 512 seq_len = 128 }\n"
                     f"cluster c {{ node = {node} }}\ntrain {{ global_batch = 72 micro_batch = 1 }}\n")
        assert spec.cluster.node.host_cpu is core


def test_grace_issues_torch_calls_slower_than_the_x86_hosts_of_its_generation():
    """TransformerEngine issue #2053's one measured call (13.48 us on a Xeon 8480C, 33-37 us on
    GH200/GB200) puts Grace 2.6x behind Golden Cove; the x86 cores keep their IPC order."""
    assert SPEED[HostCpu.SAPPHIRE_RAPIDS] / SPEED[HostCpu.GRACE] == pytest.approx(2.60, abs=0.01)
    order = [HostCpu.GRACE, HostCpu.ZEN2, HostCpu.ZEN3, HostCpu.SAPPHIRE_RAPIDS, HostCpu.ZEN4]
    assert [SPEED[c] for c in order] == sorted(SPEED[c] for c in order)
