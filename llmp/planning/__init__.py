"""Plan a whole training run: how long and how much N tokens take, or how many GPUs meet a date.

    import llmp
    p = llmp.plan("examples/llama3_405b_pp16_vp8.llmp", tokens="15T", price_per_gpu_hour=2.0)
    p.days, p.gpu_hours, p.energy_kwh, p.cost      # each (point, low, high)
    llmp.plan(spec_path, tokens="2T", deadline="30d").gpus

For a GPU count (given, or the spec's own) the best layout comes from ``llmp.search``'s layout
space (:mod:`llmp.planning.layouts`), and that layout's step is predicted as ``llmp predict`` does,
with its band. The run takes tokens / tokens per step x step time; GPU-hours, energy
(:mod:`llmp.planning.power`) and cost follow, and the step's band carries through to each.

Global batch: the spec's is kept at every GPU count. It is a training hyper-parameter that
decides what is learned per token (the critical batch size, McCandlish et al. 2018, "An
Empirical Model of Large-Batch Training"): a plan that grew it with the GPU count would answer
for a different training run. It also bounds the run: data parallelism cannot exceed the batch's
sequences, so beyond some count more GPUs no longer help.

Deadline: the GPU counts considered are the divisors of a node below one node, then whole nodes
1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four per doubling, at most 25% apart), up to
``max_gpus`` and the largest count the batch can lay out. They are scanned in order from the
compute lower bound (the matmul FLOPs of the run at the datasheet peak, i.e. 100% MFU) and the
first whose best layout's predicted time meets the deadline is returned, so it is the smallest
feasible count among those considered. A deadline no count can meet is reported before any
search when a critical-path bound shows it: a step cannot be shorter than one sequence's
forward and backward through every layer on the largest tensor-parallel group.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from llmp import dsl
from llmp.compose import predict
from llmp.errors import InfeasibleError, InputError
from llmp.planning import layouts
from llmp.planning.checkpoint import STORAGE_BANDWIDTH, Mode, checkpointing
from llmp.planning.facility import Facility
from llmp.planning.inputs import MAX_GPUS as GPU_LIMIT
from llmp.planning.inputs import check_price, parse_bandwidth, parse_duration, parse_mttf, parse_tokens
from llmp.planning.power import PowerModel, busy_fraction, power
from llmp.planning.reliability import FailureModel
from llmp.planning.report import DAY, Estimate, Plan, RunModel, RunnerUp
from llmp.progress import Progress, tick
from llmp.search.space import divisors
from llmp.spec.spec import Spec
from llmp.units import format_count

__all__ = ["Estimate", "Plan", "considered_counts", "curve_counts", "plan"]

MAX_GPUS = 131072
"""Default ceiling of the deadline search: 2^17 GPUs, above the largest training clusters
reported in public (about 100,000 H100s)."""


def considered_counts(gpus_per_node: int, limit: int) -> list[int]:
    """GPU counts a deadline search considers, ascending, up to ``limit``: the proper divisors of
    a node, then 1, 2, 3 nodes and 4..7 x 2^k nodes (four steps per doubling)."""
    counts = [d for d in divisors(gpus_per_node) if d < gpus_per_node]
    nodes = {1, 2, 3}
    k = 1
    while 4 * k * gpus_per_node <= limit:
        nodes.update(j * k for j in (4, 5, 6, 7))
        k *= 2
    counts += sorted(n * gpus_per_node for n in nodes)
    return [c for c in counts if c <= limit]


CURVE_FACTORS = (0.25, 0.5, 2.0, 4.0)
"""A plan on a given count is drawn against these multiples of it too (``--plot``, the page)."""


def curve_counts(spec: Spec, gpus: int | None) -> list[int]:
    """Whole-node multiples of ``gpus`` (None: the spec's own count) by :data:`CURVE_FACTORS`, to
    draw a plan's totals against the GPU count; the count itself is left out."""
    per_node = int(spec.cluster.node.gpus_per_node)
    count = int(spec.world_size) if gpus is None else gpus
    return sorted({max(per_node, int(count * f) // per_node * per_node) for f in CURVE_FACTORS} - {count})


def _estimate(source: str, sets: Sequence[str], gpus: int, residuals: object,
              run: RunModel) -> tuple[Estimate, str] | None:
    """The best layout on ``gpus`` GPUs, predicted, with its checkpoint cost (and the residual
    store's id), or None."""
    layout = layouts.best(source, sets, gpus)
    if layout is None:
        return None
    overrides = tuple(layout.overrides())
    spec = dsl.load(source, [*sets, *overrides])
    pred = predict(spec, residuals)  # type: ignore[arg-type]
    config = {**layout.config, "parallel.cp": int(spec.parallel.cp)}
    return Estimate(gpus=gpus, config=config, overrides=overrides, step_time_s=pred.step_time_s,
                    step_band_s=(float(pred.band[0]), float(pred.band[1])), roofline_step_s=layout.roofline_step_s,
                    tokens_per_step=float(spec.tokens_per_step), mfu=pred.mfu,
                    busy=busy_fraction(pred.breakdown, pred.step_time_s),
                    memory_per_gpu_bytes=pred.memory.total, space=layout.space, checked=layout.checked,
                    evaluated=layout.evaluated,
                    checkpoint=checkpointing(spec, pred, mode=run.checkpoint_mode,
                                             storage_bandwidth=run.storage_bandwidth, relaunch_s=run.relaunch_s)
                    ), pred.provenance.residuals


def _runner_up(source: str, sets: Sequence[str], chosen: Estimate, residuals: object) -> RunnerUp | None:
    """The next layout at the chosen count, predicted as the chosen one was."""
    other = next((lay for lay in layouts.ranked(source, sets, chosen.gpus, 2)
                  if tuple(lay.overrides()) != chosen.overrides), None)
    if other is None:
        return None
    overrides = tuple(other.overrides())
    pred = predict(dsl.load(source, [*sets, *overrides]), residuals)  # type: ignore[arg-type]
    return RunnerUp.of(chosen, overrides, float(pred.step_time_s), (float(pred.band[0]), float(pred.band[1])))


def _gpu_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{what} needs a positive whole number of GPUs, got {value!r}")
    if value > GPU_LIMIT:
        raise InputError(f"{what} {value:,} is beyond any real cluster (at most {GPU_LIMIT:,} GPUs)")
    return value


def _peak(spec: Spec) -> float:
    return float(spec.cluster.gpu.peak_flops[spec.train.precision.compute_dtype])


def plan(spec: str | os.PathLike[str], *, tokens: str | float, gpus: int | None = None,
         deadline: str | float | None = None, price_per_gpu_hour: float | None = None, sets: Sequence[str] = (),
         power_model: PowerModel | str = PowerModel.TDP, idle_fraction: float | None = None,
         max_gpus: int = MAX_GPUS, residuals: object = "default", curve: Sequence[int] = (),
         mttf: str | None = None, checkpoint: Mode | str = Mode.AUTO,
         storage_bandwidth: str | float = STORAGE_BANDWIDTH, checkpoint_interval: str | float | None = None,
         restart: str | float = 0.0, node_overhead: float | None = None, pue: float | None = None,
         grid_intensity: float | None = None, progress: Progress | None = None) -> Plan:
    """Plan training ``tokens`` on the spec at ``spec`` (with ``--set`` overrides ``sets``).

    ``gpus``: plan on this many GPUs; ``deadline`` (seconds, or ``"30d"``/``"36h"``/``"2w"``):
    find the fewest GPUs whose expected wall clock, failures included, finishes in time; neither:
    the spec's own GPU count. ``curve``: more GPU counts to evaluate (for plots); they do not change
    the answer.

    The run as it goes (:mod:`llmp.planning.reliability`, :mod:`llmp.planning.checkpoint`):
    ``mttf`` (``"3h@16384"``: an MTTF measured on that many GPUs; default the published fits),
    ``checkpoint`` (``auto``: as the stack saves; ``sync``; ``async``), ``storage_bandwidth``
    (bytes/s or ``"2TB/s"``), ``checkpoint_interval`` (work between checkpoints; default Daly's
    optimum), ``restart`` (relaunch time per failure before the checkpoint is read back). Energy
    (:mod:`llmp.planning.facility`): ``node_overhead``, ``pue``, ``grid_intensity`` (g CO2e/kWh),
    each None for its cited default. ``progress``: told of each GPU count a deadline search evaluates.
    """
    start = time.perf_counter()
    source = os.fspath(spec)
    n_tokens = parse_tokens(tokens)
    if gpus is not None and deadline is not None:
        raise InputError("give a GPU count or a deadline, not both",
                         hint="--gpus N plans on N GPUs; --deadline 30d finds the fewest GPUs that finish in time")
    check_price(price_per_gpu_hour)
    max_gpus = _gpu_count(max_gpus, "--max-gpus")
    facility = Facility(**{k: v for k, v in (("node_overhead", node_overhead), ("pue", pue),
                                             ("grid_g_per_kwh", grid_intensity)) if v is not None})
    base = dsl.load(source, list(sets))
    _check_tokens(n_tokens, base)
    run = _run_model(base, gpus=gpus, deadline=deadline, mttf=mttf, checkpoint=checkpoint,
                     storage_bandwidth=storage_bandwidth, checkpoint_interval=checkpoint_interval, restart=restart,
                     facility=facility)
    tdp = float(base.cluster.gpu.tdp)
    power(power_model, tdp, 1.0, idle_fraction)  # reject a bad power model before searching
    at = _Estimates(source, sets, residuals, run)
    deadline_s = None if deadline is None else parse_duration(deadline)
    considered: list[int] = []
    notes: list[str] = []
    if deadline_s is None:
        chosen, mode = _on(base, gpus, at), "gpus"
    else:
        chosen, considered = _deadline(base, n_tokens, deadline_s, max_gpus, at, run, notes, progress)
        mode = "deadline"
    for n in curve:
        at(_gpu_count(n, "a curve point"))
    notes.append(_layouts_note(base))
    return Plan(source=source, tokens=n_tokens, mode=mode, deadline_s=deadline_s,
                runner_up=_runner_up(source, sets, chosen, residuals),
                price_per_gpu_hour=price_per_gpu_hour, chosen=chosen,
                power=power(power_model, tdp, chosen.busy, idle_fraction), considered=tuple(considered),
                scanned=at.scanned(), unlayable=at.unlayable(),
                global_batch=(f"kept at the spec's {int(base.train.global_batch)} sequences at every GPU count "
                              "(a hyper-parameter of the run, not of the cluster)"),
                residuals=at.residual_id, seconds=time.perf_counter() - start, notes=tuple(notes), run=run)


def _layouts_note(base: Spec) -> str:
    """What the layouts the plan chose from are."""
    return ("layouts: tp within the NVLink domain, sequence parallelism with tp, the spec's ZeRO stage, "
            f"pp <= {layouts.PP_LIMIT}; cp stays the spec's ({base.parallel.cp}); ranked by search's "
            "roofline composition, then predicted with residual models")


def _check_tokens(n_tokens: float, base: Spec) -> None:
    """``InputError`` unless the run trains at least one step's tokens."""
    if n_tokens < float(base.tokens_per_step):
        raise InputError(f"{format_count(n_tokens)} tokens is less than one step ({format_count(base.tokens_per_step)} "
                         f"tokens: global batch {base.train.global_batch} x seq_len {base.model.seq_len})",
                         hint="plan at least one step's tokens, or predict the step itself: llmp predict SPEC")


def _run_model(base: Spec, *, gpus: int | None, deadline: str | float | None, mttf: str | None,
               checkpoint: Mode | str, storage_bandwidth: str | float, checkpoint_interval: str | float | None,
               restart: str | float, facility: Facility) -> RunModel:
    """The run as it goes: failures (an MTTF given on the GPU count planned on, unless a deadline
    chooses it), checkpoints, relaunches and the facility."""
    measured_on = None if deadline is not None else int(base.world_size) if gpus is None else gpus
    return RunModel(failures=FailureModel.published() if mttf is None else FailureModel.from_mttf(
                        *parse_mttf(mttf, measured_on)),
                    checkpoint_mode=_mode(checkpoint), storage_bandwidth=parse_bandwidth(storage_bandwidth),
                    interval_s=None if checkpoint_interval is None else parse_duration(checkpoint_interval),
                    relaunch_s=parse_duration(restart, allow_zero=True, most=30 * DAY), facility=facility)


class _Estimates:
    """The plan at each GPU count asked for, each estimated once (None: no layout runs there), and
    the residual store the estimates used."""

    def __init__(self, source: str, sets: Sequence[str], residuals: object, run: RunModel) -> None:
        self.source, self.sets, self.residuals, self.run = source, sets, residuals, run
        self.seen: dict[int, Estimate | None] = {}
        self.residual_id = "roofline only (no residual models)"

    def __call__(self, n: int) -> Estimate | None:
        if n not in self.seen:
            found = _estimate(self.source, self.sets, n, self.residuals, self.run)
            self.seen[n] = None if found is None else found[0]
            if found is not None:
                self.residual_id = found[1]
        return self.seen[n]

    def scanned(self) -> tuple[Estimate, ...]:
        """The estimates made, by GPU count."""
        return tuple(e for n in sorted(self.seen) if (e := self.seen[n]) is not None)

    def unlayable(self) -> tuple[int, ...]:
        """The GPU counts no layout runs on."""
        return tuple(sorted(n for n, e in self.seen.items() if e is None))


def _on(base: Spec, gpus: int | None, at: _Estimates) -> Estimate:
    """The plan on ``gpus`` GPUs (None: the spec's own count), else ``InfeasibleError``."""
    count = int(base.world_size) if gpus is None else _gpu_count(gpus, "--gpus")
    chosen = at(count)
    if chosen is None:
        raise InfeasibleError(f"no layout of the searched space runs on {count} GPUs",
                              hint="try another --gpus "
                                   "(llmp search SPEC --gpus N lists why each layout is dropped)")
    return chosen


def _mode(value: object) -> Mode:
    try:
        return Mode(str(value))
    except ValueError:
        raise InputError(f"unknown checkpoint mode {value!r}",
                         hint=f"use one of: {', '.join(m.value for m in Mode)}") from None


def _deadline(base: Spec, tokens: float, deadline_s: float, max_gpus: int, at: _Estimates, run: RunModel,
              notes: list[str], progress: Progress | None = None) -> tuple[Estimate, list[int]]:
    """The first considered count, from the compute lower bound up, whose best layout finishes in
    time, failures and checkpoints included."""
    peak = _peak(base)
    total, _ = layouts.matmul_params(base)
    seq, batch = float(base.model.seq_len), float(base.train.global_batch)
    steps = tokens / (batch * seq)
    node = base.cluster.node
    tp_max = min(int(node.domain), int(base.model.heads))
    cp = int(base.parallel.cp)
    fastest_step = 6.0 * total * seq / (tp_max * cp * peak)
    if steps * fastest_step > deadline_s:
        raise InfeasibleError(
            f"no GPU count can train {format_count(tokens)} tokens in {deadline_s / DAY:.4g} days: with the global "
            f"batch kept at {int(batch)} sequences a step takes at least {fastest_step:.3g} s (one sequence's forward "
            f"and backward through every layer on {tp_max * cp} GPUs at the datasheet peak), so "
            f"{steps:.4g} steps take at least {steps * fastest_step / DAY:.4g} days",
            hint="allow more time, train fewer tokens, or raise train.global_batch (--set train.global_batch=N)")
    layable = int(batch) * tp_max * min(int(base.model.layers), layouts.PP_LIMIT) * cp
    limit = min(max_gpus, layable)
    lower = 6.0 * total * tokens / (peak * deadline_s)
    counts = [n for n in considered_counts(int(node.gpus_per_node), limit) if n >= lower]
    notes.append(f"deadline search: {len(counts)} counts considered from {counts[0] if counts else '-'} "
                 f"(compute lower bound {lower:,.0f} GPUs at 100% MFU) to {limit}")
    best_seen: tuple[float, int] | None = None
    for i, n in enumerate(counts):
        tick(progress, i, len(counts))
        est = at(n)
        if est is None:
            continue
        wall = run.goodput(est, tokens).wall_s[0]
        if wall <= deadline_s:
            return est, counts
        if best_seen is None or wall < best_seen[0]:
            best_seen = (wall, n)
    if not counts:
        raise InfeasibleError(f"no GPU count up to {limit} reaches the compute lower bound of {lower:,.0f} GPUs",
                              hint="raise --max-gpus, or allow more time")
    fastest = "no layout ran" if best_seen is None else (
        f"the fastest was {best_seen[0] / DAY:.4g} days on {best_seen[1]} GPUs")
    raise InfeasibleError(f"no GPU count considered ({counts[0]}..{counts[-1]}) trains {format_count(tokens)} tokens "
                          f"within {deadline_s / DAY:.4g} days: {fastest}",
                          hint="allow more time, raise --max-gpus, or raise train.global_batch")


