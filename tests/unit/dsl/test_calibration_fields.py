"""The measured-ceiling fields of the language: link efficiency and peer_bandwidth, gpu
achievable and flash_attention blocks (units, bounds, checks, symbols, overrides)."""

from __future__ import annotations

import pytest
import sympy as sp

from llmp.dsl import loads
from llmp.errors import SpecError
from llmp.hardware.spec import Dtype
from llmp.spec.symbols import symbol_for

SPEC = """
gpu g {{
  memory = 80 GiB  mem_bandwidth = 3.35 TB/s  sms = 132  clock = 1830 MHz
  l2_cache = 50 MiB  tdp = 700 W  launch_overhead = 5 us
  flops {{ fp32 = 67 TFLOP/s  bf16 = 989 TFLOP/s }}
  {gpu_extra}
}}
link nic {{ bandwidth = 8 * 400 Gb/s  latency = 5 us }}
node n {{
  gpu = g  gpus_per_node = 8  inter = nic
  intra = link {{ bandwidth = 450 GB/s  latency = 3 us  {link_extra} }}
}}
model m {{ arch = gpt  layers = 2  hidden = 128  heads = 4  vocab = 1024  seq_len = 128 }}
cluster c {{ node = n }}
train {{ global_batch = 8 }}
"""


def spec_with(link_extra: str = "", gpu_extra: str = "", overrides: tuple[str, ...] = ()):
    return loads(SPEC.format(link_extra=link_extra, gpu_extra=gpu_extra), filename="t.llmp",
                 overrides=list(overrides))


def test_defaults_are_line_rate_behind_a_switch_and_no_measured_ceilings():
    spec = spec_with()
    intra = spec.cluster.node.intra
    assert intra.efficiency == 1.0 and intra.peer_bandwidth is None
    assert spec.cluster.gpu.achievable is None and spec.cluster.gpu.flash_attention is None


@pytest.mark.parametrize("text,value", [("0.81", 0.81), ("1", 1.0), ("81 / 100", 0.81), ("0.001", 0.001)])
def test_efficiency_accepts_fractions_in_zero_to_one(text: str, value: float):
    assert spec_with(f"efficiency = {text}").cluster.node.intra.efficiency == pytest.approx(value)


@pytest.mark.parametrize("text,label", [("0", "bad value"), ("1.2", "bad value"), ("-0.5", "bad value"),
                                        ("0.8 GB/s", "wrong unit"), ("true", "wrong type")])
def test_efficiency_outside_zero_to_one_or_with_a_unit_is_rejected(text: str, label: str):
    with pytest.raises(SpecError) as err:
        spec_with(f"efficiency = {text}")
    assert err.value.label == label
    assert "node.intra.efficiency" in err.value.message
    if label == "bad value":
        assert "above 0 and at most 1" in err.value.message


def test_peer_bandwidth_is_a_bandwidth_and_at_most_the_endpoint_bandwidth():
    link = spec_with("peer_bandwidth = 800 Gb/s").cluster.node.intra
    assert link.peer_bandwidth == pytest.approx(100e9)
    with pytest.raises(SpecError, match=r"node.intra.peer_bandwidth\(500 GB/s\) > node.intra.bandwidth\(450 GB/s\)"):
        spec_with("peer_bandwidth = 500 GB/s")
    with pytest.raises(SpecError) as err:
        spec_with("peer_bandwidth = 100 us")
    assert err.value.label == "wrong unit"


def test_achievable_and_flash_attention_blocks_carry_rates_and_source():
    gpu = spec_with(gpu_extra='achievable { bf16 = 794.5 TFLOP/s  source = "MAMF" }\n'
                              'flash_attention { bf16 = 338 TFLOP/s }').cluster.gpu
    assert gpu.achievable is not None and gpu.flash_attention is not None
    assert gpu.achievable.rates == {Dtype.BF16: pytest.approx(794.5e12)}
    assert gpu.achievable.source == "MAMF"
    assert gpu.flash_attention.rates == {Dtype.BF16: pytest.approx(338e12)} and gpu.flash_attention.source == ""


def test_a_measured_rate_above_the_peak_or_without_a_peak_is_rejected():
    with pytest.raises(SpecError, match=r"gpu.achievable.bf16\(1000 TFLOP/s\) > gpu.flops.bf16\(989 TFLOP/s\)"):
        spec_with(gpu_extra="achievable { bf16 = 1000 TFLOP/s }")
    with pytest.raises(SpecError) as err:
        spec_with(gpu_extra="flash_attention { fp8 = 900 TFLOP/s }")
    assert err.value.label == "no peak" and "no fp8 peak" in err.value.message
    with pytest.raises(SpecError) as err:
        spec_with(gpu_extra="achievable { bf16 = 800 GB/s }")
    assert err.value.label == "wrong unit"


def test_unknown_field_in_a_ceiling_block_gets_a_suggestion():
    with pytest.raises(SpecError) as err:
        spec_with(gpu_extra="achievable { bf61 = 800 TFLOP/s }")
    assert err.value.label == "unknown field" and err.value.hint == "did you mean 'bf16'?"


def test_overrides_reach_the_new_fields():
    spec = spec_with(overrides=("node.intra.efficiency=0.5", "gpu.achievable.bf16=700 TFLOP/s"))
    assert spec.cluster.node.intra.efficiency == 0.5
    assert spec.cluster.gpu.achievable is not None
    assert spec.cluster.gpu.achievable.rates[Dtype.BF16] == pytest.approx(700e12)


def test_fields_can_be_free_symbols_with_positive_assumptions():
    spec = spec_with("efficiency = symbol", "achievable { bf16 = symbol }")
    eff = spec.cluster.node.intra.efficiency
    assert eff == symbol_for("node.intra.efficiency") and eff.is_positive
    rate = spec.cluster.gpu.achievable.rates[Dtype.BF16]
    assert isinstance(rate, sp.Symbol) and rate.name == "gpu_achievable_bf16" and rate.is_positive
    assert {"node.intra.efficiency", "gpu.achievable.bf16"} <= set(spec.symbols)
