"""The shared data's normalised ``kernels.csv`` (cuDNN, SimuMax, XLA, aiter, DeepGEMM, LLMCompass,
Echo, vTrain) as llmp samples.

``shared/data/kernels/README.md`` ("README") and each ``kernels/<source>/README.md`` describe the
columns, the GPUs, how every time was measured and the faults. Rows are selected by the data's
``gpu_id`` (the README's table maps each to a catalog id; ``--gpu-id`` picks another) and become:

* ``gemm`` -> GEMM ``(m, n, k, batch)``, ``pass`` fwd -> forward, dgrad/wgrad -> backward (the role in the
  ``variant`` column, as ``llmp sample`` writes it); ``grouped_gemm`` with equal ``m`` per group (true of
  every source here, README "kernels.csv columns") -> GEMM with ``batch = batch * groups`` (the same FLOPs
  and bytes as ``analytic.kernels``' GEMM, noted ``grouped:groups=G``);
* ``attention`` -> ATTENTION, ``flash=1`` for the fused backends (cuDNN, flash-attn, TE) and ``flash=0`` for
  ``torch_math`` (unfused PyTorch); ``head_dim = head_dim_qk``, ``head_dim_v`` as given (MLA rows: 192 and
  128); ``window`` = the sliding window's keys (the data's tokens left of the diagonal, taken as the
  span: one key apart), or ``seq_kv`` for full attention;
* ``norm`` -> NORM ``Fusion.FUSED`` (``rms`` from ``notes: norm=``);
* ``collective`` -> ``Collective`` all-reduce, ``bytes`` = nccl-tests ``size`` (the buffer per rank, as
  llmp counts it), ``group`` = ranks, ``ranks_per_node`` = ranks / nodes.

Dtypes: bf16, fp16, tf32 as they are; fp8_e4m3 and the mixed pairs fp8_e4m3xe5m2 / fp8_e5m2xe4m3 ->
llmp ``fp8`` (FP8 training's E5M2 gradient GEMMs are exactly those pairs; the pair is noted); mxfp8
has no llmp dtype and is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from llmp.analytic.kernels import AttentionKernel, Collective, CollectiveKind, Family, Fusion, Kernel, Pass, Tier
from llmp.errors import InputError
from llmp.hardware import names
from llmp.hardware.spec import Dtype
from llmp.residuals.importers import common, tables
from llmp.residuals.importers.common import Collected, Input, Sample

FILE = "kernels.csv"
COLUMNS = ("source", "source_ref", "gpu", "gpu_id", "dtype", "op", "pass", "layout", "batch", "m", "n", "k", "groups",
           "seq_q", "seq_kv", "heads_q", "heads_kv", "head_dim_qk", "head_dim_v", "causal", "window", "norm_rows",
           "norm_cols", "collective", "bytes", "ranks", "nodes", "time_s", "time_derived", "backend", "notes")

GPU_IDS = names.KERNELS
"""The data's ``gpu_id`` -> the catalog id its rows are imported for by default (the registry of GPU
names, after the data's README, "gpu_id values and the catalog")."""

NODES = {"a100_sxm4_40gb": "dgx_a100_40gb", "a100_sxm4_80gb": "dgx_a100"}
"""Catalog node of the collective rows per device. Echo ran on Azure NDv4 (8 A100-SXM4-40GB on NVSwitch,
one 200 Gb/s HDR InfiniBand NIC per GPU: echo_nccl/README.md), the topology of a DGX A100 40GB; vTrain
on one 8-GPU A100 NVSwitch node (vtrain/README.md)."""


@dataclass(frozen=True, slots=True)
class Source:
    repo: str
    licence: str
    timing: str
    setup: tuple[str, ...] = ()
    """``notes`` keys that make a different kernel setup (kept as separate rows)."""
    versions: tuple[str, ...] = ()
    """``notes`` keys naming software versions: among re-measurements of one setup the newest is kept."""
    tags: tuple[str, ...] = ()
    """Note tags every row of the source carries (how its times were taken)."""


SOURCES: dict[str, Source] = {
    "cudnn_frontend": Source(
        "NVIDIA/cudnn-frontend@3929da2ef4c1dba1bb8acb68727b9134f26f40c0 and 7 earlier commits (per row)", "MIT",
        "CUPTI median (results/, 2025-12 artifacts) or CUDA events median (earlier artifacts)",
        setup=("has_bias",), versions=("cudnn", "fe", "torch", "flash_attn")),
    "simumax": Source("MooreThreads/SimuMax@4dcaae513ba7679d56c116a17cd4a691ec41e252", "Apache-2.0",
                      "derived from stored efficiencies; GEMMs wall clock, SDPA profiler span",
                      setup=("out_dtype", "main_grad_dtype", "qkv_contiguous")),
    "xla_gemm_tables": Source(
        "tensorflow/tensorflow@372d578bb861cc5804e56d37d93aec931a59762c, "
        "openxla/xla@336bb15c32a11820a81b226ae502d9ebbfab4412, ROCm/xla@106eb9b5957e231e49378c7d6c3b06005109709e, "
        "ROCm/xla@dc660322168302831d1cbc4c99683cd79671286e",
        "Apache-2.0", "derived from FLOP/s; CUPTI/rocprofiler median single kernel", setup=("xla_dtype",),
        tags=("median_kernel",)),
    "aiter": Source("ROCm/aiter@e4048607a535ace3a2b51ded31b1c8c2d45c0879", "MIT",
                    "profiler device time per call of the best tuned kernel", setup=("class", "out", "bias"),
                    tags=("tuned",)),
    "deepgemm": Source("deepseek-ai/DeepGEMM@55ab91f72f76e8a6db0e86282c3169a88d93df1b", "MIT",
                       "derived from rounded TFLOPS (Kineto kernel time)", setup=("table",)),
    "llmcompass": Source("PrincetonUniversity/LLMCompass@b95c6c95a80071414d31da8ba8d2e62334753f3d", "BSD-3-Clause",
                         "wall clock median", tags=("wall_clock",)),
    "echo_nccl": Source("NetX-lab/Echo@15f0d12c417459d7a1b3b66abeaa28eca0b841a2", "MIT",
                        "nccl-tests: mean over iters, out-of-place"),
    "vtrain": Source("VIA-Research/vTrain@f8dda8473a48b373b1d25f51f52d685bff5150c5", "MIT",
                     "nccl-tests-style LUT, out-of-place time"),
}

DTYPES = {"bf16": Dtype.BF16, "fp16": Dtype.FP16, "tf32": Dtype.TF32, "fp32": Dtype.FP32, "fp8_e4m3": Dtype.FP8,
          "fp8_e4m3xe5m2": Dtype.FP8, "fp8_e5m2xe4m3": Dtype.FP8}

OTHER_GPU = "rows of other GPUs (gpu_id not selected)"
SUPERSEDED = "superseded XLA H100 table (2025-08; the same grid re-measured 2025-10 is kept; xla README)"
DETERMINISTIC = "deterministic backward (training runs the non-deterministic default; cuDNN README)"
NON_CAUSAL_WINDOW = "sliding window on non-causal attention (llmp's window is the causal band)"
SINGLE_RANK = "1-rank all-reduce is a local copy, no communication (echo_nccl README)"
NO_NODE = "collective rows without a catalog node for the device (pass --node-id)"

RULES = (
    "rows selected by gpu_id (README table -> catalog id; --gpu-id overrides); grouped_gemm -> GEMM with "
    "batch = batch * groups (equal m per group)",
    "fp8_e4m3 and the mixed e4m3/e5m2 pairs -> fp8 (pair noted); mxfp8 skipped",
    "duplicates: the same kernel, source, backend and setup re-measured under other software or in another "
    "file -> the newest software (cuDNN backend, frontend, torch, flash-attn versions) is kept, ties -> the "
    "faster; the superseded XLA H100 grid and deterministic backward rows are skipped",
    "attention: cuDNN / flash-attn / TE -> flash=1 (kernel variant cudnn for the cuDNN backends and TE on "
    "Hopper/Blackwell, FlashAttention-2 for flash-attn 2.x and TE on Ampere), torch_math -> flash=0; "
    "head_dim_qk -> head_dim, head_dim_v kept, window -> the causal band's width (seq_kv when blank); "
    "non-causal windowed rows skipped",
    "SimuMax GEMM b folds into the rows (TN/NN) or the contraction (NT), as its generator does",
    "derived and wall-clock times are kept and noted (derived_time, wall_clock, cuda_events, median_kernel)",
    "collectives: Echo and vTrain all-reduce, bytes = nccl-tests size; 1-rank rows skipped; node dgx_a100_40gb "
    "(Azure NDv4 has its topology) unless --node-id",
)


def accept(path: Path) -> bool:
    return path.name == FILE


def _notes(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(";"):
        part = part.strip()
        if part:
            key, _, value = part.partition("=")
            out[key.strip()] = value.strip()
    return out


def _version(text: str) -> tuple[int, ...]:
    """``9.22.0`` -> (9, 22, 0); ``2.10.0a0.nv25.11`` -> (2, 10, 0, 0, 25, 11); empty -> ()."""
    return tuple(int(x) for x in re.findall(r"\d+", text))


def _int(row: dict[str, str], column: str, where: str, default: int | None = None) -> int:
    if row[column] == "":
        if default is None:
            raise InputError(f"{where}: column '{column}' is empty")
        return default
    value = tables.integer(row, column, where)
    if value == 0:
        raise InputError(f"{where}: column '{column}' is zero")
    return value


def _bool(row: dict[str, str], column: str, where: str) -> int:
    value = row[column].lower()
    if value not in ("true", "false"):
        raise InputError(f"{where}: column '{column}' must be true or false, got {row[column]!r}")
    return int(value == "true")


class _Reader:
    def __init__(self, device_id: str, gpu_ids: set[str], node_id: str | None) -> None:
        self.device_id, self.gpu_ids, self.node_id = device_id, gpu_ids, node_id
        self.inputs: dict[str, Input] = {}
        self.index: dict[str, int] = {}
        self.samples: list[Sample] = []
        self.names: set[str] = set()
        self.nodes: set[str] = set()
        self.sources: set[str] = set()

    def _input(self, source: str) -> tuple[Input, int]:
        if source not in self.inputs:
            src = SOURCES.get(source)
            self.inputs[source] = Input(name=f"{FILE}#{source}",
                                        source_ref=f"{src.repo if src else source} (via shared data kernels/{FILE})",
                                        licence=src.licence if src else "unknown")
            self.index[source] = len(self.index)
        return self.inputs[source], self.index[source]

    def read(self, path: Path) -> None:
        table = tables.read_table(path, COLUMNS, "kernels")
        for line, row in table.rows:
            where = f"{path.name}:{line}"
            inp, idx = self._input(row["source"])
            inp.rows_read += 1
            inp.values_read += 1
            seconds = tables.seconds(row, "time_s", where, 1.0)
            if row["gpu_id"] not in self.gpu_ids:
                inp.skip(OTHER_GPU)
                continue
            src = SOURCES.get(row["source"])
            if src is None:
                inp.skip(f"unknown source {row['source']!r}")
                continue
            reason = self._row(row, src, seconds, idx, where)
            if reason:
                inp.skip(reason)
            else:
                self.names.add(row["gpu"])
                self.sources.add(row["source"])

    def _row(self, row: dict[str, str], src: Source, seconds: float, idx: int, where: str) -> str:
        """Append the row's sample; return a skip reason instead when it has no llmp kernel."""
        notes = _notes(row["notes"])
        op, backend = row["op"], row["backend"]
        tags = _timing_tags(row, src, notes)
        setup = [f"{k}={notes[k]}" for k in src.setup if k in notes]
        if op == "collective":
            return self._collective(row, seconds, idx, where, tags)
        if op not in ("gemm", "grouped_gemm", "attention", "norm"):
            return f"op {op!r} has no llmp kernel mapping"
        if notes.get("superseded") == "true":
            return SUPERSEDED
        dtype = DTYPES.get(row["dtype"])
        if dtype is None:
            return f"dtype {row['dtype']} has no llmp dtype"
        if dtype is Dtype.FP8 and row["dtype"] != "fp8_e4m3":
            setup.append("fp8=" + row["dtype"].removeprefix("fp8_"))
        pass_name = row["pass"]
        if pass_name not in ("fwd", "bwd", "dgrad", "wgrad"):
            raise InputError(f"{where}: pass {pass_name!r} is not fwd, bwd, dgrad or wgrad")
        pass_ = Pass.FWD if pass_name == "fwd" else Pass.BWD
        role = ""
        if op in ("gemm", "grouped_gemm"):
            if pass_name == "bwd":
                return "GEMM backward without a dgrad/wgrad role"
            kernel = _gemm(row, op, dtype, pass_, where, setup)
            role = pass_name
        elif op == "attention":
            attention = _attention(row, notes, dtype, pass_, where, self.device_id)
            if isinstance(attention, str):
                return attention
            kernel = attention
            if row["source"] == "simumax":
                tags.add("profiler_span")  # simumax README: SDPA timed first-to-last kernel in a trace
        else:
            kernel = _norm(row, notes, dtype, pass_, where)
        if row["source"] == "simumax" and op in ("gemm", "grouped_gemm"):
            tags.add("wall_clock")  # simumax README: GEMMs timed with time.time() around 75 calls
        tag = ":".join(["kernels", row["source"], backend, *setup])
        newest = tuple(_version(notes.get(v, "")) for v in src.versions)
        self.samples.append(Sample(item=kernel, seconds=seconds, tag=tag, source_ref=row["source_ref"], input=idx,
                                   notes=tuple(sorted(tags | set(setup))), role=role, span_s=seconds,
                                   preference=newest))
        return ""

    def _collective(self, row: dict[str, str], seconds: float, idx: int, where: str, tags: set[str]) -> str:
        if row["collective"] != "all_reduce":
            return f"collective {row['collective']!r} has no mapping"
        ranks, nodes, nbytes = (_int(row, c, where) for c in ("ranks", "nodes", "bytes"))
        if ranks == 1:
            return SINGLE_RANK
        node = self.node_id or NODES.get(self.device_id)
        if node is None:
            return NO_NODE
        per_node = tables.exact_div(ranks, nodes, where, "ranks per node")
        item = Collective(kind=CollectiveKind.ALL_REDUCE, bytes=nbytes, group=ranks, ranks_per_node=per_node,
                          tier=Tier.INTRA if nodes == 1 else Tier.INTER)
        self.nodes.add(node)
        self.samples.append(Sample(item=item, seconds=seconds, tag=f"kernels:{row['source']}", input=idx,
                                   source_ref=row["source_ref"], notes=tuple(sorted(tags - {"backend=nccl"})),
                                   dtype=row["dtype"], backend=row["backend"], span_s=seconds))
        return ""


def _timing_tags(row: dict[str, str], src: Source, notes: dict[str, str]) -> set[str]:
    """The note tags that say how a row's time was taken: its backend, its source's tags, and
    whether the time was derived or taken with CUDA events or the wall clock."""
    tags = {f"backend={row['backend']}", *src.tags}
    if row["time_derived"].lower() == "true":
        tags.add("derived_time")
    timing = notes.get("timing", "")
    if timing.startswith("cuda_events"):
        tags.add("cuda_events")
    elif timing.startswith("wall_clock"):
        tags.add("wall_clock")
    return tags


def _gemm(row: dict[str, str], op: str, dtype: Dtype, pass_: Pass, where: str, setup: list[str]) -> Kernel:
    """The GEMM of a ``gemm`` or ``grouped_gemm`` row (a grouped GEMM's group count is added to ``setup``)."""
    m, n, k = (_int(row, c, where) for c in ("m", "n", "k"))
    batch = _int(row, "batch", where, 1)
    if row["source"] == "simumax" and batch > 1:
        # simumax README: b multiplies the rows for TN/NN and the contraction for NT.
        m, k = (m, k * batch) if row["layout"] == "NT" else (m * batch, k)
        batch = 1
    if op == "grouped_gemm":
        groups = _int(row, "groups", where, 1)
        batch *= groups
        setup.append(f"grouped:groups={groups}")
    return Kernel.make(Family.GEMM, dtype, pass_, m=m, n=n, k=k, batch=batch)


def _attention(row: dict[str, str], notes: dict[str, str], dtype: Dtype, pass_: Pass, where: str,
               device_id: str) -> Kernel | str:
    """The fused attention of an ``attention`` row, or the reason it is skipped."""
    causal = _bool(row, "causal", where)
    if row["window"] and not causal:
        return NON_CAUSAL_WINDOW
    if notes.get("deterministic_bwd") == "true":
        return DETERMINISTIC
    heads, kv = _int(row, "heads_q", where), _int(row, "heads_kv", where)
    if heads % kv:
        raise InputError(f"{where}: heads_q {heads} is not a multiple of heads_kv {kv}")
    seq_kv = _int(row, "seq_kv", where)
    window = min(_int(row, "window", where), seq_kv) if row["window"] else seq_kv
    return Kernel.make(Family.ATTENTION, dtype, pass_, batch=_int(row, "batch", where, 1), heads=heads,
                       kv_heads=kv, seq_q=_int(row, "seq_q", where), seq_kv=seq_kv,
                       head_dim=_int(row, "head_dim_qk", where), head_dim_v=_int(row, "head_dim_v", where),
                       window=window, causal=causal, flash=int(row["backend"] != "torch_math"),
                       variant=_attention_kernel(row["backend"], device_id))


def _norm(row: dict[str, str], notes: dict[str, str], dtype: Dtype, pass_: Pass, where: str) -> Kernel:
    """The fused norm of a ``norm`` row (RMSNorm or LayerNorm, named in its notes)."""
    norm = notes.get("norm")
    if norm not in ("rms_norm", "layer_norm"):
        raise InputError(f"{where}: norm rows need notes 'norm=rms_norm' or 'norm=layer_norm'")
    return Kernel.make(Family.NORM, dtype, pass_, Fusion.FUSED.value, tokens=_int(row, "norm_rows", where),
                       hidden=_int(row, "norm_cols", where), rms=int(norm == "rms_norm"))


_CUDNN_BACKENDS = frozenset({"cudnn", "cudnn_via_torch_sdpa"})
_AMPERE = frozenset({"a100_pcie_80gb", "a100_sxm4_40gb", "a100_sxm4_80gb", "a40"})


def _attention_kernel(backend: str, device_id: str) -> str:
    """The fused kernel a row ran (``kernels.AttentionKernel``): cuDNN for the cuDNN backends;
    TransformerEngine's attention, as SimuMax ran it, is cuDNN's FusedAttention on Hopper and
    Blackwell and FlashAttention-2 on Ampere, where TE prefers its flash-attn backend
    (NVIDIA/TransformerEngine@v1.11 transformer_engine/pytorch/attention.py, get_attention_backend:
    FusedAttention's arbitrary-seqlen kernels need sm90 for the shapes these rows have; an
    assumption, the rows do not say); flash-attn 2.x rows and torch_math (unfused) otherwise."""
    if backend in _CUDNN_BACKENDS or (backend == "te_attention" and device_id not in _AMPERE):
        return AttentionKernel.CUDNN.value
    return AttentionKernel.FLASH2.value


def collect(files: list[Path], *, device_id: str, gpu_id: str | None, node_id: str | None) -> Collected:
    """Read ``kernels.csv`` rows of ``gpu_id`` (default: the gpu_ids the README maps to ``device_id``)."""
    known = {v for v in GPU_IDS.values() if v is not None}
    common.check_device(device_id, known, "kernels")
    if node_id is not None:
        common.check_node(node_id, device_id)
    if gpu_id is not None:
        common.check_id(gpu_id, "gpu")
        selected = {gpu_id}
    else:
        selected = {g for g, dev in GPU_IDS.items() if dev == device_id}
    if not selected:
        raise InputError(f"no gpu_id of kernels.csv maps to '{device_id}' by default",
                         hint="name the data's gpu_id with --gpu-id (README table, e.g. --gpu-id v100_unstated)")
    reader = _Reader(device_id, selected, node_id)
    for path in files:
        reader.read(path)
    nodes = sorted(reader.nodes)
    assert len(nodes) <= 1, "one device maps to one node"
    inputs = [reader.inputs[s] for s in sorted(reader.index, key=lambda s: reader.index[s])]
    present = sorted(reader.sources)
    meta = {
        "source": "kernels.csv of the llmp shared data (kernels/README.md; built by kernels/extract/build_kernels.py)",
        "repo": {s: SOURCES[s].repo for s in present}, "licence": {s: SOURCES[s].licence for s in present},
        "timing": {s: SOURCES[s].timing for s in present},
        "device_name": ", ".join(sorted(reader.names)) or None,
        "gpu_id": sorted(selected),
        "assumptions": [f"gpu_id {g} -> {device_id}" + ("" if g == device_id else " (README gpu_id table)")
                        for g in sorted(selected)],
    }
    return Collected(fmt="kernels", device_id=device_id, node_id=nodes[0] if nodes else node_id, meta=meta,
                     samples=tuple(reader.samples), inputs=tuple(inputs), rules=RULES)
