"""Map one published measurement to a resolved :class:`~llmp.spec.spec.Spec`, or say why not.

The mapping writes ``.llmp`` text for the row (model from the architecture columns and notes,
cluster from ``gpu_id`` → catalog node, train/parallel from the row, naming the stack that ran it)
and resolves it with :func:`llmp.dsl.loads`, so every scored row goes through the real language
and its checks; a row the language rejects is skipped with the resolver's own diagnostic. What the
row leaves blank is decided by the stack's profile (:mod:`llmp.stacks`) or the model family, and
every such choice travels with the row as an assumption.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from llmp import dsl
from llmp.errors import LlmpError
from llmp.hardware.catalog import catalog_ids
from llmp.hardware.spec import Dtype, Link, Node
from llmp.spec.model import Router
from llmp.spec.spec import Dispatcher, Spec, Stack
from llmp.validate import finetuning, metrics, network_cell, notes
from llmp.validate.cells import CellError
from llmp.validate.frameworks import TrainPlan, plan_train, value_text
from llmp.validate.hardware import ClusterPlan, plan_cluster
from llmp.validate.metrics import MetricNameError, Quantity, Reading, StepContext, UnitError
from llmp.validate.models import MODEL_FIELDS, ModelPlan, for_stack, plan_model
from llmp.validate.notes import MemoryKind, MemoryReading, Notes
from llmp.validate.rows import Measurement, Row
from llmp.validate.skips import SkipReason, Unmodellable


@dataclass(frozen=True, kw_only=True, slots=True)
class Mapped:
    """A measurement llmp can predict: its spec, the scored metric and the measured step time."""

    measurement: Measurement
    metric_row: Row
    """The (first) row whose metric is scored."""
    reading: Reading
    """The scored metric, understood (its value is the median when several rows report it)."""
    measured_s: float
    """Step time implied by the published metric."""
    context: StepContext
    """What converts between the metric and step time (batch, tokens, GPUs, FLOPs per step)."""
    text: str
    """The generated .llmp text."""
    spec: Spec
    memory: tuple[MemoryReading, ...] = ()
    """Measured memory peaks per GPU the row gives (metrics or notes)."""
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Skipped:
    """A measurement llmp does not score, with the reason."""

    measurement: Measurement
    reason: SkipReason
    detail: str


def readings(m: Measurement) -> tuple[tuple[Reading, Row], ...]:
    """Every metric row of ``m``, understood; a unit llmp cannot read refuses the measurement."""
    out = []
    for row in m.rows:
        value = row.number("metric_value")
        assert value is not None  # a required cell (rows.REQUIRED)
        try:
            out.append((metrics.read(row.text("metric_name"), value, row.text("metric_unit")), row))
        except UnitError as err:
            raise Unmodellable(SkipReason.UNKNOWN_UNIT,
                               f"{row.key}: metric {row.text('metric_name')!r}: {err}") from None
        except MetricNameError as err:
            raise Unmodellable(SkipReason.UNKNOWN_METRIC, f"{row.key}: {err}") from None
    return tuple(out)


def _choose_metric(m: Measurement, read: tuple[tuple[Reading, Row], ...]) -> tuple[Reading, Row]:
    source = m.config.text("source")
    for quantity in metrics.PREFERENCE:
        found = [(r, row) for r, row in read if r.quantity is quantity]
        if quantity is Quantity.FLOP_RATE and source not in metrics.FLOP_CONVENTIONS:
            continue
        if not found:
            continue
        # a job's throughput has more significant digits than the same figure per GPU
        found.sort(key=lambda pair: pair[0].per_gpu)
        return found[0]
    have = ", ".join(f"{r.name} [{r.unit.text}]" for r, _ in read)
    alone = f" (memory only: {'; '.join(m.joined)})" if m.joined else ""
    raise Unmodellable(SkipReason.NO_TIME_METRIC,
                       f"reported metrics: {have}{alone}; none is a time or throughput, and FLOP-rate metrics are "
                       "used only with a FLOP formula stated by the source")


AGREEMENT = 0.05
"""How far two readings of one run may imply different step times before they contradict each other:
published figures carry 2 to 4 significant digits, and rounding to 2 moves a value by at most 4.2%
(1.25 written as 1.2)."""

_EXACT = (Quantity.STEP_TIME, Quantity.TOKEN_RATE, Quantity.SAMPLE_RATE)
"""Quantities that convert to a step time exactly (batch, tokens and GPUs only; no FLOP convention)."""


def _check_agreement(read: tuple[tuple[Reading, Row], ...], context: StepContext) -> None:
    """Refuse a run whose rows give different step times: two different numbers for one configuration
    are two runs or a typo, and scoring their mean would score a run nobody measured."""
    exact = [(metrics.step_time(r, context), r, row) for r, row in read if r.quantity in _EXACT]
    # FLOP rates convert through the source's FLOP convention, which may count otherwise than a
    # time row of the same run does: they are compared with each other only
    rates = [(metrics.step_time(r, context), r, row) for r, row in read
             if r.quantity is Quantity.FLOP_RATE and context.flops_per_step is not None]
    for times in (exact, rates):
        _agree(times)


def _agree(times: list[tuple[float, Reading, Row]]) -> None:
    if len(times) < 2:
        return
    low, high = min(times, key=lambda t: t[0]), max(times, key=lambda t: t[0])
    if high[0] > low[0] * (1 + AGREEMENT):
        shown = "; ".join(f"{row.key} {r.name} = {r.value:g} {r.unit.text} gives {s:.4g} s"
                          for s, r, row in (low, high))
        raise Unmodellable(SkipReason.CONTRADICTORY,
                           f"{shown}: {high[0] / low[0] - 1:.0%} apart, more than rounding explains "
                           f"({AGREEMENT:.0%}); keep the row you trust, or tell the runs apart in a "
                           "configuration column (notes do not count)")


def _memory(read: tuple[tuple[Reading, Row], ...], noted: Notes) -> tuple[MemoryReading, ...]:
    out = list(noted.memory)
    for r, _row in read:
        if r.quantity is Quantity.MEMORY:
            name = r.name.lower()
            kind = (MemoryKind.RESERVED if "reserved" in name else MemoryKind.ALLOCATED if "alloc" in name
                    else MemoryKind.DEVICE)
            out.append(MemoryReading(kind=kind, bytes=r.si, text=f"{r.name} = {r.value:g} {r.unit.text}"))
    return tuple(out)


AUTOMODEL_CONFIGS = "NVIDIA-NeMo/Automodel:examples/llm_benchmark/"
"""Where the AutoModel performance page's benchmark configurations live (its 'Configuration Files')."""


def _plan_moe_train(m: Measurement, model: ModelPlan, train: TrainPlan) -> TrainPlan:
    """What a MoE row's run states, or its stack's benchmark configuration decides, about the experts:
    the gate, the dispatcher, a blank ep and multi-token prediction (the pipeline split is the
    stack's, for any model: :mod:`~llmp.validate.frameworks`)."""
    said: list[str] = []
    parallel = dict(train.parallel)
    ep = train.ep
    text = m.notes
    if re.search(r"fake[-_ ]balanced", text, re.IGNORECASE):
        said.append("router = balanced, imbalance 1: the notes state a fake balanced gate (NeMo AutoModel "
                    "FakeBalancedGate: tokens dealt round-robin to the experts, no gating GEMM; "
                    "NVIDIA-NeMo/Automodel@01883b4:nemo_automodel/components/moe/layers.py)")
    if re.search(r"\b(?:deep|hybrid)ep\b", text, re.IGNORECASE):
        parallel["dispatcher"] = Dispatcher.DEEPEP
        said.append("dispatcher = deepep: the notes name DeepEP (one copy of a token per destination rank)")
    if m.config.integer("ep") is None and train.stack is Stack.NEMO_AUTOMODEL:
        ep = train.dp
        said.append(f"ep blank: ep = dp = {ep} (the page's GPT-OSS benchmark configurations set ep_size to the "
                    f"GPU count: {AUTOMODEL_CONFIGS}gpt_oss/gptoss_20b_te_deepep.yaml ep_size 8 on 8 GPUs, "
                    "gptoss_120b_te_deepep.yaml ep_size 64 on 64)")
    elif m.config.integer("ep") is None:
        said.append("ep blank: 1 (Megatron's default --expert-model-parallel-size)")
    return dataclasses.replace(train, ep=ep, parallel=parallel, assumptions=(*train.assumptions, *said))


def _moe_fields(model: ModelPlan, balanced: bool) -> list[tuple[str, Any]]:
    """The ``moe { }`` fields to write: the family's, with the balanced gate where the run used it."""
    if not balanced:
        return list(model.moe)
    drop = {"router", "expert_bias", "aux_loss"}
    return [(k, v) for k, v in model.moe if k not in drop] + [("router", Router.BALANCED)]


def _context(row: Row, model: ModelPlan, train: TrainPlan, reading: Reading) -> StepContext:
    num_gpus = row.integer("num_gpus")
    assert num_gpus is not None
    flops = None
    if reading.quantity is Quantity.FLOP_RATE:
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
    return (f"link {{ bandwidth = {float(link.bandwidth):.6g} B/s  latency = {float(link.latency):.6g} s  "
            f"efficiency = {float(link.efficiency):.6g} }}")


def _host(node: Node) -> list[str]:
    """A node block written for a part of a catalog node keeps the catalog's host CPU."""
    return [] if node.host_cpu is None else [f"  host_cpu = {node.host_cpu}"]


def _field(name: str, value: Any, indent: str = "  ") -> str:
    return f"{indent}{name} = {value_text(value)}"


def render(row: Row, model: ModelPlan, cluster: ClusterPlan, train: TrainPlan, notes_text: str = "",
           finetune: tuple[tuple[str, Any], ...] = ()) -> str:
    """The .llmp text of a mapped row (``llmp predict`` accepts it as it is); ``notes_text``: the
    measurement's notes (a MoE run's gate); ``finetune``: a fine-tuning row's ``finetune { }`` fields."""
    node = cluster.node
    lines = [(f"# {row.key}: {row.text('source')}, {row.text('model_name')} "
             f"({row.text('num_gpus')} x {row.text('gpu_id')}), generated by llmp validate"),
             f'use "{node.id}"', ""]
    node_id = node.id
    if cluster.gpus_per_node != node.gpus_per_node:
        node_id = f"{node.id}_{cluster.gpus_per_node}gpu"
        lines += [f"node {node_id} {{   # {cluster.gpus_per_node} of the {node.gpus_per_node} GPUs of a {node.id}",
                  f"  gpu = {node.gpu.id}", f"  gpus_per_node = {cluster.gpus_per_node}",
                  f"  intra = {_link_text(node.intra)}", f"  inter = {_link_text(node.inter)}", *_host(node), "}", ""]
    elif cluster.nvlink_domain is not None:
        node_id = f"{node.id}_{cluster.nvlink_domain}gpu_domain"
        lines += [f"node {node_id} {{   # a {node.id} in the {cluster.nvlink_domain}-GPU NVLink domain the job got",
                  f"  gpu = {node.gpu.id}", f"  gpus_per_node = {node.gpus_per_node}",
                  f"  nvlink_domain = {cluster.nvlink_domain}",
                  f"  intra = {_link_text(node.intra)}", f"  inter = {_link_text(node.inter)}", *_host(node), "}", ""]
    lines += [f"model {_ident(model.name)} {{", f"  arch = {model.arch}", f"  layers = {model.layers}",
              f"  hidden = {model.hidden}", f"  heads = {model.heads}", f"  kv_heads = {model.kv_heads}",
              f"  ffn_hidden = {model.ffn_hidden}", f"  vocab = {model.vocab}", f"  seq_len = {model.seq_len}"]
    lines += [_field(f, getattr(model, f)) for f in (*MODEL_FIELDS, "head_dim", "window", "full_attention_every",
                                                      "mtp_layers") if getattr(model, f) is not None]
    if model.moe:
        balanced = bool(re.search(r"fake[-_ ]balanced", notes_text, re.IGNORECASE))
        lines.append("  moe { " + "  ".join(f"{k} = {value_text(v)}" for k, v in _moe_fields(model, balanced)) + " }")
    if model.mla:
        lines.append("  mla { " + "  ".join(f"{k} = {v}" for k, v in model.mla) + " }")
    lines += ["}", "", "cluster run {", f"  node = {node_id}", f"  nodes = {cluster.nodes}"]
    if cluster.inter is not None:
        lines.append(f"  inter = {cluster.inter}")
    lines += ["}", "", "train {", f"  stack = {train.stack}", f"  precision = {train.precision}", "  optimizer = adamw",
              f"  global_batch = {train.global_batch}", f"  micro_batch = {train.micro_batch}",
              f"  recompute = {train.recompute}"]
    lines += [_field(f, v) for f, v in train.train.items()]
    lines += ["  parallel {", f"    tp = {train.tp}", f"    pp = {train.pp}", f"    dp = {train.dp}",
              f"    cp = {train.cp}",
              f"    ep = {train.ep}", f"    vp = {train.vp}", f"    schedule = {train.schedule}",
              _field("sequence_parallel", train.sequence_parallel, "    ")]
    lines += [f"    {f} = [{', '.join(map(str, v))}]" if isinstance(v, list) else _field(f, v, "    ")
              for f, v in train.parallel.items()]
    lines.append("  }")
    if finetune:  # after parallel: the grammar reads `parallel` after a sub-block as a block keyword
        lines.append("  finetune { " + "  ".join(f"{k} = {value_text(v)}" for k, v in finetune) + " }")
    lines += ["}", ""]
    return "\n".join(lines)


def _check_network(row: Row) -> None:
    """A network cell that names two compute fabrics, or contradicts itself, is not guessed: the row is
    skipped with the cell quoted (a cell that only leaves its scope unstated keeps the node's network)."""
    cell = row.text("interconnect_inter")
    try:
        network_cell.network(cell, row.integer("gpus_per_node") or 8)
    except CellError as err:
        raise Unmodellable(SkipReason.CELL, f"interconnect_inter {err}") from None


def _map(m: Measurement) -> Mapped:
    row = m.config
    task = finetuning.task_of(m)
    read = readings(m)
    how: list[str] = []
    reading, metric_row = _choose_metric(m, read)
    try:
        noted = notes.read(m.notes)
    except CellError as err:
        raise Unmodellable(SkipReason.CELL, f"notes: {err}") from None
    if noted.unexpressible:
        raise Unmodellable(SkipReason.UNEXPRESSIBLE, "; ".join(noted.unexpressible))
    model = plan_model(row, noted)
    train = plan_train(m, noted, model)
    model = for_stack(model, train.stack)
    if model.moe:
        train = _plan_moe_train(m, model, train)
    tuned: tuple[tuple[str, Any], ...] = ()
    if task is not None:  # a fine-tuning run: its adapters, packing and recipe (llmp.validate.finetuning)
        ft = finetuning.plan(m, task, train, model.seq_len)
        tuned, train = ft.fields, ft.train
    _check_network(row)
    cluster = plan_cluster(row)
    dtype = Dtype(train.precision.compute_dtype)
    if dtype not in cluster.node.gpu.peak_flops:
        have = ", ".join(d.value for d in cluster.node.gpu.peak_flops)
        raise Unmodellable(SkipReason.UNSUPPORTED_DTYPE,
                           f"{train.precision} on {cluster.node.gpu.id}: the catalog gives no {dtype} peak "
                           f"(has {have})")
    context = _context(row, model, train, reading)
    measured = metrics.step_time(reading, context)
    _check_agreement(read, context)
    text = render(row, model, cluster, train, m.notes, tuned)
    try:
        spec = dsl.loads(text, filename=f"<{row.key}>")
    except LlmpError as err:
        raise Unmodellable(SkipReason.SPEC_ERROR, err.render()) from None
    said = f"measured step time from {reading.name} = {reading.value:g} {reading.unit.text} ({reading.quantity})"
    if context.flops_per_step is not None:
        said += f" with {metrics.FLOP_CONVENTIONS[row.text('source')].citation}"
    denied = tuple(f"notes deny {term!r} ({words!r}): not read as stated" for term, words in noted.denied)
    assumptions = (said, *m.joined, *how, *model.assumptions, *train.assumptions, *cluster.assumptions, *denied)
    return Mapped(measurement=m, metric_row=metric_row, reading=reading, measured_s=measured, context=context,
                  text=text, spec=spec, memory=_memory(read, noted), assumptions=assumptions)


def map_measurement(m: Measurement) -> Mapped | Skipped:
    """Map one measurement; rows llmp cannot model come back as :class:`Skipped` with a reason."""
    try:
        return _map(m)
    except Unmodellable as why:
        return Skipped(measurement=m, reason=why.reason, detail=why.detail)
