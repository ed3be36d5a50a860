"""The seed paper's measurement format (DebarghaG/estimate-train-time) as llmp samples, on any GPU.

Reads the operator CSVs (``<GPU>_<op>_fp16.csv``: single-GPU forward/backward spans in us) and the
NCCL CSVs (``<GPU>_<coll>_fp16_<N>_<M>.csv``: per-call rank-0 spans in us) described in
``shared/data/seed-estimate-train-time/README.md`` (cited as "README §n" below). Every operator
row becomes the kernel(s) that really ran, exactly as ``analytic.layer`` builds them: GEMMs
``(m, n, k, batch)`` with ``Y[m,n] = X[m,k] W[k,n]``, and the GPT-NeoX stack's variants (unfused
RMSNorm, unfused rotary, masked_fill, Megatron's fused causal softmax, eager cross-entropy).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from llmp.analytic.kernels import (
    Collective,
    CollectiveKind,
    Elementwise,
    Family,
    Fusion,
    Kernel,
    Pass,
    SoftmaxKind,
    Tier,
)
from llmp.dsl import catalog as resolved
from llmp.errors import InputError
from llmp.hardware import names
from llmp.hardware.spec import Device, Dtype, Node
from llmp.residuals.importers import common, physics, tables
from llmp.residuals.importers.common import Collected, Input, Sample

REPO = "DebarghaG/estimate-train-time"
COMMIT = "1ac4d5e441169983737f4f5c1c2c3b05b618307d"
LICENCE = "MIT"
US = 1e-6

CLUSTERS: dict[str, tuple[str, str]] = {
    "a100_sxm4_80gb": ("Perlmutter", "perlmutter_seed"),
    "gh200_96gb": ("Vista", "vista_gh200"),
}
"""Catalog GPU -> (the seed's cluster folder, the catalog node its NCCL ran on) for the clusters the
seed measured: NERSC Perlmutter, 4 A100-SXM4-80GB per node, on the network its NCCL samples saw
(README §0, §8.1; catalog node ``perlmutter_seed``), and TACC Vista, one GH200 per node (README §7,
``llemma_7b_4_2_2_V.yml``). Which GPU a file holds is read from its prefix,
``torch.cuda.get_device_name(0)`` without spaces (README §1), through the registry of GPU names
(``llmp.hardware.names``); another cluster's files need ``--gpu`` only when their prefix is not
listed there, and ``--node`` when they hold NCCL rows."""

DTYPES = {"fp16": Dtype.FP16, "bf16": Dtype.BF16, "fp32": Dtype.FP32}

_OPERATOR = re.compile(r"^(?P<gpu>[A-Za-z0-9-]+)_(?P<op>[A-Za-z0-9_]+?)_(?P<prec>fp16|bf16|fp32)\.csv$")
_NCCL = re.compile(r"^(?P<gpu>[A-Za-z0-9-]+)_(?P<op>allreduce|allreduce_large|allgather_large|p2p)"
                   r"_(?P<prec>fp16|bf16|fp32)(?:_(?P<n>\d+)_(?P<m>\d+))?\.csv$")
_SUMMARY = re.compile(r"^(?P<gpu>[A-Za-z0-9-]+)\.csv$")

SKIP_FILES: dict[str, str] = {
    "firstStage_optimizer": "stage optimizer: DeepSpeed FusedAdam's first step on fp16 params without fp32 master "
                            "weights, state initialisation inside the span (README §4.1): no faithful llmp "
                            "optimizer kernel",
    "middleStage_optimizer": "stage optimizer: DeepSpeed FusedAdam's first step on fp16 params without fp32 master "
                             "weights, state initialisation inside the span (README §4.1): no faithful llmp "
                             "optimizer kernel",
    "lastStage_optimizer": "stage optimizer: DeepSpeed FusedAdam's first step on fp16 params without fp32 master "
                           "weights, state initialisation inside the span (README §4.1): no faithful llmp "
                           "optimizer kernel",
    "optimizer": "generic optimizer file of unknown provenance, optimizer, TP degree and unit (README §4.4)",
}
SUMMARY_REASON = "model-selection summary of the seed's regressors, not measurements (README §6)"
COMBINED_REASON = "combined NCCL file: an exact concatenation of the per-topology files (README §5.3)"
RES_ADD_BWD_REASON = "res_add B_dur is the forward aten::add measured again, not a backward (README §3.3, §8.5)"
OTHER_DEVICE = "measured on another device than --device"

RULES = (
    "GEMM backward spans (dgrad + wgrad, + the bias grad for linear1) are split into a dgrad and a wgrad row "
    "in proportion to their llmp rooflines on the device (README §3.1; note composite:...)",
    "a row key (op and shape columns) measured twice is a duplicate; rows of other shapes that run the same "
    "llmp kernel stay separate measurements of it",
    "flash_atten duplicated keys: the faster copy is kept (README §8.3: the second copy is slower in 83 of 85, "
    "a resumed sweep part); F and B independently, as the source sorts them independently (README §2.2)",
    "each timed span is judged on its own by physics (llmp.residuals.importers.physics): dropped when faster "
    "than the device's peak FLOP/s or than its bytes beyond L2 at peak bandwidth (README §8.4, line 587's "
    "flash-attn backward), and a backward when it runs through its roofline work at more than 3x its "
    "forward's rate; the other pass of the row is kept",
    "values off the 0.2 us grid averaged fewer samples (README §2.2, §8.4): kept, noted fewer_samples",
    "res_add backward dropped (a copy of the forward, README §8.5); optimizer files and summaries skipped",
    "NCCL: combined files skipped (README §5.3); rows above the line rate of their fastest link are dropped "
    "(physics); slow rows are kept: a slow mode (README §8.2) and a slow network (README §8.1, the catalog node "
    "perlmutter_seed) are what ran",
    "NCCL bytes as llmp's Collective counts them: all-reduce buffer and p2p message = 2*shape, all-gather "
    "output = 2*shape*ranks (the seed's shape is the per-rank input, README §5.2)",
)


def vocab(mp: int) -> int:
    """V(mp) = ceil(50257 / (128 mp)) * 128, the per-GPU padded GPT-2 vocabulary (README §2.4)."""
    return math.ceil(50257 / (128 * mp)) * 128


def accept(path: Path) -> bool:
    name = path.name
    if _NCCL.match(name):
        return True
    m = _OPERATOR.match(name)
    if m:
        return m["op"] in OPERATORS or m["op"] in SKIP_FILES
    m = _SUMMARY.match(name)
    return m is not None and names.from_cuda(m["gpu"]) is not None


def _prefix(path: Path) -> str:
    """The GPU prefix of a file accept() took (README §1)."""
    match = _NCCL.match(path.name) or _OPERATOR.match(path.name) or _SUMMARY.match(path.name)
    assert match is not None, "given the files accept() took"
    return match["gpu"]


@dataclass(frozen=True, slots=True)
class _Span:
    """One timed span of a source row: the column it is in, the kernels that ran in it (with their
    GEMM roles), and the note it carries when it covers several kernels."""

    column: str
    kernels: tuple[tuple[Kernel, str], ...]
    composite: str = ""
    width: int = 0


def _gemm_spans(m: int, n: int, k: int, batch: int, dt: Dtype, bias_grad: bool = False) -> list[_Span]:
    """Forward GEMM Y[m,n] = X[m,k] W[k,n] and its backward span: dgrad (m, k, n) and wgrad (k, n, m),
    as ``analytic.block.Block.gemm`` builds them."""
    fwd = Kernel.make(Family.GEMM, dt, Pass.FWD, m=m, n=n, k=k, batch=batch)
    dgrad = Kernel.make(Family.GEMM, dt, Pass.BWD, m=m, n=k, k=n, batch=batch)
    wgrad = Kernel.make(Family.GEMM, dt, Pass.BWD, m=k, n=n, k=m, batch=batch)
    return [_Span("F_dur(us)", ((fwd, "fwd"),)),
            _Span("B_dur(us)", ((dgrad, "dgrad"), (wgrad, "wgrad")),
                  "composite:dgrad+wgrad+bias" if bias_grad else "composite:dgrad+wgrad")]


def _both(make: Callable[[Pass], Kernel], width: int = 0) -> list[_Span]:
    """A kernel whose forward is F_dur and whose backward (same dims) is B_dur."""
    return [_Span("F_dur(us)", ((make(Pass.FWD), ""),), width=width),
            _Span("B_dur(us)", ((make(Pass.BWD), ""),), width=width)]


def _heads(d: dict[str, int], where: str) -> tuple[int, int]:
    """Heads per GPU h/mp and head dim dim/h (README §3: hp, hd)."""
    hp = tables.exact_div(d["h"], d["mp"], where, "heads per GPU h/mp")
    return hp, tables.exact_div(d["dim"], d["h"], where, "head dim dim/h")


def _linear(n: tuple[int, bool] | None, k: tuple[int, bool], *, bias: bool = False):
    """A Megatron TP-shard linear: X [l, b, K] through nn.Linear(K, N) (README §3.1), forward GEMM
    (b*l, N, K); ``n``/``k`` are (multiple of dim, divided by mp), ``n=None`` is the vocab V(mp).
    The backward node (MmBackward0; AddmmBackward0 for linear1) runs dgrad and wgrad (+ the bias
    reduction for linear1) in one span."""
    def width(spec: tuple[int, bool], d: dict[str, int], where: str) -> int:
        mult, by_mp = spec
        return tables.exact_div(mult * d["dim"], d["mp"], where, "TP-shard width") if by_mp else mult * d["dim"]

    def spans(d: dict[str, int], dt: Dtype, where: str) -> list[_Span]:
        out = vocab(d["mp"]) if n is None else width(n, d, where)
        return _gemm_spans(d["b"] * d["l"], out, width(k, d, where), 1, dt, bias_grad=bias)
    return spans


def _baddbmm(d, dt, where):
    # README §3.2: baddbmm(C, Q, K^T, beta=0): scores S = Q K^T, batch b*hp, forward (l, hd, l) in
    # (M, K, N) order, i.e. m = l, n = l, k = hd; backward dQ = dS K and dK = Q^T dS in one span.
    hp, hd = _heads(d, where)
    return _gemm_spans(d["l"], d["l"], hd, d["b"] * hp, dt)


def _bmm(d, dt, where):
    # README §3.2: bmm(P, V): batch b*hp, forward (l, l, hd) in (M, K, N) order: m = l, n = hd, k = l;
    # backward dP = dO V^T and dV = P^T dO in one span.
    hp, hd = _heads(d, where)
    return _gemm_spans(d["l"], hd, d["l"], d["b"] * hp, dt)


def _softmax(kind: SoftmaxKind):
    # README §3.2: softmax over the last dim of [b, hp, l, l] scores: rows b*hp*l, cols l.
    # ScaledUpperTriangMaskedSoftmax is Megatron's fused scale+causal-mask+softmax (SoftmaxKind.CAUSAL_FUSED);
    # its file has no dim column, so the heads come from h/mp alone.
    def spans(d, dt, where):
        hp = tables.exact_div(d["h"], d["mp"], where, "heads per GPU h/mp")
        rows = d["b"] * hp * d["l"]
        return _both(lambda p: Kernel.make(Family.SOFTMAX, dt, p, kind.value, rows=rows, cols=d["l"]))
    return spans


def _fillmask(d, dt, where):
    # README §3.2: in-place masked_fill_ of the [b, hp, l, l] scores (Elementwise.MASKED_FILL); its
    # backward is the CopySlices/AsStridedBackward of the in-place op on a view.
    hp, _ = _heads(d, where)
    n = d["b"] * hp * d["l"] * d["l"]
    return _both(lambda p: Kernel.make(Family.ELEMENTWISE, dt, p, Elementwise.MASKED_FILL.value, elements=n),
                 width=d["l"])


def _flash(d, dt, where):
    # README §3.2: flash_attn_func(Q, K, V) on [b, l, hp, hd] with the library default causal=False
    # (README §8.9), so ATTENTION flash=1 causal=0; backward FlashAttnFuncBackward.
    hp, hd = _heads(d, where)
    return _both(lambda p: Kernel.make(Family.ATTENTION, dt, p, batch=d["b"], heads=hp, kv_heads=hp, seq_q=d["l"],
                                       seq_kv=d["l"], head_dim=hd, head_dim_v=hd, window=d["l"], causal=0,
                                       flash=1))


def _rope(d, dt, where):
    # README §3.3: GPT-NeoX apply_rotary_pos_emb on q and k, each [l, b, hp, hd], in eager ops
    # (Elementwise.ROTARY_UNFUSED): elements = 2 * b * l * hp * hd.
    hp, hd = _heads(d, where)
    n = 2 * d["b"] * d["l"] * hp * hd
    return _both(lambda p: Kernel.make(Family.ELEMENTWISE, dt, p, Elementwise.ROTARY_UNFUSED.value, elements=n),
                 width=hd)


def _gelu(d, dt, where):
    # README §3.3: F.gelu on the MLP activation [l, b, 4*dim/mp].
    width = tables.exact_div(4 * d["dim"], d["mp"], where, "MLP width 4*dim/mp")
    n = d["b"] * d["l"] * width
    return _both(lambda p: Kernel.make(Family.ELEMENTWISE, dt, p, Elementwise.GELU.value, elements=n), width=width)


def _res_add(d, dt, where):
    # README §3.3: a + b on [l, b, dim]; no backward is run (B_dur is a copy of F_dur, README §8.5).
    n = d["b"] * d["l"] * d["dim"]
    return [_Span("F_dur(us)", ((Kernel.make(Family.ELEMENTWISE, dt, Pass.FWD, Elementwise.ADD.value, elements=n),
                                 ""),), width=d["dim"])]


def _norm(fusion: Fusion, rms: int):
    # README §3.3: layernorm = nn.LayerNorm (native_layer_norm: one fused kernel each way);
    # RMSlayernorm = GPT-NeoX's eager RMSNorm (x.norm, scale, div, fp32 scale mul, cast: Fusion.UNFUSED).
    def spans(d, dt, where):
        return _both(lambda p: Kernel.make(Family.NORM, dt, p, fusion.value, tokens=d["b"] * d["l"], hidden=d["dim"],
                                           rms=rms))
    return spans


def _embedding(d, dt, where):
    # README §3.3: nn.Embedding(V(mp), dim) gather forward; dense weight-gradient backward.
    return _both(lambda p: Kernel.make(Family.EMBEDDING, dt, p, tokens=d["b"] * d["l"], hidden=d["dim"],
                                       vocab=vocab(d["mp"])))


def _cross_entropy(d, dt, where):
    # README §3.3: Megatron's eager vocab-parallel cross-entropy on [b, l, V(mp)] (Fusion.UNFUSED), one
    # shard's local compute (the TP all-reduces are commented out).
    return _both(lambda p: Kernel.make(Family.CROSS_ENTROPY, dt, p, Fusion.UNFUSED.value, tokens=d["b"] * d["l"],
                                       vocab=vocab(d["mp"])))


OPERATORS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, int], Dtype, str], list[_Span]]]] = {
    # README §3.1 (the GEMM widths of the Megatron TP shards; (N, K) of the forward GEMM)
    "linear1": (("mp", "b", "l", "dim"), _linear((3, True), (1, False), bias=True)),  # QKV (b*l, dim, 3*dim/mp)
    "linear2": (("mp", "b", "l", "dim"), _linear((1, False), (1, True))),  # attention out (b*l, dim/mp, dim)
    "linear3": (("mp", "b", "l", "dim"), _linear((4, True), (1, False))),  # MLP up (b*l, dim, 4*dim/mp)
    "linear4": (("mp", "b", "l", "dim"), _linear((1, False), (4, True))),  # MLP down (b*l, 4*dim/mp, dim)
    "linear_final": (("mp", "b", "l", "dim"), _linear(None, (1, False))),  # LM head (b*l, dim, V(mp))
    # README §3.2
    "baddbmm": (("mp", "b", "h", "l", "dim"), _baddbmm),
    "bmm": (("mp", "b", "h", "l", "dim"), _bmm),
    "softmax": (("mp", "b", "h", "l"), _softmax(SoftmaxKind.PLAIN)),
    "ScaledUpperTriangMaskedSoftmax": (("mp", "b", "h", "l"), _softmax(SoftmaxKind.CAUSAL_FUSED)),
    "fillmask": (("mp", "b", "h", "l", "dim"), _fillmask),
    "flash_atten": (("mp", "b", "h", "l", "dim"), _flash),
    # README §3.3
    "RoPE": (("mp", "b", "h", "l", "dim"), _rope),
    "gelu": (("mp", "b", "l", "dim"), _gelu),
    "res_add": (("b", "l", "dim"), _res_add),
    "layernorm": (("b", "l", "dim"), _norm(Fusion.FUSED, 0)),
    "RMSlayernorm": (("b", "l", "dim"), _norm(Fusion.UNFUSED, 1)),
    "embedding": (("mp", "b", "l", "dim"), _embedding),
    "parallel_cross_entropy_128": (("mp", "b", "l"), _cross_entropy),
}
"""Operator file -> (its shape columns, the spans its row holds). ``mp`` is 1 where a file has no
such column (layernorm, RMSlayernorm, res_add: README §3.4)."""


def _ref(folder: str, name: str, line: int | None = None) -> str:
    path = f"{REPO}@{COMMIT[:10]}:src/estimate_train_time/data/regressors/{folder}/{name}"
    return path if line is None else f"{path}:{line}"


def _off_grid(us: float) -> bool:
    """A trimmed mean of five integer-us samples is a multiple of 0.2 us (README §2.2)."""
    return abs(us * 5 - round(us * 5)) > 1e-6


class _Reader:
    def __init__(self, device: Device, node: Node | None) -> None:
        self.device, self.node = device, node
        self.inputs: list[Input] = []
        self.samples: list[Sample] = []
        self.names: set[str] = set()
        self.taken: set[str] = set()
        """Prefixes the registry of GPU names does not list, read as the named ``--gpu``."""

    def read(self, path: Path) -> None:
        name = path.name
        nccl, op = _NCCL.match(name), _OPERATOR.match(name)
        gpu = _prefix(path)
        known = names.from_cuda(gpu)
        cluster = CLUSTERS.get(self.device.id, (gpu, ""))[0] if known == self.device.id else gpu
        folder = f"{cluster}/{'nccl' if nccl else 'operator'}"
        inp = Input(name=name, source_ref=_ref(folder, name), licence=LICENCE)
        self.inputs.append(inp)
        if op is None and nccl is None:
            self._skip_file(path, inp, SUMMARY_REASON)
            return
        if known is not None and known != self.device.id:
            self._skip_file(path, inp, OTHER_DEVICE)
            return
        if known is None:
            self.taken.add(gpu)
        if nccl is not None:
            self.names.add(gpu)
            self._nccl(path, inp, folder, nccl)
        elif op is not None and op["op"] in SKIP_FILES:
            self._skip_file(path, inp, SKIP_FILES[op["op"]])
        elif op is not None:
            self.names.add(gpu)
            self._operator(path, inp, folder, op["op"], DTYPES[op["prec"]])

    @staticmethod
    def _skip_file(path: Path, inp: Input, reason: str) -> None:
        """Count a whole file as skipped: its records, and its time cells (``dur``) as values."""
        table = tables.read_table(path, (), "seed")
        per_row = max(1, sum("dur" in c for c in table.columns))
        inp.rows_read, inp.values_read = len(table.rows), per_row * len(table.rows)
        inp.skip(reason, inp.values_read)

    def _plausible(self, spans: list[_Span], times: dict[str, float], inp: Input) -> list[_Span]:
        """The spans physics allows (``physics``), each judged on its own."""
        kept = []
        for span in spans:
            if physics.faster_than_peak([k for k, _ in span.kernels], times[span.column] * US, self.device):
                inp.skip(physics.PEAK_REASON)
            else:
                kept.append(span)
        fwd = next((sp for sp in kept if sp.column == "F_dur(us)"), None)
        bwd = next((sp for sp in kept if sp.column == "B_dur(us)"), None)
        if fwd is not None and bwd is not None and physics.backward_too_fast(
                [k for k, _ in fwd.kernels], times[fwd.column] * US, [k for k, _ in bwd.kernels],
                times[bwd.column] * US, self.device):
            inp.skip(physics.BACKWARD_REASON)
            kept.remove(bwd)
        return kept

    def _operator(self, path: Path, inp: Input, folder: str, op: str, dt: Dtype) -> None:
        shape, spans_of = OPERATORS[op]
        table = tables.read_table(path, (*shape, "F_dur(us)", "B_dur(us)"), "seed")
        inp.rows_read, inp.values_read = len(table.rows), 2 * len(table.rows)
        for line, row in table.rows:
            where = f"{path.name}:{line}"
            d = {c: tables.integer(row, c, where) for c in shape}
            d.setdefault("mp", 1)
            if any(v == 0 for v in d.values()):
                raise InputError(f"{where}: a shape column is zero: {d}")
            times = {c: tables.seconds(row, c, where, 1.0) for c in ("F_dur(us)", "B_dur(us)")}
            # The row's own shape is part of the key: configurations that run the same llmp kernel
            # (e.g. b=8, mp=2 and b=4, mp=1 of a batched GEMM) are separate measurements of it, while
            # a key measured twice (flash_atten, README §8.3) is a duplicate.
            tag = f"seed:{op}:" + ",".join(f"{c}={d[c]}" for c in shape)
            if op == "res_add":
                inp.skip(RES_ADD_BWD_REASON)
            for span in self._plausible(spans_of(d, dt, where), times, inp):
                us = times[span.column]
                notes = ["profiler_span"]
                if _off_grid(us):
                    notes.append("fewer_samples")
                if span.composite:
                    notes.append(span.composite)
                if op == "linear1" and span.column == "F_dur(us)":
                    notes.append("bias")
                kernels_ = [k for k, _ in span.kernels]
                shares = common.split_span(kernels_, us * US, self.device) if len(kernels_) > 1 else [us * US]
                for (kernel, role), t in zip(span.kernels, shares):
                    self.samples.append(Sample(
                        item=kernel, seconds=t, tag=tag, source_ref=_ref(folder, path.name, line),
                        input=len(self.inputs) - 1, notes=tuple(sorted(notes)), role=role, width=span.width,
                        repeats=None if "fewer_samples" in notes else 5, span_s=us * US))

    def _nccl(self, path: Path, inp: Input, folder: str, m: re.Match) -> None:
        table = tables.read_table(path, ("shape", "nodes", "GPUsPerNode", "dur(us)"), "seed")
        inp.rows_read = inp.values_read = len(table.rows)
        if m["n"] is None:
            inp.skip(COMBINED_REASON, len(table.rows))
            return
        if self.node is None:
            raise InputError(f"{path.name}: NCCL rows need the catalog node they ran on, and no node of "
                             f"'{self.device.id}' is the seed's default",
                             hint="name it with --node ID (catalog nodes holding this GPU: "
                                  + ", ".join(n.id for n in resolved.nodes_with(self.device.id)) + ")")
        op = m["op"]
        kind = {"allreduce": CollectiveKind.ALL_REDUCE, "allreduce_large": CollectiveKind.ALL_REDUCE,
                "allgather_large": CollectiveKind.ALL_GATHER, "p2p": CollectiveKind.SEND_RECV}[op]
        n_file, m_file = int(m["n"]), int(m["m"])
        ranks = n_file * m_file
        if kind is CollectiveKind.SEND_RECV:
            # README §5.1: blocking send from global rank 0 to rank WORLD_SIZE-1: a pair.
            group, per_node = 2, min(m_file, 2)
        else:
            group, per_node = ranks, m_file
        tier = Tier.INTRA if n_file == 1 else Tier.INTER
        for line, row in table.rows:
            where = f"{path.name}:{line}"
            shape = tables.integer(row, "shape", where)
            nodes, gpus = tables.integer(row, "nodes", where), tables.integer(row, "GPUsPerNode", where)
            if (nodes, gpus) != (n_file, m_file):
                raise InputError(f"{where}: nodes={nodes}, GPUsPerNode={gpus} contradict the file name "
                                 f"(_{n_file}_{m_file} = nodes_GPUsPerNode, README §5.2)")
            if shape == 0 or nodes == 0 or gpus == 0:
                raise InputError(f"{where}: shape, nodes and GPUsPerNode must be positive")
            t = tables.seconds(row, "dur(us)", where, US)
            # README §5.1-5.2: fp16 1-D tensors of `shape` elements; the all-gather's shape is each
            # rank's input, llmp's Collective counts the gathered output (Collective docstring).
            nbytes = 2 * shape * (group if kind is CollectiveKind.ALL_GATHER else 1)
            item = Collective(kind=kind, bytes=nbytes, group=group, ranks_per_node=per_node, tier=tier)
            if physics.faster_than_link(item, t, self.node):
                inp.skip(physics.LINK_REASON)
                continue
            self.samples.append(Sample(item=item, seconds=t, tag=f"seed:{op}_{n_file}_{m_file}",
                                       source_ref=_ref(folder, path.name, line), input=len(self.inputs) - 1,
                                       notes=("profiler_span",), repeats=5, dtype="fp16", span_s=t))


def _device_of(files: list[Path], device_id: str | None) -> str:
    """The catalog GPU to import for: ``--gpu`` (an id or alias), else the one GPU the files'
    prefixes name through the registry of GPU names."""
    if device_id is not None:
        return names.gpu_id(device_id)
    found: dict[str, str | None] = {p: names.from_cuda(p) for p in sorted({_prefix(f) for f in files})}
    unknown = [p for p, ident in found.items() if ident is None]
    if unknown:
        raise InputError(f"the file prefix '{unknown[0]}' names no GPU the catalog knows",
                         hint="name the GPU the files were measured on with --gpu ID (a catalog id or alias)")
    ids = sorted({ident for ident in found.values() if ident is not None})
    if not ids:
        raise InputError("no seed files under the given paths",
                         hint="seed files are named <GPU>_<op>_<fp16|bf16|fp32>.csv and "
                              "<GPU>_<collective>_<precision>_<nodes>_<GPUs per node>.csv (seed README §1)")
    if len(ids) > 1:
        raise InputError(f"the files were measured on several GPUs ({', '.join(ids)})",
                         hint="import one GPU at a time with --gpu ID")
    return ids[0]


def collect(files: list[Path], *, device_id: str | None, node_id: str | None) -> Collected:
    """Read the seed files of one GPU (``device_id``, else the one their prefixes name), its NCCL
    rows on ``node_id`` (default: the seed's cluster node, :data:`CLUSTERS`)."""
    device = common.catalog_device(_device_of(files, device_id))
    assert device is not None, "names.gpu_id and names.from_cuda give catalog GPUs"
    node_id = node_id if node_id is not None else CLUSTERS.get(device.id, ("", None))[1]
    if node_id is not None:
        common.check_node(node_id, device.id)
    reader = _Reader(device, resolved.node(node_id) if node_id is not None else None)
    for path in files:
        reader.read(path)
    cluster = CLUSTERS.get(device.id, ("an unnamed cluster", ""))[0]
    assumptions = [f"the files' GPU is the catalog's {device.id}"
                   + (", read from the prefixes of its files through llmp.hardware.names" if not reader.taken
                      else f"; the prefixes {', '.join(sorted(reader.taken))} were taken to be it (--gpu)"),
                   "software versions unknown (README §2.5, §9)"]
    if any(not s.is_kernel for s in reader.samples):
        assumptions.insert(1, f"its NCCL ran on catalog node {node_id} ({cluster})")
    meta = {
        "source": f"seed-estimate-train-time (Zhang et al., arXiv 2509.22832): {cluster} operator and NCCL timings",
        "repo": f"{REPO}@{COMMIT}", "licence": LICENCE,
        "device_name": ", ".join(sorted(reader.names)) or None,
        "timing": "profiler GPU span",
        "timing_detail": ("operators: PyTorch profiler GPU span from the first to the last kernel of the op's "
                          "forward (F_dur) or its own autograd backward node (B_dur), trimmed mean of sorted "
                          "samples 2-6 of 10 (README §2.2); NCCL: the same span of the collective's kernels on "
                          "global rank 0 per call (README §5.1)"),
        "assumptions": assumptions,
    }
    return Collected(fmt="seed", device_id=device.id, node_id=node_id, meta=meta,
                     samples=tuple(reader.samples), inputs=tuple(reader.inputs), rules=RULES)
