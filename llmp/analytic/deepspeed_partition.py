"""DeepSpeed's pipeline partitioning (``PipelineModule._partition_layers``, deepspeed/runtime/pipe/
module.py): the layer list a pipeline module partitions (:func:`items`) and the part boundaries
each DeepSpeed generation draws over it (:func:`uniform`, :func:`balanced`), for
``parallel.partition`` (:mod:`~llmp.analytic.split`).

Two DeepSpeed generations balance differently, and GPT-NeoX runs the older one:
microsoft/DeepSpeed ``utils.partition_balanced`` solves the linear partition problem by dynamic
programming (minimising heaviest minus lightest part) and ``partition_uniform`` gives the first
parts one extra item each; EleutherAI's DeeperSpeed (pinned by GPT-NeoX) binary-searches the
smallest heaviest part (``_rb_partition_balanced``, eps 1e-3) and fills parts greedily up to it
(``_lprobe``), and its ``partition_uniform`` leaves the remainder to the last part. For the
seed paper's Llemma 7B (32 layers, pp 4, ``type:transformer|mlp``, which also matches GPT-NeoX's
``_pre_transformer_block`` and ``_post_transformer_block`` functions) DeeperSpeed gives 8, 9, 9, 6
layers: the split the seed's own estimator used (data/seed-estimate-train-time/README.md §7.1).
"""

from __future__ import annotations

import bisect
import functools
from typing import Any

import numpy as np

from llmp.analytic import kinds, shard
from llmp.spec.model import Norm
from llmp.spec.spec import PipeModule, Precision, Spec


def items(spec: Spec, layers: int) -> tuple[tuple[str, ...], tuple[Any, ...], tuple[bool, ...]]:
    """The pipeline module's layer list: names, parameters on one TP rank, transformer layer or not."""
    m, p = spec.model, spec.parallel
    embed = shard.embedding(m, p)
    one = kinds.uniform(m)
    per_layer = ([shard.layer(m, p, one).total] * layers if one is not None
                 else [shard.layer(m, p, k).total for k in kinds.sequence(m)])
    norm = (2 if m.norm is Norm.LAYERNORM else 1) * m.hidden
    if p.pipe_module is PipeModule.GPT_NEOX:
        head = ("EmbeddingPipe", embed) if m.tied_embeddings else ("ParallelLinearPipe", m.vocab * m.hidden / p.tp)
        before = [("EmbeddingPipe", embed), ("_pre_transformer_block", 0)]
        after = [("_post_transformer_block", 0), ("NormPipe", norm), head]
    else:
        head = ("EmbeddingPipe", embed) if m.tied_embeddings else ("LMHeadPipe", m.vocab * m.hidden / p.tp)
        before = [("_to_float16", 0), ("EmbeddingPipe", embed), ("<lambda>", 0)]
        after = [("undo", 0), ("LayerNorm", norm), head]
        if spec.train.precision not in (Precision.FP32, Precision.TF32):
            after.append(("float16_to_fp32", 0))
    items = [*before, *[("ParallelTransformerLayerPipe", w) for w in per_layer], *after]
    flags = [False] * len(before) + [True] * layers + [False] * len(after)
    return tuple(n for n, _ in items), tuple(w for _, w in items), tuple(flags)


def uniform(n: int, parts: int, module: PipeModule) -> list[int]:
    """``partition_uniform``: part boundaries over ``n`` items."""
    if n <= parts:
        return [min(p, n) for p in range(parts + 1)]
    size = n // parts
    if module is PipeModule.GPT_NEOX:  # DeeperSpeed: equal parts, the remainder on the last one
        return [size * p for p in range(parts)] + [n]
    extra = n - size * parts  # microsoft/DeepSpeed: the first `extra` parts get one more
    return [size * p + min(p, extra) for p in range(parts + 1)]


@functools.cache
def balanced(weights: tuple[int, ...], parts: int, module: PipeModule) -> list[int]:
    """``partition_balanced``: part boundaries balancing ``weights``, per DeepSpeed generation."""
    if len(weights) <= parts:
        return uniform(len(weights), parts, module)
    if module is PipeModule.GPT_NEOX:
        return _bisection(weights, parts)
    return _linear_partition(weights, parts)


def _lprobe(prefix: list[float], parts: int, bottleneck: float) -> tuple[list[int], bool]:
    """DeeperSpeed ``_lprobe``: fill parts greedily while each stays below ``bottleneck``."""
    n = len(prefix)
    bounds = [0] + [n] * parts
    target = bottleneck
    chunk = n // parts
    step = chunk
    for p in range(1, parts):
        while step < n and prefix[step] < target:
            step += chunk
        bounds[p] = bisect.bisect_left(prefix, target, lo=step - chunk, hi=min(step, n))
        if bounds[p] == n:
            return bounds, prefix[-1] - prefix[bounds[p - 1]] < bottleneck
        target = prefix[bounds[p] - 1] + bottleneck
    return bounds, target >= prefix[-1]


def _bisection(weights: tuple[int, ...], parts: int, eps: float = 1e-3) -> list[int]:
    """DeeperSpeed: binary-search the smallest heaviest part, then probe with it."""
    prefix = [float(x) for x in np.cumsum(weights)]
    lower, upper = prefix[-1] / parts, prefix[-1]
    while upper > lower + eps:
        mid = lower + (upper - lower) / 2
        if _lprobe(prefix, parts, mid)[1]:
            upper = mid
        else:
            lower = mid + eps
    bounds, ok = _lprobe(prefix, parts, upper)
    assert ok, "the bisection's bottleneck always fits"
    return bounds


def _linear_partition(weights: tuple[int, ...], parts: int) -> list[int]:
    """microsoft/DeepSpeed: dynamic programme over (items, parts) minimising heaviest minus lightest
    part, keeping the last split point among equally good ones (its ``>=`` comparison)."""
    n = len(weights)
    prefix = np.concatenate(([0.0], np.cumsum(np.asarray(weights, dtype=float))))
    dp_max = np.full((n + 1, parts + 1), np.inf)
    dp_min = np.full((n + 1, parts + 1), np.inf)
    dp_max[0, 0] = 0.0
    position = np.zeros((n + 1, parts + 1), dtype=int)
    for i in range(1, n + 1):
        for j in range(1, min(i, parts) + 1):
            last = prefix[i] - prefix[:i]
            hi = np.maximum(dp_max[:i, j - 1], last)
            lo = np.minimum(dp_min[:i, j - 1], last)
            cost = hi - lo  # unreachable splits: inf - finite = inf
            k = int(np.flatnonzero(cost == cost.min())[-1])
            dp_max[i, j], dp_min[i, j], position[i, j] = hi[k], lo[k], k
    bounds = [n]
    for j in range(parts, 0, -1):
        bounds.append(int(position[bounds[-1], j]))
    return bounds[::-1]
