"""Resolution: units to SI, defaults by arch, expressions, references, symbols and sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy as sp

from llmp.dsl import loads
from llmp.errors import SpecError
from llmp.hardware.spec import Dtype
from llmp.spec.model import Activation, Arch, Norm, Position
from llmp.spec.spec import Attention, Recompute, Schedule, Spec, Sweep, ZeroStage
from llmp.spec.symbols import symbol_for

FIXTURES = Path(__file__).parent / "fixtures"
DEBUG_PATH = FIXTURES / "debug.llmp"
DEBUG = DEBUG_PATH.read_text()


def debug(*replacements: tuple[str, str], overrides: tuple[str, ...] = ()) -> Spec:
    """The debug fixture with each (old, new) replaced exactly once."""
    text = DEBUG
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return loads(text, filename=str(DEBUG_PATH), overrides=overrides)


def error(*replacements: tuple[str, str], overrides: tuple[str, ...] = ()) -> SpecError:
    with pytest.raises(SpecError) as err:
        debug(*replacements, overrides=overrides)
    return err.value


def test_debug_fixture_resolves_to_si() -> None:
    spec = debug()
    gpu = spec.cluster.gpu
    assert gpu.id == "toy_gpu" and gpu.name == "Toy GPU" and gpu.vendor == "llmp tests"
    assert gpu.peak_flops == {Dtype.FP32: 20e12, Dtype.BF16: 80e12}
    assert gpu.memory == 24 * 2**30
    assert gpu.mem_bandwidth == 1.5e12
    assert (gpu.sms, gpu.clock, gpu.l2_cache, gpu.tdp) == (80, 1.5e9, 40 * 2**20, 400.0)
    assert gpu.launch_overhead == pytest.approx(5e-6, rel=1e-15)
    assert gpu.scaleup_bandwidth == 0.0
    node = spec.cluster.node
    assert (node.id, node.gpus_per_node) == ("toy_node", 4)
    assert (node.intra.id, node.intra.bandwidth, node.intra.latency) == ("toy_nvlink", 300e9, 2e-6)
    # inline link: 2 * 200 Gb/s = 400 Gb/s = 50 GB/s
    assert (node.inter.id, node.inter.bandwidth) == ("toy_node.inter", 50e9)
    assert spec.cluster.inter == node.inter  # the cluster inherits the node's network link
    assert spec.cluster.world_size == 8
    assert (spec.parallel.tp, spec.parallel.pp, spec.parallel.dp) == (2, 2, 2)
    assert spec.model.vocab == 32000
    assert spec.microbatches == 8


def test_gpt_defaults() -> None:
    m = debug().model
    assert (m.arch, m.norm, m.activation, m.position) == (
        Arch.GPT, Norm.LAYERNORM, Activation.GELU, Position.LEARNED)
    assert (m.bias, m.tied_embeddings, m.kv_heads, m.head_dim, m.ffn_hidden, m.dropout) == (
        True, True, 8, 64, 2048, 0.0)


def test_llama_defaults_and_required_ffn() -> None:
    m = debug(("arch = gpt", "arch = llama\n  ffn_hidden = 1536")).model
    assert (m.norm, m.activation, m.position, m.bias, m.tied_embeddings) == (
        Norm.RMSNORM, Activation.SWIGLU, Position.ROTARY, False, False)
    err = error(("arch = gpt", "arch = llama"))
    assert err.label == "missing field" and "ffn_hidden" in err.message
    assert err.span.line == 33  # the model block


def test_explicit_fields_override_arch_defaults() -> None:
    m = debug(("arch = gpt", "arch = gpt  position = rotary  tied_embeddings = false  "
               "kv_heads = 2  head_dim = 128  ffn_hidden = 4 * model.hidden / 2")).model
    assert (m.position, m.tied_embeddings, m.kv_heads, m.head_dim, m.ffn_hidden) == (
        Position.ROTARY, False, 2, 128, 1024)


def test_device_is_another_name_for_gpu() -> None:
    assert debug(("gpu toy_gpu {", "device toy_gpu {")).cluster.gpu.id == "toy_gpu"


def test_dp_is_derived_when_omitted() -> None:
    assert debug(("    pp = 2", "    pp = 1")).parallel.dp == 4
    err = error(("    pp = 2", "    pp = 3"))
    assert err.label == "layout mismatch"
    assert err.message == ("dp is not given and cannot be derived: 8 GPUs (cluster.nodes(2) * "
                           "node.gpus_per_node(4)) is not divisible by tp(2) * pp(3) * cp(1) = 6")


@pytest.mark.parametrize("text,stage", [("none", ZeroStage.NONE), ("0", ZeroStage.NONE),
                                        ("1", ZeroStage.Z1), ("2", ZeroStage.Z2),
                                        ("3", ZeroStage.Z3), ("fsdp", ZeroStage.FSDP)])
def test_zero_accepts_numbers_and_names(text: str, stage: ZeroStage) -> None:
    assert debug(("    pp = 2", f"    pp = 2  zero = {text}")).parallel.zero is stage


def test_expressions_and_cross_section_references() -> None:
    spec = debug(("global_batch = 32", "global_batch = 8 * parallel.dp * (1 + 1)"),
                 ("micro_batch = 2", "micro_batch = train.parallel.tp"),
                 ("mem_bandwidth = 1.5 TB/s", "mem_bandwidth = 3 GB / 2 ms"),
                 ("seq_len = 1024", "seq_len = 2 * model.hidden"),
                 ("vocab = 32_000", "vocab = 32_000 - -768"))
    assert spec.train.global_batch == 32 and spec.train.micro_batch == 2
    assert spec.cluster.gpu.mem_bandwidth == 1.5e12
    assert (spec.model.seq_len, spec.model.vocab) == (1024, 32768)


def test_decimal_literals_are_exact() -> None:
    spec = debug(("arch = gpt", "arch = gpt  dropout = 0.1 + 0.2"),
                 ("mem_bandwidth = 1.5 TB/s", "mem_bandwidth = 3.35 TB/s"))
    assert spec.model.dropout == 0.3  # exact decimal arithmetic, not 0.30000000000000004
    assert spec.cluster.gpu.mem_bandwidth == 3.35e12


def test_sub_blocks_see_their_parent_fields() -> None:
    m = debug(("seq_len = 1024", "seq_len = 1024\n  moe { experts = 4  top_k = 1  "
               "expert_ffn_hidden = ffn_hidden / 2 }"), overrides=("parallel.sequence_parallel=true",)).model
    assert m.moe is not None and m.moe.expert_ffn_hidden == 1024
    assert (m.moe.shared_experts, m.moe.capacity_factor, m.moe.imbalance, m.moe.router.value) == (
        0, None, 1.0, "softmax")


@pytest.mark.parametrize("replacement,label,fragment", [
    (("hidden = 512", "hidden = heads * 64"), "defined later", "'heads' is defined later"),
    (("hidden = 512", "hidden = hidden"), "circular definition", "refers to itself"),
    (("global_batch = 32", "global_batch = parallel.dp\n  micro_batch2 = 1"), "unknown field",
     "micro_batch2"),
    (("    tp = 2", "    tp = train.global_batch / 16\n    dp = 2"), None, None),
])
def test_reference_rules(replacement: tuple[str, str], label: str | None,
                         fragment: str | None) -> None:
    if label is None:
        debug(replacement)
        return
    err = error(replacement)
    assert err.label == label
    assert fragment is None or fragment in err.message


def test_dotted_references_may_point_forward() -> None:
    # a section.field reference is evaluated on demand, wherever the field is written
    assert debug(("layers = 8", "layers = model.vocab / 4000")).model.layers == 8
    spec = debug(("global_batch = 32", "global_batch = 4 * train.micro_batch * parallel.dp"))
    assert spec.train.global_batch == 16


def test_cross_section_cycles_show_the_loop() -> None:
    err = error(("global_batch = 32", "global_batch = 16 * parallel.tp"),
                ("    tp = 2", "    tp = train.global_batch / 16"))
    assert err.label == "circular definition"
    assert "train.global_batch -> parallel.tp -> train.global_batch" in err.message


def test_free_symbols() -> None:
    spec = debug(("hidden = 512", "hidden = symbol"),
                 overrides=("gpu.mem_bandwidth=symbol", "gpu.flops.bf16=symbol",
                            "node.intra.bandwidth=symbol", "cluster.inter.latency=symbol"))
    hidden = spec.model.hidden
    assert hidden == sp.Symbol("hidden", integer=True, positive=True) == symbol_for("model.hidden")
    assert spec.model.ffn_hidden == 4 * hidden  # derived defaults stay symbolic
    assert spec.model.head_dim == hidden / 8
    gpu = spec.cluster.gpu
    assert gpu.mem_bandwidth == sp.Symbol("gpu_mem_bandwidth", real=True, positive=True)
    assert gpu.peak_flops[Dtype.BF16] == symbol_for("gpu.flops.bf16")
    assert str(spec.cluster.node.intra.bandwidth) == "node_intra_bandwidth"
    assert str(spec.cluster.inter.latency) == "cluster_inter_latency"
    assert spec.cluster.inter.latency.is_nonnegative
    assert spec.symbols == ("model.hidden", "cluster.inter.latency", "node.intra.bandwidth",
                            "gpu.mem_bandwidth", "gpu.flops.bf16")


def test_checks_are_skipped_when_symbols_leave_them_open() -> None:
    spec = debug(("    tp = 2", "    tp = symbol\n    dp = 4 / tp"))
    assert spec.parallel.dp == 4 / spec.parallel.tp
    # layers % (pp * vp) = Mod(layers, 2) is open for a free integer: skipped
    assert debug(("layers = 8", "layers = symbol")).model.layers == symbol_for("model.layers")


def test_checks_are_decided_when_sympy_can() -> None:
    # ffn_hidden = 4 * hidden is divisible by tp = 2 for every integer hidden
    assert debug(("hidden = 512", "hidden = symbol")).model.ffn_hidden == 4 * symbol_for("model.hidden")
    # 2 * layers + 1 is odd for every integer, so it never splits over micro_batch * dp = 2
    err = error(("layers = 8", "layers = symbol"), ("global_batch = 32", "global_batch = 2 * model.layers + 1"),
                ("micro_batch = 2", "micro_batch = 1"))
    assert err.label == "not divisible" and "2*layers + 1" in err.message


def test_symbol_only_for_numbers() -> None:
    err = error(("arch = gpt", "arch = symbol"))
    assert err.label == "bad symbol"


def test_sweeps_take_the_first_value_and_are_recorded() -> None:
    spec = debug(("    tp = 2", "    tp = [2, 1, 4]"), ("precision = bf16", "precision = [bf16, fp32]"),
                 ("mem_bandwidth = 1.5 TB/s", "mem_bandwidth = [1.5 TB/s, 2 TB/s]"))
    assert spec.parallel.tp == 2 and spec.train.precision.value == "bf16"
    assert spec.sweeps == (
        Sweep(path="train.precision", values=("bf16", "fp32")),
        Sweep(path="parallel.tp", values=(2, 1, 4)),
        Sweep(path="gpu.mem_bandwidth", values=(1.5e12, 2e12)),
    )


def test_every_sweep_value_is_validated() -> None:
    err = error(("    tp = 2", "    tp = [2, 3 GB]"))
    assert err.label == "wrong unit" and (err.span.column, err.span.end_column) == (14, 18)


def test_strings_bools_and_enums() -> None:
    spec = debug(('name = "Toy GPU"', 'name = "Toy \\"GPU\\"\\tv2"'),
                 ("micro_batch = 2", "micro_batch = 2  recompute = full  attention = unfused"),
                 ("    pp = 2", "    pp = 2  schedule = gpipe  sequence_parallel = true"))
    assert spec.cluster.gpu.name == 'Toy "GPU"\tv2'
    assert spec.train.recompute is Recompute.FULL and spec.train.attention is Attention.UNFUSED
    assert spec.parallel.schedule is Schedule.GPIPE and spec.parallel.sequence_parallel


def test_interleaved_schedule_with_1f1b_token() -> None:
    spec = debug(("    pp = 2", "    pp = 2  vp = 2  schedule = interleaved"))
    assert spec.parallel.schedule is Schedule.INTERLEAVED
    assert debug(("    pp = 2", "    pp = 2  schedule = 1f1b")).parallel.schedule is Schedule.ONE_F_ONE_B
