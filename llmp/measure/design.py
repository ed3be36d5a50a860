"""The sampling design: which kernel shapes to time, drawn from realistic LLM ranges.

Shapes come from the layers of a transformer (hidden widths, head dims, GQA ratios, FFN
ratios, vocabularies, tokens per microbatch, tensor-parallel shards), never from a dense grid.
Each family's continuous coordinates are a scrambled Halton sequence (a low-discrepancy
sequence: *every prefix* is space-filling, so a run stopped by ``--minutes`` still covers the
space evenly) over log-dims, snapped to the multiples real models use. The design is a pure
function of (family, device kind, dtypes, seed): a rerun regenerates the same cases in the same
order, which is what makes resuming exact.

Plain numpy only (no scipy, no sympy): the sampler runs on bare GPU nodes. Names and values
are the strings of ``llmp.analytic.kernels`` (``Family``, ``Pass``, ``Elementwise``) and
``llmp.hardware.spec.Dtype``; the fit step turns them back into ``Kernel`` objects.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

FAMILIES: tuple[str, ...] = ("gemm", "attention", "norm", "elementwise", "softmax", "cross_entropy",
                             "embedding", "optimizer", "copy", "quantize")
"""Kernel families the sampler times (the values of ``kernels.Family``)."""

DIMS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch"),
    "attention": ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "head_dim", "head_dim_v", "window", "causal",
                  "flash"),
    "norm": ("tokens", "hidden", "rms"),
    "elementwise": ("elements",),
    "softmax": ("rows", "cols"),
    "cross_entropy": ("tokens", "vocab"),
    "embedding": ("tokens", "hidden", "vocab"),
    "optimizer": ("params",),
    "copy": ("elements",),
    "quantize": ("elements", "scales"),
}
"""Dims per family, in the order of ``kernels.DIMS`` (a test checks they agree)."""

DEFAULT_DTYPES: dict[str, tuple[str, ...]] = {"cpu": ("fp32",), "cuda": ("bf16", "fp16", "fp32", "tf32")}
"""Dtypes the specs use per device kind. CPU: fp32 only by default, because the catalog's ``cpu``
device has no bf16 peak (no native bf16 math without avx512_bf16), so bf16 CPU specs are refused
and bf16 CPU samples could not be priced; ``--dtypes fp32,bf16`` samples both anyway."""
DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One kernel to time: the fields of a ``kernels.Kernel`` as plain values, plus layout hints."""

    family: str
    pass_: str
    """``fwd`` or ``bwd``."""
    variant: str
    """Elementwise function or optimizer name; the GEMM role (``fwd``/``dgrad``/``wgrad``) for GEMMs."""
    dtype: str
    dims: tuple[tuple[str, int], ...]
    width: int = 0
    """Innermost width of the tensor the kernel sees (elementwise/copy rows, rotary head_dim)."""

    @property
    def key(self) -> str:
        """Stable, human-readable identity of the case: the resume key of its sample row."""
        dims = ",".join(f"{n}={v}" for n, v in self.dims)
        return f"{self.family}/{self.pass_}/{self.variant or '-'}/{self.dtype}/{dims}/w={self.width}"

    def dim(self, name: str) -> int:
        return dict(self.dims)[name]

    @property
    def stratum(self) -> tuple[str, str, str, str]:
        """(family, variant, pass, dtype): the operator and pass this case is a sample of, the unit
        ``llmp fit --budget K`` counts (``residuals.model.stratum_of`` of its kernel; a GEMM's role
        is no variant there: a dgrad and a wgrad are both backward GEMMs)."""
        return self.family, "" if self.family == "gemm" else self.variant, self.pass_, self.dtype


@dataclass(frozen=True, kw_only=True, slots=True)
class Ranges:
    """Realistic LLM ranges for one device kind, scaled so one timed call stays cheap."""

    hidden: tuple[int, int]
    hidden_multiple: int
    head_dims: tuple[int, ...]
    tokens: tuple[int, int]
    tokens_multiple: int
    tp: tuple[int, ...]
    vocab: tuple[int, int]
    seq: tuple[int, int]
    max_flops: float
    """Cap on the work of one call (FLOPs); larger draws shrink their token dim to fit."""
    max_bytes: float
    """Cap on the memory traffic of one call (bytes)."""
    max_params: int

    def scaled(self, factor: float) -> Ranges:
        """These ranges with every work cap multiplied by ``factor`` (``llmp sample --scale``: 0.01
        for a quick smoke run); at least 4096 parameters stay, so the optimizer still has work."""
        return dataclasses.replace(self, max_flops=self.max_flops * factor, max_bytes=self.max_bytes * factor,
                                   max_params=max(4096, int(self.max_params * factor)))


RANGES: dict[str, Ranges] = {
    # A 2-core CPU does ~50 GFLOP/s fp32 and a few GB/s: caps keep one call <= ~50 ms.
    "cpu": Ranges(hidden=(64, 1024), hidden_multiple=64, head_dims=(16, 32, 64, 128), tokens=(32, 4096),
                  tokens_multiple=32, tp=(1, 2, 4), vocab=(256, 32768), seq=(32, 1024),
                  max_flops=2.5e9, max_bytes=1.5e8, max_params=6_000_000),
    # Hidden 512-16384 in multiples of 128 (DESIGN.md), tokens per microbatch up to 16k.
    "cuda": Ranges(hidden=(512, 16384), hidden_multiple=128, head_dims=(64, 128), tokens=(256, 16384),
                   tokens_multiple=128, tp=(1, 2, 4, 8), vocab=(32000, 256000), seq=(256, 8192),
                   max_flops=4e13, max_bytes=8e9, max_params=2_000_000_000),
}

T = TypeVar("T")

_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def halton(n: int, d: int, seed: int, start: int = 0) -> np.ndarray:
    """Points ``start .. start+n-1`` of the ``d``-dim Halton sequence, Cranley-Patterson shifted
    by ``seed``.

    The random shift (mod 1) keeps the low discrepancy and gives independent designs per seed.
    """
    assert d <= len(_PRIMES)
    out = np.empty((n, d))
    for j in range(d):
        base = _PRIMES[j]
        idx = np.arange(start + 1, start + n + 1)
        value = np.zeros(n)
        frac = 1.0 / base
        while np.any(idx > 0):
            value += frac * (idx % base)
            idx //= base
            frac /= base
        out[:, j] = value
    shift = np.random.default_rng(seed).random(d)
    return (out + shift) % 1.0


def _log_pick(u: float, lo: int, hi: int, multiple: int) -> int:
    """Log-uniform value in [lo, hi], snapped to a multiple (as real model widths are)."""
    x = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    return max(multiple, round(x / multiple) * multiple)


def _choice(u: float, options: Sequence[T]) -> T:
    """The option a unit coordinate ``u`` falls on (equal shares of [0, 1))."""
    return options[min(int(u * len(options)), len(options) - 1)]


def _snap_down(x: float, multiple: int) -> int:
    return max(multiple, int(x // multiple) * multiple)


@dataclass(frozen=True, slots=True)
class _Layer:
    """The widths of one transformer layer shard, drawn once per design point."""

    hidden: int
    head_dim: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    tp: int
    tokens: int
    seq: int


def _layer(u: np.ndarray, r: Ranges) -> _Layer:
    """Map 6 unit coordinates to a consistent layer: GQA divides heads, tp divides widths."""
    hidden = _log_pick(u[0], *r.hidden, r.hidden_multiple)
    head_dim = int(_choice(u[1], tuple(h for h in r.head_dims if h <= hidden)))
    heads = max(1, hidden // head_dim)
    tp = int(_choice(u[2], tuple(t for t in r.tp if heads % t == 0) or (1,)))
    group = int(_choice(u[3], tuple(g for g in (1, 2, 4, 8) if heads % g == 0 and (heads // g) % tp == 0) or (1,)))
    ratio = float(_choice(u[4], (4.0, 8.0 / 3.0, 3.5)))
    ffn = max(r.hidden_multiple, round(hidden * ratio / r.hidden_multiple) * r.hidden_multiple)
    vocab = _log_pick(u[5], *r.vocab, 128)
    return _Layer(hidden=hidden, head_dim=head_dim, heads=heads, kv_heads=heads // group, ffn=ffn, vocab=vocab,
                  tp=tp, tokens=0, seq=0)


def _shrink_tokens(tokens: int, work: float, cap: float, multiple: int) -> int:
    """Scale the token count down so that ``work`` (linear in tokens) fits under ``cap``."""
    if work <= cap:
        return tokens
    return _snap_down(tokens * cap / work, multiple)


# Each generator maps a unit vector to a Case (or None when the point is not a valid kernel).
Generator = Callable[[np.ndarray, Ranges, tuple[str, ...]], "Case | None"]


def _gemm(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    lay = _layer(u[:6], r)
    dtype = str(_choice(u[6], dtypes))
    tokens = _log_pick(u[7], *r.tokens, r.tokens_multiple)
    q_width = lay.heads * lay.head_dim // lay.tp
    kv_width = 2 * lay.kv_heads * lay.head_dim // lay.tp
    # (out, in) widths of the layer's linears, TP-sharded as Megatron shards them.
    roles = (("qkv", q_width + kv_width, lay.hidden), ("proj", lay.hidden, q_width),
             ("up", lay.ffn // lay.tp, lay.hidden), ("down", lay.hidden, lay.ffn // lay.tp),
             ("logits", lay.vocab // lay.tp, lay.hidden))
    _, n_out, k_in = _choice(u[8], roles)
    role = str(_choice(u[9], ("fwd", "dgrad", "wgrad")))
    e = DTYPE_BYTES[dtype]
    tokens = _shrink_tokens(tokens, 2 * tokens * n_out * k_in, r.max_flops, r.tokens_multiple)
    tokens = _shrink_tokens(tokens, e * tokens * (n_out + k_in), r.max_bytes, r.tokens_multiple)
    if role == "fwd":
        m, n, k = tokens, n_out, k_in
    elif role == "dgrad":
        m, n, k = tokens, k_in, n_out
    else:
        m, n, k = k_in, n_out, tokens
    return Case(family="gemm", pass_="fwd" if role == "fwd" else "bwd", variant=role, dtype=dtype,
                dims=(("m", m), ("n", n), ("k", k), ("batch", 1)))


def _attention(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    lay = _layer(u[:6], r)
    dtype = str(_choice(u[6], dtypes))
    seq = _log_pick(u[7], *r.seq, r.tokens_multiple)
    batch = int(_choice(u[8], (1, 2, 4, 8)))
    pass_ = str(_choice(u[9], ("fwd", "bwd")))
    causal = 1 if u[10] < 0.75 else 0  # training is causal; some non-causal points for coverage
    heads, kv = lay.heads // lay.tp, lay.kv_heads // lay.tp
    flops = 4 * batch * heads * seq * seq * lay.head_dim * (0.5 if causal else 1) * (2.5 if pass_ == "bwd" else 1)
    while flops > r.max_flops and (batch > 1 or seq > r.seq[0]):
        if batch > 1:
            batch //= 2
            flops /= 2
        else:
            seq = _snap_down(seq / 2, r.tokens_multiple)
            flops /= 4
    if flops > r.max_flops:
        return None
    return Case(family="attention", pass_=pass_, variant="", dtype=dtype,
                dims=(("batch", batch), ("heads", heads), ("kv_heads", kv), ("seq_q", seq), ("seq_kv", seq),
                      ("head_dim", lay.head_dim), ("head_dim_v", lay.head_dim), ("window", seq), ("causal", causal),
                      ("flash", 1)))


def _norm(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    hidden = _log_pick(u[0], *r.hidden, r.hidden_multiple)
    dtype = str(_choice(u[1], dtypes))
    tokens = _log_pick(u[2], *r.tokens, r.tokens_multiple)
    tokens = _shrink_tokens(tokens, 3 * tokens * hidden * DTYPE_BYTES[dtype], r.max_bytes, r.tokens_multiple)
    return Case(family="norm", pass_=str(_choice(u[3], ("fwd", "bwd"))), variant="", dtype=dtype,
                dims=(("tokens", tokens), ("hidden", hidden), ("rms", int(u[4] < 0.5))))


_ELEMENTWISE = ("gelu", "swiglu", "relu", "add", "dropout", "rotary")


def _elementwise(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    lay = _layer(u[:6], r)
    dtype = str(_choice(u[6], dtypes))
    tokens = _log_pick(u[7], *r.tokens, r.tokens_multiple)
    variant = str(_choice(u[8], _ELEMENTWISE))
    pass_ = str(_choice(u[9], ("fwd", "bwd")))
    if variant in ("gelu", "swiglu", "relu"):
        width = lay.ffn // lay.tp
    elif variant == "rotary":
        width = lay.head_dim
        tokens *= (lay.heads + lay.kv_heads) // lay.tp  # q and k heads share the rotation
    else:
        width = lay.hidden
    tokens = _shrink_tokens(tokens, 5 * tokens * width * DTYPE_BYTES[dtype], r.max_bytes, 1)
    return Case(family="elementwise", pass_=pass_, variant=variant, dtype=dtype,
                dims=(("elements", tokens * width),), width=width)


def _softmax(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    # Unfused attention scores: rows = batch * heads * seq, cols = seq.
    seq = _log_pick(u[0], *r.seq, r.tokens_multiple)
    heads = int(_choice(u[1], (1, 2, 4, 8, 16, 32)))
    dtype = str(_choice(u[2], dtypes))
    rows = _shrink_tokens(heads * seq, 3 * heads * seq * seq * DTYPE_BYTES[dtype], r.max_bytes, 1)
    return Case(family="softmax", pass_=str(_choice(u[3], ("fwd", "bwd"))), variant="", dtype=dtype,
                dims=(("rows", rows), ("cols", seq)))


def _cross_entropy(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    vocab = _log_pick(u[0], *r.vocab, 128) // int(_choice(u[1], r.tp))
    dtype = str(_choice(u[2], dtypes))
    tokens = _log_pick(u[3], *r.tokens, r.tokens_multiple)
    tokens = _shrink_tokens(tokens, 3 * tokens * vocab * DTYPE_BYTES[dtype], r.max_bytes, r.tokens_multiple)
    return Case(family="cross_entropy", pass_=str(_choice(u[4], ("fwd", "bwd"))), variant="", dtype=dtype,
                dims=(("tokens", tokens), ("vocab", vocab)))


def _embedding(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    hidden = _log_pick(u[0], *r.hidden, r.hidden_multiple)
    vocab = _log_pick(u[1], *r.vocab, 128)
    dtype = str(_choice(u[2], dtypes))
    tokens = _log_pick(u[3], *r.tokens, r.tokens_multiple)
    pass_ = str(_choice(u[4], ("fwd", "bwd")))
    e = DTYPE_BYTES[dtype]
    if pass_ == "bwd" and vocab * hidden * e > r.max_bytes:
        vocab = _snap_down(r.max_bytes / (hidden * e), 128)
    tokens = _shrink_tokens(tokens, 3 * tokens * hidden * e, r.max_bytes / 2, r.tokens_multiple)
    return Case(family="embedding", pass_=pass_, variant="", dtype=dtype,
                dims=(("tokens", tokens), ("hidden", hidden), ("vocab", vocab)))


def _optimizer(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    params = _log_pick(u[0], r.max_params // 4000, r.max_params, 1024)
    return Case(family="optimizer", pass_="fwd", variant="sgd" if u[1] < 0.25 else "adam",
                dtype=str(_choice(u[2], dtypes)), dims=(("params", params),))


def _copy(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    dtype = str(_choice(u[0], dtypes))
    elements = _log_pick(u[1], 4096, int(r.max_bytes / (2 * DTYPE_BYTES[dtype])), 1024)
    return Case(family="copy", pass_="fwd", variant="", dtype=dtype, dims=(("elements", elements),), width=1024)


_QUANTIZE_VARIANTS = ("", "both", "amax", "transpose")
_QUANTIZE_BLOCKS = ((0, "fp8"), (128, "fp8"), (32, "mxfp8"))
"""(elements per block scale, target format) the sampler quantises to: per-tensor and 1x128 FP8,
MXFP8 (torch has no BF16-to-FP4 cast to time NVFP4 with)."""


def _quantize(u: np.ndarray, r: Ranges, dtypes: tuple[str, ...]) -> Case | None:
    # A low-precision recipe's quantisation of a BF16 tensor (whatever the spec dtypes: the source
    # is BF16 and the target the recipe's format).
    variant = str(_choice(u[0], _QUANTIZE_VARIANTS))
    block, dtype = _choice(u[1], _QUANTIZE_BLOCKS)
    elements = _log_pick(u[2], 4096, int(r.max_bytes / 5), 1024)
    scales = 1 if block == 0 or variant == "amax" else (2 if variant == "both" else 1) * elements // block
    return Case(family="quantize", pass_="fwd", variant=variant, dtype=dtype,
                dims=(("elements", elements), ("scales", scales)), width=1024)


_GENERATORS: dict[str, tuple[int, Generator]] = {
    "gemm": (10, _gemm), "attention": (11, _attention), "norm": (5, _norm), "elementwise": (10, _elementwise),
    "softmax": (4, _softmax), "cross_entropy": (5, _cross_entropy), "embedding": (5, _embedding),
    "optimizer": (3, _optimizer), "copy": (2, _copy), "quantize": (3, _quantize),
}


def cases(family: str, ranges: Ranges, dtypes: tuple[str, ...], seed: int) -> Iterator[Case]:
    """The family's design within ``ranges`` (``RANGES[kind]``): distinct cases, in a fixed order.

    Take a prefix. The same arguments always give the same sequence. It ends when the space is
    exhausted: narrow ranges (one dtype, small caps) hold only so many distinct snapped shapes,
    and 64 blocks in a row without a new case means the rest would be duplicates.
    """
    d, gen = _GENERATORS[family]
    seen: set[str] = set()
    fam_seed = seed * 1000 + FAMILIES.index(family)
    block, start, barren = 256, 0, 0
    while barren < 64:
        fresh = False
        for u in halton(block, d, fam_seed, start):
            case = gen(u, ranges, dtypes)
            if case is not None and case.key not in seen:
                seen.add(case.key)
                fresh = True
                yield case
        barren = 0 if fresh else barren + 1
        start += block


SCAN = 4096
"""Cases of a family's design read to learn which strata it draws (:func:`per_stratum_prefix`): every
stratum of every family appears within the first few hundred cases of the shipped ranges."""


@functools.lru_cache(maxsize=64)
def _scan(family: str, ranges: Ranges, dtypes: tuple[str, ...], seed: int) -> list[Case]:
    """The first :data:`SCAN` cases of a family's design (drawing them is the slow part of a plan)."""
    return list(itertools.islice(cases(family, ranges, dtypes, seed), SCAN))


def per_stratum_prefix(family: str, ranges: Ranges, dtypes: tuple[str, ...], seed: int, k: int) -> list[Case]:
    """The shortest prefix of the family's design holding ``k`` cases of every stratum it draws
    (:attr:`Case.stratum`; all of a stratum's cases when it has fewer than ``k`` in :data:`SCAN`).

    ``k`` samples per (operator, pass) is what ``llmp fit --budget K`` adapts with, so this is the
    run a new GPU needs for that k; a prefix (not a pick) keeps the design's resume order."""
    scanned = _scan(family, ranges, dtypes, seed)
    have: dict[tuple[str, str, str, str], int] = {}
    for c in scanned:
        have[c.stratum] = have.get(c.stratum, 0) + 1
    need = {s: min(k, n) for s, n in have.items()}
    seen: dict[tuple[str, str, str, str], int] = {}
    for i, c in enumerate(scanned):
        seen[c.stratum] = seen.get(c.stratum, 0) + 1
        if all(seen.get(s, 0) >= n for s, n in need.items()):
            return scanned[:i + 1]
    return list(scanned)


def design(families: tuple[str, ...], ranges: Ranges, dtypes: tuple[str, ...], seed: int,
           per_family: int, per_stratum: int | None = None) -> list[Case]:
    """``per_family`` cases of each family (or, with ``per_stratum``, :func:`per_stratum_prefix`),
    interleaved round-robin (so a time-boxed run is balanced)."""
    columns = []
    for fam in families:
        if per_stratum is None:
            columns.append(list(itertools.islice(cases(fam, ranges, dtypes, seed), per_family)))
        else:
            columns.append(per_stratum_prefix(fam, ranges, dtypes, seed, per_stratum))
    longest = max((len(col) for col in columns), default=0)
    return [col[i] for i in range(longest) for col in columns if i < len(col)]
