"""The shared strategies (tests/strategies.py) generate what they promise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from strategies import devices, model_specs, parallel_layouts, specs

from llmp.dsl.checks import check
from llmp.hardware.spec import Device, Dtype
from llmp.spec.model import Arch, ModelSpec
from llmp.spec.spec import ParallelSpec, Schedule, Spec, replica_size


@given(specs())
def test_generated_specs_pass_every_check(spec: Spec) -> None:
    check(spec, lambda path: None)  # raises SpecError on any violated rule
    assert spec.world_size == spec.cluster.world_size


@given(model_specs())
def test_model_shapes_are_consistent(m: ModelSpec) -> None:
    assert m.hidden == m.heads * m.head_dim
    assert m.heads % m.kv_heads == 0
    assert m.arch is Arch.LLAMA or m.kv_heads == m.heads
    assert m.moe is None or 1 <= m.moe.top_k <= m.moe.experts


@given(st.sampled_from([1, 2, 8, 24, 64, 96]).flatmap(
    lambda world: st.tuples(st.just(world), parallel_layouts(world, experts=8))))
def test_layouts_multiply_to_the_world(case: tuple[int, ParallelSpec]) -> None:
    world, p = case
    assert p.dp * p.tp * p.pp * p.cp == world == p.world_size == p.dp * replica_size(p.tp, p.pp, p.cp)
    assert 8 % p.tp == 0
    assert (p.dp * p.cp) % p.ep == 0 and 8 % p.ep == 0
    assert (p.vp > 1) == (p.schedule is Schedule.INTERLEAVED)
    assert p.vp == 1 or p.pp > 1


@given(devices())
def test_devices_have_a_bf16_peak(device: Device) -> None:
    assert device.peak_flops[Dtype.BF16] > 0
    assert device.memory >= 8 * 2**30
