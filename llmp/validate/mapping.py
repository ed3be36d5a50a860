"""Map one published measurement to a resolved :class:`~llmp.dsl.spec.Spec`, or say why not.

The mapping writes ``.llmp`` text for the row (model from the architecture columns, cluster from
``gpu_id`` → catalog node, train/parallel from the row) and resolves it with
:func:`llmp.dsl.loads`, so every scored row goes through the real language and its checks; a
row the language rejects is skipped with the resolver's own diagnostic. Blank cells are filled
with the running framework's documented default (:mod:`~llmp.validate.frameworks`), and every
such choice travels with the row as an assumption.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llmp import dsl
from llmp.dsl.spec import Spec
from llmp.errors import LlmpError
from llmp.hardware.catalog import catalog_ids
from llmp.hardware.spec import Dtype, Link
from llmp.validate import metrics
from llmp.validate.frameworks import TrainPlan, plan_train
from llmp.validate.hardware import ClusterPlan, plan_cluster
from llmp.validate.metrics import Metric, StepContext
from llmp.validate.models import ModelPlan, plan_model
from llmp.validate.rows import Measurement, Row
from llmp.validate.skips import SkipReason, Unmodellable

FINE_TUNING_TAGS = frozenset({"lora", "sft", "peft", "dpo"})
"""``[Tag]`` suffixes of ``model_name`` that mark a fine-tuning run (NeMo tables tag them so)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Mapped:
    """A measurement llmp can predict: its spec, the scored metric and the measured step time."""

    measurement: Measurement
    metric_row: Row
    """The row whose metric is scored."""
    metric: Metric
    measured_s: float
    """Step time implied by the published metric."""
    context: StepContext
    """What converts between the metric and step time (batch, tokens, GPUs, FLOPs per step)."""
    text: str
    """The generated .llmp text."""
    spec: Spec
    assumptions: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Skipped:
    """A measurement llmp does not score, with the reason."""

    measurement: Measurement
    reason: SkipReason
    detail: str


def _choose_metric(m: Measurement) -> tuple[Metric, Row]:
    source = m.config.text("source")
    for metric in metrics.PREFERENCE:
        row = m.metric(metric.value)
        if row is None:
            continue
        if metric is Metric.ACHIEVED_TFLOPS_PER_GPU and source not in metrics.FLOP_CONVENTIONS:
            continue
        return metric, row
    have = ", ".join(m.metric_names)
    raise Unmodellable(SkipReason.NO_TIME_METRIC,
                       f"reported metrics: {have}; none is a time or throughput, and FLOP-rate metrics are used "
                       "only with a FLOP formula stated by the source")


def _check_task(row: Row) -> None:
    tags = {t.lower() for t in re.findall(r"\[([A-Za-z]+)\]", row.text("model_name"))}
    if tags & FINE_TUNING_TAGS:
        raise Unmodellable(SkipReason.FINE_TUNING, f"model_name {row.text('model_name')!r} marks a fine-tuning run "
                           "(frozen weights or packed variable-length samples: not a pre-training step)")


def _check_moe(row: Row) -> None:
    experts = row.integer("moe_experts")
    if experts is not None and experts > 1:
        raise Unmodellable(SkipReason.MOE, f"{experts} experts, top-{row.text('moe_topk') or '?'}: the schema has no "
                           "expert MLP width column (ffn_hidden is the dense width) and these models also use "
                           "layouts (dense first layers, MLA, shared experts) the row does not describe")


def _context(row: Row, model: ModelPlan, train: TrainPlan, metric: Metric) -> StepContext:
    num_gpus = row.integer("num_gpus")
    assert num_gpus is not None
    flops = None
    if metric is Metric.ACHIEVED_TFLOPS_PER_GPU:
        flops = metrics.FLOP_CONVENTIONS[row.text("source")].formula(
            global_batch=train.global_batch, seq_len=model.seq_len, layers=model.layers, hidden=model.hidden,
            vocab=model.vocab)
    return StepContext(num_gpus=num_gpus, global_batch=train.global_batch, seq_len=model.seq_len,
                       flops_per_step=flops)


def _ident(text: str) -> str:
    ident = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "model"
    return ident if ident[0].isalpha() else f"m_{ident}"


def _link_text(link: Link) -> str:
    if link.id in catalog_ids()["link"]:
        return link.id
    return f"link {{ bandwidth = {float(link.bandwidth):.6g} B/s  latency = {float(link.latency):.6g} s }}"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def render(row: Row, model: ModelPlan, cluster: ClusterPlan, train: TrainPlan) -> str:
    """The .llmp text of a mapped row (``llmp predict`` accepts it as it is)."""
    node = cluster.node
    lines = [(f"# {row.key}: {row.text('source')}, {row.text('model_name')} "
             f"({row.text('num_gpus')} x {row.text('gpu_id')}), generated by llmp validate"),
             f'use "{node.id}"', ""]
    node_id = node.id
    if cluster.gpus_per_node != node.gpus_per_node:
        node_id = f"{node.id}_{cluster.gpus_per_node}gpu"
        lines += [f"node {node_id} {{   # {cluster.gpus_per_node} of the {node.gpus_per_node} GPUs of a {node.id}",
                  f"  gpu = {node.gpu.id}", f"  gpus_per_node = {cluster.gpus_per_node}",
                  f"  intra = {_link_text(node.intra)}", f"  inter = {_link_text(node.inter)}", "}", ""]
    lines += [f"model {_ident(model.name)} {{", f"  arch = {model.arch}", f"  layers = {model.layers}",
              f"  hidden = {model.hidden}", f"  heads = {model.heads}", f"  kv_heads = {model.kv_heads}",
              f"  ffn_hidden = {model.ffn_hidden}", f"  vocab = {model.vocab}", f"  seq_len = {model.seq_len}"]
    for name in ("norm", "activation", "position"):
        value = getattr(model, name)
        if value is not None:
            lines.append(f"  {name} = {value}")
    for name in ("bias", "tied_embeddings"):
        value = getattr(model, name)
        if value is not None:
            lines.append(f"  {name} = {_bool(value)}")
    lines += ["}", "", "cluster run {", f"  node = {node_id}", f"  nodes = {cluster.nodes}"]
    if cluster.inter is not None:
        lines.append(f"  inter = {cluster.inter}")
    lines += ["}", "", "train {", f"  precision = {train.precision}", "  optimizer = adamw",
              f"  global_batch = {train.global_batch}", f"  micro_batch = {train.micro_batch}",
              f"  recompute = {train.recompute}", "  parallel {",
              f"    tp = {train.tp}", f"    pp = {train.pp}", f"    dp = {train.dp}", f"    cp = {train.cp}",
              f"    ep = {train.ep}", f"    vp = {train.vp}", f"    schedule = {train.schedule}",
              f"    sequence_parallel = {_bool(train.sequence_parallel)}", f"    zero = {train.zero}",
              f"    tp_comm_overlap = {_bool(train.tp_comm_overlap)}", "  }", "}", ""]
    return "\n".join(lines)


def _map(m: Measurement) -> Mapped:
    row = m.config
    _check_task(row)
    metric, metric_row = _choose_metric(m)
    _check_moe(row)
    model = plan_model(row)
    train = plan_train(row)
    cluster = plan_cluster(row)
    dtype = Dtype(train.precision.compute_dtype)
    if dtype not in cluster.node.gpu.peak_flops:
        have = ", ".join(d.value for d in cluster.node.gpu.peak_flops)
        raise Unmodellable(SkipReason.UNSUPPORTED_DTYPE,
                           f"{train.precision} on {cluster.node.gpu.id}: the catalog gives no {dtype} peak (has {have})")
    context = _context(row, model, train, metric)
    value = metric_row.number("metric_value")
    assert value is not None
    measured = metrics.step_time(metric, value, context)
    text = render(row, model, cluster, train)
    try:
        spec = dsl.loads(text, filename=f"<{row.key}>")
    except LlmpError as err:
        raise Unmodellable(SkipReason.SPEC_ERROR, err.render()) from None
    how = f"measured step time from {metric} = {value:g} {metric_row.text('metric_unit')}"
    if context.flops_per_step is not None:
        how += f" with {metrics.FLOP_CONVENTIONS[row.text('source')].citation}"
    assumptions = (how, *model.assumptions, *train.assumptions, *cluster.assumptions)
    return Mapped(measurement=m, metric_row=metric_row, metric=metric, measured_s=measured, context=context,
                  text=text, spec=spec, assumptions=assumptions)


def map_measurement(m: Measurement) -> Mapped | Skipped:
    """Map one measurement; rows llmp cannot model come back as :class:`Skipped` with a reason."""
    try:
        return _map(m)
    except Unmodellable as why:
        return Skipped(measurement=m, reason=why.reason, detail=why.detail)
