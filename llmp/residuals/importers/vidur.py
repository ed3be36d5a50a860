"""Vidur's FP16 operator and NCCL profiles (microsoft/vidur, ``data/profiling/``) as llmp samples.

Compute (``compute/<gpu>/<org>/<model>/mlp.csv``): the forward ops of Vidur's reference GPT block
(``vidur/profiling/mlp/mlp_impl.py``), which are Sarathi-Serve's vLLM-style layers. The kernels
that ran, read in microsoft/vidur and microsoft/sarathi-serve:

* ``input_layernorm`` / ``post_attention_layernorm``: Sarathi ``RMSNorm`` calls one fused CUDA kernel,
  ``layernorm_ops.rms_norm`` (sarathi/model_executor/layers/layernorm.py) -> NORM ``Fusion.FUSED``
  rms=1; phi-2 uses ``torch.nn.LayerNorm`` (native_layer_norm, one kernel) -> NORM fused rms=0.
* ``attn_rope``: ``pos_encoding_ops.rotary_embedding(positions, q, k, ...)``, one in-place kernel over q
  and k (sarathi/model_executor/layers/rotary_embedding.py) -> ``Elementwise.ROTARY`` (the fused
  variant) on ``tokens * (q_heads + kv_heads) / tp * head_dim`` elements. Vidur builds it with
  ``rotary_dim = head_dim`` for every model (mlp_impl.py ``get_rope(self.head_dim, rotary_dim=self.head_dim,
  ...)``), so phi-2's partial rotary factor does not apply here.
* ``mlp_act``: ``SiluAndMul`` -> ``activation_ops.silu_and_mul``, one fused kernel (activation.py) ->
  ``Elementwise.SWIGLU`` on the ``tokens * ffn / tp`` outputs; phi-2 (not gated): ``torch.nn.GELU`` ->
  ``Elementwise.GELU``.
* GEMMs: ``F.linear`` inside ``Column/RowParallelLinear.apply_weights`` (sarathi tensor_parallel/layers.py)
  with the TP-sharded widths; the timer covers only ``F.linear`` (a bias there is an epilogue).
* ``emb``: only ``F.embedding`` over the ``vocab / tp`` rows is timed (``VocabParallelEmbedding.forward``).
* ``add``: ``residual + hidden_states`` (one ADD); phi-2's parallel block times
  ``attn + mlp + residual``, two identical ADD kernels.

Times: ``time_stats.<op>.median`` in ms; Vidur's default ``record_function`` method sums the CUDA
kernels launched inside each op's range in a Kineto trace (vidur/profiling/utils/
record_function_tracer.py), over 20 repeats of the block (mlp_wrapper.py ``ACTIVE_STEPS``).

Network (``network/<node>/{all_reduce,send_recv}.csv``): ``size`` is already bytes
(collectives_wrapper.py: ``"size": self._size * 2  # bytes``, fp16 buffers); times are the median
NCCL kernel time (Kineto, ``filter_str="nccl"``) of 11 back-to-back calls on rank 0, and the CSV's
median is over 3 such runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llmp.analytic.kernels import Collective, CollectiveKind, Elementwise, Family, Fusion, Kernel, Pass, Tier
from llmp.errors import InputError
from llmp.hardware import names
from llmp.hardware.spec import Dtype
from llmp.residuals.importers import common, tables
from llmp.residuals.importers.common import Collected, Input, Sample

REPO = "microsoft/vidur"
COMMIT = "7d47513"
"""The commit the shared data names (shared/data/vidur/README.md); only its short form is known."""
LICENCE = "MIT"
MS = 1e-3
DT = Dtype.FP16  # mlp_wrapper.py: model.to(dtype=torch.float16); collectives_impl.py: dtype=torch.float16

GPUS = names.VIDUR
"""Vidur's compute device folders -> catalog ids (the registry of GPU names, where the choices are
explained)."""


@dataclass(frozen=True, slots=True)
class NetworkNode:
    gpu: str
    node: str | None
    why: str


NETWORKS: dict[str, NetworkNode] = {
    "a100_dgx": NetworkNode("a100", "dgx_a100", "A100 DGX with 8 80GB A100s (vidur/profiling/README.md)"),
    "h100_dgx": NetworkNode("h100", "dgx_h100", "H100 DGX with 8 H100s (vidur/profiling/README.md)"),
    "a100_pairwise_nvlink": NetworkNode(
        "a100", None, "Azure Standard_NC96ads_A100_v4: 4 A100 80GB cards with NVLink between pairs "
                      "(vidur/profiling/README.md); the catalog has no such node"),
    "h100_pairwise_nvlink": NetworkNode(
        "h100", None, "4 H100 per node with NVLink between pairs (vidur/config/node_sku_config.py "
                      "H100PairwiseNvlinkNodeSKUConfig); the catalog has no such node"),
    "a40_pairwise_nvlink": NetworkNode(
        "a40", None, "A40 cards with NVLink bridges between pairs (vidur/config/node_sku_config.py); the catalog "
                     "has no such node"),
}
"""Vidur network folders -> the catalog node their collectives ran on, or why none fits."""


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The parts of Vidur's model config (data/model_configs/<org>/<model>.yml) that change the kernels."""

    rms: int
    """norm: rms_norm (1) or layer_norm (0)."""
    qkv_bias: bool
    """use_bias or use_qkv_bias: the QKV GEMM adds a bias."""
    bias: bool
    """use_bias: the MLP up-projection adds a bias."""


MODELS: dict[str, ModelConfig] = {
    "microsoft/phi-2": ModelConfig(rms=0, qkv_bias=True, bias=True),
    "Qwen/Qwen-72B": ModelConfig(rms=1, qkv_bias=True, bias=False),
    "internlm/internlm-20b": ModelConfig(rms=1, qkv_bias=False, bias=False),
    "meta-llama/Llama-2-7b-hf": ModelConfig(rms=1, qkv_bias=False, bias=False),
    "meta-llama/Llama-2-70b-hf": ModelConfig(rms=1, qkv_bias=False, bias=False),
    "meta-llama/Meta-Llama-3-8B": ModelConfig(rms=1, qkv_bias=False, bias=False),
    "meta-llama/Meta-Llama-3-70B": ModelConfig(rms=1, qkv_bias=False, bias=False),
    "codellama/CodeLlama-34b-Instruct-hf": ModelConfig(rms=1, qkv_bias=False, bias=False),
}

SHAPE = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
         "num_tensor_parallel_workers")
OPS = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
       "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")

OTHER_DEVICE = "profiled on another device than --device"
NO_NODE = "no catalog node for this Vidur network device"
UNKNOWN_MODEL = "model not in the importer's table of Vidur model configs (norm type, biases)"

RULES = (
    "compute: the median of each op's times; ops mapped to the vLLM-style fused kernels Sarathi-Serve runs "
    "(fused RMSNorm, fused rotary over q and k, fused silu_and_mul); see the vidur importer's docstring",
    "compute: a configuration (num_tokens, TP workers) profiled twice in one file is a duplicate, the faster "
    "median kept; configurations that run the same llmp kernel (a norm at every TP degree) stay separate rows",
    "phi-2's `add` times two identical ADD kernels (attn + mlp + residual): one row with half the time",
    "devices: Vidur's a100 -> a100_sxm4_80gb and h100 -> h100_sxm5_80gb (80 GB SXM parts assumed: the profiles "
    "do not say; Vidur's README describes its A100 node as a DGX with 80 GB A100s), a40 -> a40",
    "network: size is bytes (fp16 elements x 2); a100_dgx -> node dgx_a100, h100_dgx -> dgx_h100; the pairwise "
    "NVLink nodes have no catalog node and are skipped",
)


def accept(path: Path) -> bool:
    parts = path.parts
    if path.name == "mlp.csv":
        return len(parts) >= 5 and parts[-5] == "compute"
    if path.name in ("all_reduce.csv", "send_recv.csv"):
        return len(parts) >= 3 and parts[-3] == "network"
    return False


def _gemm(m: int, n: int, k: int) -> Kernel:
    return Kernel.make(Family.GEMM, DT, Pass.FWD, m=m, n=n, k=k, batch=1)


_OpKernel = tuple[Kernel, str, int, tuple[str, ...]]
"""What one op of an mlp.csv row timed: (kernel, GEMM role, width, notes)."""


def _row_kernels(row: dict[str, str], where: str, config: ModelConfig) -> tuple[dict[str, _OpKernel], int, int]:
    """The kernel each op of an ``mlp.csv`` row timed (``mlp_impl.py``: one TP worker's share of a
    block), with the row's token count and TP degree; the shape columns checked."""
    h, kv, e, ffn, vocab, t, tp = (tables.integer(row, c, where) for c in
                                   ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size",
                                    "num_tokens", "num_tensor_parallel_workers"))
    if row["use_gated_mlp"] not in ("True", "False"):
        raise InputError(f"{where}: use_gated_mlp must be True or False, got {row['use_gated_mlp']!r}")
    if min(h, kv, e, ffn, vocab, t, tp) == 0:
        raise InputError(f"{where}: shape columns must be positive")
    gated = row["use_gated_mlp"] == "True"
    hd = tables.exact_div(e, h, where, "head dim n_embd/n_head")
    hq, hkv = (tables.exact_div(x, tp, where, "heads per TP worker") for x in (h, kv))
    ffn_tp = tables.exact_div(ffn, tp, where, "MLP width per TP worker")
    norm = Kernel.make(Family.NORM, DT, Pass.FWD, Fusion.FUSED.value, tokens=t, hidden=e, rms=config.rms)
    kernels_: dict[str, _OpKernel] = {
        "emb": (Kernel.make(Family.EMBEDDING, DT, Pass.FWD, tokens=t, hidden=e,
                            vocab=tables.exact_div(vocab, tp, where, "vocab per TP worker")), "", 0, ()),
        "input_layernorm": (norm, "", 0, ()),
        "post_attention_layernorm": (norm, "", 0, ()),
        "attn_pre_proj": (_gemm(t, (hq + 2 * hkv) * hd, e), "fwd", 0, ("bias",) if config.qkv_bias else ()),
        "attn_rope": (Kernel.make(Family.ELEMENTWISE, DT, Pass.FWD, Elementwise.ROTARY.value,
                                  elements=t * (hq + hkv) * hd), "", hd, ()),
        "attn_post_proj": (_gemm(t, e, hq * hd), "fwd", 0, ()),
        "mlp_up_proj": (_gemm(t, (2 if gated else 1) * ffn_tp, e), "fwd", 0, ("bias",) if config.bias else ()),
        "mlp_act": (Kernel.make(Family.ELEMENTWISE, DT, Pass.FWD,
                                (Elementwise.SWIGLU if gated else Elementwise.GELU).value,
                                elements=t * ffn_tp), "", ffn_tp, ()),
        "mlp_down_proj": (_gemm(t, e, ffn_tp), "fwd", 0, ()),
        "add": (Kernel.make(Family.ELEMENTWISE, DT, Pass.FWD, Elementwise.ADD.value, elements=t * e), "", e, ()),
    }
    return kernels_, t, tp


class _Reader:
    def __init__(self, device_id: str, node_id: str | None) -> None:
        self.device_id, self.node_id = device_id, node_id
        self.inputs: list[Input] = []
        self.samples: list[Sample] = []
        self.gpus: set[str] = set()
        self.nodes: set[str] = set()

    def _input(self, path: Path, rel: str) -> Input:
        inp = Input(name=path.name, source_ref=f"{REPO}@{COMMIT}:data/profiling/{rel}", licence=LICENCE)
        self.inputs.append(inp)
        return inp

    @staticmethod
    def _skip_file(path: Path, inp: Input, reason: str) -> None:
        table = tables.read_table(path, (), "vidur")
        per_row = max(1, sum(c.startswith("time_stats.") and c.endswith(".median") for c in table.columns))
        inp.rows_read, inp.values_read = len(table.rows), per_row * len(table.rows)
        inp.skip(reason, inp.values_read)

    def compute(self, path: Path) -> None:
        gpu, org, model = path.parts[-4], path.parts[-3], path.parts[-2]
        inp = self._input(path, f"compute/{gpu}/{org}/{model}/mlp.csv")
        if GPUS.get(gpu) != self.device_id:
            self._skip_file(path, inp, OTHER_DEVICE)
            return
        config = MODELS.get(f"{org}/{model}")
        if config is None:
            self._skip_file(path, inp, f"{UNKNOWN_MODEL}: {org}/{model}")
            return
        self.gpus.add(gpu)
        table = tables.read_table(path, SHAPE, "vidur")
        ops = [op for op in OPS if f"time_stats.{op}.median" in table.columns]
        if not ops:
            raise InputError(f"{path.name} has no time_stats.<op>.median column",
                             hint=f"a Vidur mlp.csv holds medians of {', '.join(OPS)}")
        inp.rows_read, inp.values_read = len(table.rows), len(ops) * len(table.rows)
        ref = inp.source_ref
        for line, row in table.rows:
            where = f"{path.name}:{line}"
            kernels_, t, tp = _row_kernels(row, where, config)
            # mlp_impl.py GPTBlock: without a post-attention norm (phi-2) the block times
            # `attn_outputs + feed_forward_hidden_states + residual`: two ADD kernels.
            two_adds = "post_attention_layernorm" not in ops
            for op in ops:
                span = tables.seconds(row, f"time_stats.{op}.median", where, MS)
                kernel, role, width, notes = kernels_[op]
                t_row = span
                if op == "add" and two_adds:
                    t_row, notes = span / 2, (*notes, "composite:2x")
                self.samples.append(Sample(
                    item=kernel, seconds=t_row, tag=f"vidur:{org}/{model}:{op}:t={t},tp={tp}",
                    source_ref=f"{ref}:{line}", input=len(self.inputs) - 1, notes=tuple(sorted({"kernel_sum", *notes})),
                    role=role, width=width, repeats=20, span_s=span))

    def network(self, path: Path) -> None:
        folder, coll = path.parts[-2], path.stem
        inp = self._input(path, f"network/{folder}/{path.name}")
        net = NETWORKS.get(folder)
        if net is None:
            self._skip_file(path, inp, f"unknown Vidur network device: {folder}")
            return
        if GPUS[net.gpu] != self.device_id:
            self._skip_file(path, inp, OTHER_DEVICE)
            return
        if net.node is None:
            self._skip_file(path, inp, f"{NO_NODE}: {folder}: {net.why}")
            return
        median = f"time_stats.{coll}.median"
        table = tables.read_table(path, (median, "num_workers", "size", "collective", "devices_per_node"), "vidur")
        inp.rows_read = inp.values_read = len(table.rows)
        self.nodes.add(self.node_id or net.node)
        kind = CollectiveKind(coll)
        for line, row in table.rows:
            where = f"{path.name}:{line}"
            if row["collective"] != coll:
                raise InputError(f"{where}: collective {row['collective']!r} in a {path.name} file")
            workers, size, per_node = (tables.integer(row, c, where) for c in ("num_workers", "size",
                                                                              "devices_per_node"))
            if min(workers, size, per_node) == 0:
                raise InputError(f"{where}: num_workers, size and devices_per_node must be positive")
            t = tables.seconds(row, median, where, MS)
            # benchmark_runner.py _get_rank: devices packed in order, devices_per_node per node.
            rpn = min(per_node, workers)
            tier = Tier.INTRA if workers <= per_node else Tier.INTER
            item = Collective(kind=kind, bytes=size, group=workers, ranks_per_node=rpn, tier=tier)
            self.samples.append(Sample(item=item, seconds=t, tag=f"vidur:{folder}",
                                       source_ref=f"{inp.source_ref}:{line}", input=len(self.inputs) - 1, repeats=3,
                                       dtype="fp16", span_s=t))


def collect(files: list[Path], *, device_id: str, node_id: str | None) -> Collected:
    """Read Vidur's profiles of ``device_id`` (see the module docstring)."""
    common.check_device(device_id, GPUS.values(), "vidur")
    if node_id is not None:
        common.check_node(node_id, device_id)
    reader = _Reader(device_id, node_id)
    for path in files:
        if path.name == "mlp.csv":
            reader.compute(path)
        else:
            reader.network(path)
    nodes = sorted(reader.nodes)
    assert len(nodes) <= 1, "one device maps to one usable Vidur network node"
    meta = {
        "source": "Vidur (Agrawal et al., MLSys 2024) operator and collective profiles",
        "repo": f"{REPO}@{COMMIT}", "licence": LICENCE,
        "device_name": ", ".join(sorted(reader.gpus)) or None,
        "timing": "CUPTI median (Kineto kernel time)",
        "timing_detail": ("compute: sum of the CUDA kernels inside each op's record_function range (Kineto trace), "
                          "median over 20 repeats (vidur/profiling/utils/record_function_tracer.py, "
                          "mlp/mlp_wrapper.py); network: median NCCL kernel time of 11 calls on rank 0, median of 3 "
                          "runs (collectives/collectives_wrapper.py)"),
        "assumptions": ["Vidur 'a100' = A100 SXM4 80GB, 'h100' = H100 SXM5 80GB: the profiles do not name the part "
                        "(Vidur's profiling README: 'A100 DGX with 8 80GB A100s', 'H100 DGX with 8 H100s')",
                        "compute timing: Vidur's default --profile_method record_function "
                        "(vidur/profiling/mlp/main.py); the CSVs do not record the method (the shared README guesses "
                        "CUDA events)",
                        "inference-side forward profiles: no backward rows"],
    }
    return Collected(fmt="vidur", device_id=device_id, node_id=nodes[0] if nodes else node_id, meta=meta,
                     samples=tuple(reader.samples), inputs=tuple(reader.inputs), rules=RULES)
