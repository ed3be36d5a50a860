"""Evaluated frames → the typed :class:`~llmp.spec.spec.Spec`, then the cross-field checks.

Schema field names equal the dataclass field names, so each section is built from its frame's
values by name; only ids, the per-dtype rate tables and links need assembling.
"""

from __future__ import annotations

from typing import Any

from llmp.dsl.checks import check
from llmp.dsl.frames import Frame
from llmp.dsl.resolve import Resolver
from llmp.errors import SpecError
from llmp.hardware.spec import Attainable, Cluster, Device, Dtype, Link, Node
from llmp.spec import schema
from llmp.spec.model import MlaSpec, ModelSpec, MoeSpec
from llmp.spec.spec import FinetuneSpec, ParallelSpec, Spec, TrainSpec


def build(resolver: Resolver, source: str) -> Spec:
    """Evaluate every field of the active sections and assemble a checked :class:`Spec`."""
    cluster = build_cluster(resolver)
    model = _model(resolver)
    finetune = None
    if resolver.has_frame("train.finetune"):
        finetune = FinetuneSpec(**_values(resolver, resolver.frame("train.finetune")))
    train = TrainSpec(finetune=finetune, **_values(resolver, resolver.frame("train")))
    parallel = ParallelSpec(**_values(resolver, resolver.frame("parallel")))
    order = {path: i for i, path in enumerate(schema.paths())}
    stack_paths = [p for p, f in schema.paths().items() if f.default == schema.STACK]
    spec = Spec(model=model, train=train, parallel=parallel, cluster=cluster,
                sweeps=tuple(sorted(resolver.sweeps, key=lambda s: order[s.path])),
                symbols=tuple(sorted(resolver.symbols, key=order.__getitem__)), source=source,
                stack_set=tuple(p for p in stack_paths if resolver.written(p)))
    check(spec, resolver.span_of)
    return spec


def _values(resolver: Resolver, frame: Frame) -> dict[str, Any]:
    return {name: resolver.get(frame, name) for name in frame.section.fields}


def build_link(resolver: Resolver, path: str) -> Link:
    """The link whose frame is at ``path`` (``node.intra``, ``cluster.inter``, a pinned ``link``)."""
    frame = resolver.frame(path)
    return Link(id=frame.block_id, **_values(resolver, frame))


def _rates(resolver: Resolver, path: str) -> dict[Dtype, Any]:
    """The dtype fields of a per-dtype rate block (``gpu.flops``, ``gpu.achievable``) that are set."""
    if not resolver.has_frame(path):
        return {}
    frame = resolver.frame(path)
    return {d: rate for d in Dtype if (rate := resolver.get(frame, d.value)) is not None}


def _attainable(resolver: Resolver, path: str) -> Attainable | None:
    rates = _rates(resolver, path)
    if not rates:
        return None
    return Attainable(rates=rates, source=resolver.get(resolver.frame(path), "source"))


def build_device(resolver: Resolver) -> Device:
    """The gpu in effect (the node's, or a pinned one)."""
    frame = resolver.frame("gpu")
    values = _values(resolver, frame)
    peak = _rates(resolver, "gpu.flops")
    if not peak:
        raise SpecError(f"gpu '{frame.block_id}' gives no peak FLOP/s", frame.span,
                        label="missing field",
                        hint="add flops { bf16 = ... TFLOP/s } with at least one dtype")
    return Device(id=frame.block_id, peak_flops=peak, achievable=_attainable(resolver, "gpu.achievable"),
                  flash_attention=_attainable(resolver, "gpu.flash_attention"),
                  derivation=frame.derivation, **values)


def build_node(resolver: Resolver) -> Node:
    """The node in effect (the cluster's, or a pinned one)."""
    frame = resolver.frame("node")
    return Node(id=frame.block_id, gpu=build_device(resolver),
                gpus_per_node=resolver.get(frame, "gpus_per_node"),
                nvlink_domain=resolver.get(frame, "nvlink_domain"), host_cpu=resolver.get(frame, "host_cpu"),
                intra=build_link(resolver, "node.intra"), inter=build_link(resolver, "node.inter"))


def build_cluster(resolver: Resolver) -> Cluster:
    """The cluster in effect, with its node."""
    cluster = resolver.frame("cluster")
    node = build_node(resolver)
    # A cluster that names no inter link of its own uses the node's, the very same Link, so
    # `--set node.inter.bandwidth=...` moves it (a second resolution would miss that override).
    own_inter = "inter" in cluster.fields or any(p.startswith("cluster.inter.") for p in resolver.overrides)
    return Cluster(id=cluster.block_id, node=node, nodes=resolver.get(cluster, "nodes"),
                   inter=build_link(resolver, "cluster.inter") if own_inter else node.inter)


def _model(resolver: Resolver) -> ModelSpec:
    frame = resolver.frame("model")
    values = _values(resolver, frame)
    moe = None
    if resolver.has_frame("model.moe"):
        moe = MoeSpec(**_values(resolver, resolver.frame("model.moe")))
    mla = None
    if resolver.has_frame("model.mla"):
        mla = MlaSpec(**_values(resolver, resolver.frame("model.mla")))
    return ModelSpec(name=frame.block_id, moe=moe, mla=mla, **values)
