"""Stack profiles: every profile resolves and cites its code, a spec's field beats the profile,
the graph launches the kernels the stack launches, the model counts its parameters as published,
and the generic profile keeps llmp's numbers from before stacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from stacks_helpers import BASE

from llmp.analytic import params
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Elementwise, Family, Fusion, Kernel, SoftmaxKind
from llmp.analytic.op import Part, Scope
from llmp.compose.predictor import predict
from llmp.dsl import load, loads
from llmp.errors import SpecError
from llmp.spec import schema
from llmp.spec.spec import Attention, Stack
from llmp.stacks import DEFAULT_FIELDS, PROFILES, padded_vocab, profile

ROOT = Path(__file__).parents[3]


def spec_of(train: str = "", model: str = "", parallel: str = "", arch: str = "gpt", **kw: object):
    return loads(BASE.format(train=train, model=model, parallel=parallel, arch=arch), **kw)


def layer_kernels(spec, part: Part = Part.FORWARD) -> dict[str, Kernel]:
    graph = decompose(spec)
    return {graph.ops[i].name: graph.ops[i].work for i in graph.indices(Scope.LAYER, part)
            if isinstance(graph.ops[i].work, Kernel)}


# ---- profiles as data ---------------------------------------------------------------------

@pytest.mark.parametrize("stack", list(Stack))
def test_every_stack_has_a_profile_that_resolves_and_predicts(stack: Stack) -> None:
    zero = "zero = 1" if stack in (Stack.COMPOSER, Stack.TORCHTITAN, Stack.NEMO_AUTOMODEL) else ""
    spec = spec_of(f"stack = {stack.value}", parallel=zero)
    assert spec.train.stack is stack
    pred = predict(spec)
    assert pred.step_time_s > 0 and pred.provenance.stack == stack.value


@pytest.mark.parametrize("stack", [s for s in Stack if s is not Stack.GENERIC])
def test_every_item_cites_the_stacks_code_or_docs(stack: Stack) -> None:
    prof = PROFILES[stack]
    assert prof.stack is stack
    for name, item in prof.items():
        assert item.source.strip(), f"{stack}.{name} has no source"
        cited = item.source
        assert ("/" in cited and ("@" in cited or ":" in cited)) or cited.startswith("http") or cited.startswith(
            "unused") or cited.startswith("the Hugging Face") or cited.startswith("HF "), f"{stack}.{name}: {cited}"


def test_the_stack_defaults_are_exactly_the_schema_fields_marked_stack() -> None:
    marked = {p for p, f in schema.paths().items() if f.default == schema.STACK}
    assert marked == {f"{sec}.{name}" for sec, names in DEFAULT_FIELDS.items() for name in names}


@pytest.mark.parametrize("stack", list(Stack))
def test_each_profile_default_is_valid_llmp_for_its_field(stack: Stack) -> None:
    prof = profile(stack)
    zero = "zero = 1" if prof.zero.value.value == "fsdp" else ""
    spec = spec_of(f"stack = {stack.value}", parallel=zero)
    for sec, names in DEFAULT_FIELDS.items():
        for name in names:
            if name == "zero" and zero:
                continue
            value = getattr(getattr(spec, sec), name)
            expected = getattr(prof, name).value
            assert value == expected, (stack, name)


# ---- the spec beats the profile ----------------------------------------------------------

def test_an_explicit_field_beats_the_profile_and_is_recorded() -> None:
    spec = spec_of("stack = gpt_neox   attention = flash2")
    assert spec.train.attention is Attention.FLASH2 and spec.train.fused_rope is False
    assert "train.attention" in spec.stack_set and "train.fused_rope" not in spec.stack_set
    over = spec_of("stack = gpt_neox", overrides=["parallel.dp_overlap=true"])
    assert over.parallel.dp_overlap is True and "parallel.dp_overlap" in over.stack_set
    assert spec_of("stack = gpt_neox").parallel.dp_overlap is False


def test_check_prints_each_item_with_where_it_came_from() -> None:
    from llmp.commands.check import render
    from llmp.stacks import in_effect
    spec = spec_of("stack = gpt_neox   attention = flash2")
    rows = {r["item"]: r for r in in_effect(spec)}
    assert rows["attention"]["source"] == "spec" and rows["attention"]["value"] == "flash2"
    assert "neox_args.py" in rows["fused_rope"]["source"]
    text = render(spec)
    assert "stack gpt_neox" in text and "set in the spec" in text


# ---- kernels per profile -------------------------------------------------------------------

def test_gpt_neox_runs_eager_rmsnorm_rope_and_cross_entropy_megatron_core_fused() -> None:
    neox = spec_of("stack = gpt_neox", model="norm = rmsnorm   position = rotary")
    core = spec_of("stack = megatron_core", model="norm = rmsnorm   position = rotary")
    kn, kc = layer_kernels(neox), layer_kernels(core)
    assert kn["layer.attn.norm"].variant == Fusion.UNFUSED and kc["layer.attn.norm"].variant == Fusion.FUSED
    assert kn["layer.attn.rotary"].variant == Elementwise.ROTARY_UNFUSED
    assert kc["layer.attn.rotary"].variant == Elementwise.ROTARY
    head = {op.name: op.work for op in decompose(neox) if op.scope is Scope.LAST and isinstance(op.work, Kernel)}
    assert head["head.cross_entropy"].variant == Fusion.UNFUSED
    # GPT-NeoX: unfused attention with masked_fill; a bias-add kernel of its own
    assert {"layer.attn.scores", "layer.attn.mask", "layer.attn.context", "layer.attn.bias",
            "layer.mlp.fc1.bias"} <= set(kn)
    assert "layer.attn.core" in kc and "layer.attn.bias" not in kc


def test_fused_softmax_and_its_sequence_limit() -> None:
    short = layer_kernels(spec_of("stack = gpt_neox   attention = unfused_fused_softmax"))
    assert short["layer.attn.softmax"].variant == SoftmaxKind.CAUSAL_FUSED and "layer.attn.mask" not in short
    long = layer_kernels(spec_of("stack = gpt_neox   attention = unfused_fused_softmax",
                                 overrides=["model.seq_len=4096"]))
    assert long["layer.attn.softmax"].variant == SoftmaxKind.PLAIN and "layer.attn.mask" in long


def test_stack_work_each_step() -> None:
    names = {op.name for op in decompose(spec_of("stack = gpt_neox")) if op.scope is Scope.RANK}
    assert {"step.inf_check", "step.found_inf_all_reduce", "step.grad_norm", "step.grad_norm_all_reduce",
            "step.grad_scale", "step.loss_all_reduce", "step.loss_broadcast"} <= names
    core = {op.name for op in decompose(spec_of("stack = megatron_core")) if op.scope is Scope.RANK}
    assert {"step.zero_grad", "step.unscale_check", "step.grad_norm"} <= core and "step.grad_scale" not in core
    titan = [op for op in decompose(spec_of("stack = torchtitan   optimizer_kernel = foreach", parallel="zero = 1"))
             if op.name.startswith("step.optimizer")]
    titan = [op for op in titan if op.rank_kind.value == "first"]
    assert len(titan) == 8 and all(op.work.dtype.value == "fp32" for op in titan)


def test_gradient_accumulation_without_fusion_adds_every_microbatch() -> None:
    fused = {op.name for op in decompose(spec_of("stack = megatron_core"))}
    unfused = [op for op in decompose(spec_of("stack = gpt_neox")) if op.name.endswith("grad_accumulate")]
    assert not any(n.endswith("grad_accumulate") for n in fused)
    assert {op.scope for op in unfused} == {Scope.LAYER, Scope.FIRST, Scope.LAST}


# ---- the model as it ran -------------------------------------------------------------------

def test_partial_rotary_rotates_a_quarter_and_copies_q_and_k_back() -> None:
    full = layer_kernels(spec_of(model="position = rotary"))
    part = layer_kernels(spec_of(model="position = rotary   rotary_pct = 0.25"))
    assert part["layer.attn.rotary"].dim("elements") == full["layer.attn.rotary"].dim("elements") / 4
    assert "layer.attn.rotary_cat" in part and "layer.attn.rotary_cat" not in full


def test_parallel_residual_reduces_once_and_counts_its_norms() -> None:
    seq = decompose(spec_of())
    par = decompose(spec_of(model="parallel_residual = true"))
    shared = decompose(spec_of(model="parallel_residual = true   shared_norm = true"))

    def fwd_tp(graph):
        return [op.name for op in graph if op.scope is Scope.LAYER and op.part is Part.FORWARD
                and op.axis is not None and op.axis.value == "tp"]

    assert len(fwd_tp(seq)) == 2 and fwd_tp(par) == ["layer.mlp.tp_all_reduce"]
    def norms(graph):
        return [op.name for op in graph if op.scope is Scope.LAYER and op.part is Part.FORWARD
                and isinstance(op.work, Kernel) and op.work.family is Family.NORM]

    assert len(norms(par)) == 2 and len(norms(shared)) == 1
    m_par, m_shared = spec_of(model="parallel_residual = true").model, spec_of(
        model="parallel_residual = true   shared_norm = true").model
    assert params.count(m_par) - params.count(m_shared) == 4 * 2 * 1024  # 4 layers x LayerNorm (w, b)


def _count(text: str) -> int:
    spec = loads(text)
    return int(params.count(spec.model, padded_vocab(spec)))


def test_gpt_neox_20b_counts_20_55_billion() -> None:
    # Black et al. 2022, "GPT-NeoX-20B", Table 1: 20,554,567,680 parameters (tokenizer 50277,
    # trained with tp = 2: embedding padded to 50432 rows).
    text = (ROOT / "docs" / "language.md").read_text().split("# GPT-NeoX-20B's layer as it ran")[1]
    text = "# " + text.split("```")[0]
    assert _count(text) == 20_554_567_680


def test_nemotron4_340b_and_llama2_7b() -> None:
    nemotron = BASE.format(arch="gpt", model="", train="", parallel="").split("model m")[0] + """
model nemotron4_340b {
  # Nemotron-4 340B (NVIDIA 2024, Table 1): 96 layers, hidden 18432, 96 heads, 8 kv heads,
  # squared-ReLU MLP of 73728 without a gate, vocab 256000, untied, no bias, RoPE
  arch = gpt   layers = 96   hidden = 18432   heads = 96   kv_heads = 8   ffn_hidden = 73728
  vocab = 256000   seq_len = 4096   activation = squared_relu   bias = false   tied_embeddings = false
  position = rotary
}
cluster c { node = dgx_a100   nodes = 96 }
train { global_batch = 768   parallel { tp = 8   pp = 12 } }
"""
    n = _count(nemotron)
    assert n == pytest.approx(341e9, rel=0.005)  # "340B"; a gated count would be ~471 G
    llama = nemotron.replace("activation = squared_relu", "activation = swiglu").replace(
        "layers = 96   hidden = 18432   heads = 96   kv_heads = 8   ffn_hidden = 73728",
        "layers = 32   hidden = 4096   heads = 32   ffn_hidden = 11008").replace(
        "vocab = 256000", "vocab = 32000").replace("norm", "norm").replace("pp = 12", "pp = 1").replace(
        "arch = gpt", "arch = llama")
    assert _count(llama) == 6_738_415_616  # Llama 2 7B (Touvron et al. 2023): 6.74 B


# ---- recompute -----------------------------------------------------------------------------

@pytest.mark.parametrize("attention", ["flash2", "unfused", "unfused_fused_softmax"])
def test_selective_recompute_reruns_exactly_the_attention_core(attention: str) -> None:
    spec = spec_of(f"stack = megatron_core   attention = {attention}   recompute = selective")
    redo = {op.name.removeprefix("recompute.") for op in decompose(spec) if op.recompute}
    core = {"flash2": {"layer.attn.core"},
            "unfused": {"layer.attn.scores", "layer.attn.mask", "layer.attn.softmax", "layer.attn.context"},
            "unfused_fused_softmax": {"layer.attn.scores", "layer.attn.softmax", "layer.attn.context"}}
    assert redo == core[attention]


def test_full_recompute_reruns_every_forward_op_of_the_layer() -> None:
    graph = decompose(spec_of("recompute = full"))
    fwd = {op.name for op in graph if op.scope is Scope.LAYER and op.part is Part.FORWARD}
    redo = {op.name.removeprefix("recompute.") for op in graph if op.recompute}
    assert redo == fwd


# ---- generic keeps today's numbers ---------------------------------------------------------

# Step times of the shipped examples with no stack (roofline only, llmp.predict): main at b179764, updated
# where the layouts work changed a number on purpose (vista_llemma_7b now runs the seed's tp 2 x pp 4 layout;
# mixtral by 1e-5: only ring steps that cross a node pay the network latency; mixtral again when its MoE layer
# became Megatron-Core's: the router on the sequence shard, softmax over the top-2, its load-balancing loss,
# the probabilities' own all-to-all; gpt3_175b and llama3_70b by +0.01% when the gradient buckets stopped hiding
# behind backward compute that already hides a TP collective; every GPU example by +16 us when the host thread
# began to issue the optimizer's update after the step's synchronisation, llmp.stacks.host; every multi-GPU example
# when collectives became NCCL's own cost model and the DGX A100/H100 and Perlmutter ones serve their measured
# tables, issue 21; every GPU example again when GEMM and attention grids were quantized onto the SMs,
# llmp.analytic.tiles; every GPU example by -1 us when the host's dispatch costs were re-measured on a quiet
# machine, llmp/stacks/host_costs.json; gpt3_175b_dgx_a100 and perlmutter_gpt when their nodes' host CPUs (Zen 2, Zen 3)
# began to dispatch at their cores' speed, and the DGX H100 (Golden Cove) and Vista (Grace) ones when the catalog
# named theirs, llmp.stacks.host.SPEED; every multi-GPU example by +0.4% to +1.8% when communication hidden
# behind compute began to slow that compute, llmp.compose.overlap.CONTENTION).
BEFORE = {"gpt3_175b_dgx_a100": 57.682894446156986, "llama3_70b_dgx_h100": 13.42450111026345,
          "llama3_8b_dgx_h100": 11.347286612193804, "mixtral_8x7b_dgx_h100": 2.5960086581834636,
          "perlmutter_gpt": 6.3958284010533655, "tiny_cpu": 0.015305533600000002,
          "vista_llemma_7b": 3.0974408497904133}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_examples_without_a_stack_keep_their_numbers(name: str) -> None:
    step = predict(load(ROOT / "examples" / f"{name}.llmp"), residuals=None).step_time_s
    assert step == pytest.approx(BEFORE[name], rel=1e-12)


# ---- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize(("train", "model", "parallel", "needle"), [
    ("stack = gpt_neo", "", "", "gpt_neox"),
    ("stack = gpt_neox   attention = cudnn", "", "", "launches only"),
    ("stack = gpt_neox", "", "tp_comm_overlap = true", "userbuffers"),
    ("stack = megatron_lm", "", "zero = fsdp", "does not shard parameters"),
    ("stack = gpt_neox", "", "zero = 2", "pipeline"),
    ("attention = unfused_fused_softmax", "", "", ""),
    ("", "rotary_pct = 0.5", "", "position = rotary"),
    ("", "shared_norm = true", "", "parallel_residual"),
    ("flash_attention = false", "", "", "attention = flash2"),
])
def test_bad_stack_input_is_a_clear_error(train: str, model: str, parallel: str, needle: str) -> None:
    text = BASE.format(arch="gpt", model=model, train=train, parallel=parallel)
    if not needle:  # a valid combination
        loads(text)
        with pytest.raises(SpecError, match="16-bit"):
            loads(text.replace("precision = fp16", "precision = fp32"))
        return
    with pytest.raises(SpecError) as err:
        loads(text)
    assert needle in str(err.value) + (err.value.hint or "")
