"""Failures, checkpoints and restarts over a whole run: the effective training time ratio.

A job on N GPUs fails as a series system: any GPU's node failing stops it, so the job's failure
rate is N times one GPU's share of a node's rate, and its mean time to failure is
``MTTF(N) = 1 / (N x rate per GPU)`` (Kokolis et al., "Revisiting Reliability in Large-Scale
Machine Learning Research Clusters", HPCA 2025, arXiv:2410.21680, §V: failures per node-day, MTTF
inversely proportional to the job's nodes). The published fits, per 8-GPU node:

* Meta RSC-1 (A100, 16k GPUs): 6.50 failures per 1000 node-days; the paper's own projections
  from it are an MTTF of 1.8 h on 16,384 GPUs and 0.23 h on 131,072 GPUs (which this rate gives).
* Meta RSC-2 (A100, 8k GPUs): 2.34 failures per 1000 node-days.

The default rate is RSC-1's (the fit the paper projects with) and its band runs to RSC-2's. The
Llama 3 paper's count (Llama Team, "The Llama 3 Herd of Models", 2024, §3.3.4: 419 unexpected
interruptions in a 54-day snapshot on 16,384 H100s, 3.79 per 1000 node-days) sits between them;
it is used for comparison only (``benchmarks/``), never as a default, since it is the run the
benchmark compares against.

Checkpointing follows Young and Daly: with a checkpoint costing ``delta`` seconds of blocked
training, a restart costing ``R`` and exponential failures of mean ``M``, the expected wall time of
``T_s`` seconds of work checkpointed every ``tau`` seconds of work is

    T_w(tau) = M exp(R / M) (exp((tau + delta) / M) - 1) T_s / tau

(J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
Future Generation Computer Systems 22(3), 2006, its model of the expected wall time), minimised
near Daly's higher-order interval (ibid.), which refines Young's first-order ``sqrt(2 delta M)`` (J. W. Young, "A
first order approximation to the optimum checkpoint interval", CACM 17(9), 1974).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmp.errors import InputError

DAY = 86400.0
GPUS_PER_NODE_OF_FITS = 8
"""The published rates are per 8-GPU node (RSC-1 and RSC-2: DGX A100-class nodes; Llama 3: 8 H100
per server)."""

RSC1_PER_1000_NODE_DAYS = 6.50
"""Kokolis et al. 2025, §V, Meta RSC-1 (16k A100): failures per 1000 node-days."""
RSC2_PER_1000_NODE_DAYS = 2.34
"""Kokolis et al. 2025, §V, Meta RSC-2 (8k A100): failures per 1000 node-days."""
LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_GPUS = 419, 54.0, 16384
"""Llama 3 paper §3.3.4: unexpected interruptions in the 54-day snapshot on 16,384 H100s (466 in all,
47 planned). For comparison only."""


def per_gpu_day(per_1000_node_days: float) -> float:
    """A rate per 1000 node-days of 8-GPU nodes as failures per GPU-day."""
    return per_1000_node_days / 1000.0 / GPUS_PER_NODE_OF_FITS


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureModel:
    """Failures per GPU-day (point, low, high) and where the numbers come from."""

    rate: tuple[float, float, float]
    """Failures per GPU-day: point, fewest, most."""
    source: str

    @classmethod
    def published(cls) -> FailureModel:
        """Kokolis et al.'s RSC-1 fit, banded down to RSC-2's."""
        return cls(rate=(per_gpu_day(RSC1_PER_1000_NODE_DAYS), per_gpu_day(RSC2_PER_1000_NODE_DAYS),
                         per_gpu_day(RSC1_PER_1000_NODE_DAYS)),
                   source=(f"Kokolis et al., HPCA 2025: {RSC1_PER_1000_NODE_DAYS} failures per 1000 node-days "
                           f"(Meta RSC-1), band down to {RSC2_PER_1000_NODE_DAYS} (RSC-2); MTTF = 1 / (GPUs x "
                           "rate per GPU)"))

    @classmethod
    def from_mttf(cls, mttf_s: float, gpus: int) -> FailureModel:
        """A user's MTTF of ``mttf_s`` seconds measured on ``gpus`` GPUs (no band of its own)."""
        if not (math.isfinite(mttf_s) and mttf_s > 0) or gpus < 1:
            raise InputError(f"an MTTF needs a positive duration and GPU count, got {mttf_s!r} s on {gpus!r} GPUs")
        rate = DAY / mttf_s / gpus
        return cls(rate=(rate, rate, rate),
                   source=f"--mttf: {mttf_s / 3600:.4g} h on {gpus} GPUs, scaled as 1 / GPUs")

    def mttf_s(self, gpus: int) -> tuple[float, float, float]:
        """The job's mean time to failure on ``gpus`` GPUs (point, longest, shortest), seconds."""
        return tuple(DAY / (gpus * r) for r in self.rate)  # type: ignore[return-value]

    def failures_per_day(self, gpus: int) -> tuple[float, float, float]:
        return tuple(gpus * r for r in self.rate)  # type: ignore[return-value]


def young_interval(delta_s: float, mttf_s: float) -> float:
    """Young (1974): the checkpoint interval sqrt(2 delta M), first order in delta / M."""
    return math.sqrt(2.0 * delta_s * mttf_s)


def daly_interval(delta_s: float, mttf_s: float) -> float:
    """Daly (2006): the work between checkpoints that minimises the expected wall time,
    sqrt(2 delta M) (1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9) - delta for delta < 2M, else M."""
    if delta_s >= 2.0 * mttf_s:
        return mttf_s
    x = delta_s / (2.0 * mttf_s)
    return math.sqrt(2.0 * delta_s * mttf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


def expected_wall_s(work_s: float, interval_s: float, delta_s: float, restart_s: float, mttf_s: float) -> float:
    """Daly (2006): expected wall time of ``work_s`` seconds of failure-free work,
    checkpointed every ``interval_s`` seconds of work at ``delta_s`` each, restarted in
    ``restart_s`` after each exponentially distributed failure of mean ``mttf_s``."""
    if interval_s <= 0:
        raise InputError(f"the checkpoint interval must be positive, got {interval_s:g} s")
    return mttf_s * math.exp(restart_s / mttf_s) * math.expm1((interval_s + delta_s) / mttf_s) * work_s / interval_s


@dataclass(frozen=True, kw_only=True, slots=True)
class Goodput:
    """A run as it really goes: failures, checkpoints, restarts (each (point, low, high) where the
    low end is the fast run: fewest failures, fastest step)."""

    work_s: tuple[float, float, float]
    """Failure-free, checkpoint-free wall clock (the plan's)."""
    wall_s: tuple[float, float, float]
    """Expected wall clock with checkpoints, failures, restarts and lost work."""
    mttf_s: tuple[float, float, float]
    failures: tuple[float, float, float]
    """Expected failures over the run (wall time / MTTF)."""
    interval_s: tuple[float, float, float]
    """Work between checkpoints (Daly's optimum unless given)."""
    interval_rule: str
    checkpoint_s: float
    """Training blocked per checkpoint (delta)."""
    restart_s: float
    """Per failure before training resumes: relaunch and checkpoint load (R), plus, for an
    asynchronous save, the write in flight that a failure discards."""
    failure_model: str

    @property
    def ettr(self) -> tuple[float, float, float]:
        """Effective training time ratio: failure-free work over expected wall time (point, band)."""
        point = self.work_s[0] / self.wall_s[0]
        low = self.work_s[2] / self.wall_s[2]
        high = self.work_s[1] / self.wall_s[1]
        # The band holds the point (its ends can meet it, and must not miss it by a rounding).
        return point, min(low, high, point), max(low, high, point)


def goodput(work_s: tuple[float, float, float], *, gpus: int, failures: FailureModel, checkpoint_s: float,
            restart_s: float, interval_s: float | None = None) -> Goodput:
    """Expected wall clock of ``work_s`` (point, low, high) on ``gpus`` GPUs. ``interval_s``:
    seconds of work between checkpoints (None: Daly's optimum for each end of the band)."""
    mttf = failures.mttf_s(gpus)
    # The fast end pairs the shortest work with the fewest failures (longest MTTF), the slow end the
    # longest work with the most.
    pairs = ((work_s[0], mttf[0]), (work_s[1], mttf[1]), (work_s[2], mttf[2]))
    intervals = tuple(interval_s if interval_s is not None else daly_interval(checkpoint_s, m) for _, m in pairs)
    walls = tuple(expected_wall_s(w, t, checkpoint_s, restart_s, m) for (w, m), t in zip(pairs, intervals))
    rule = ("given (--checkpoint-interval)" if interval_s is not None
            else "Daly 2006's optimum for the checkpoint cost and MTTF")
    return Goodput(work_s=work_s, wall_s=walls, mttf_s=mttf,  # type: ignore[arg-type]
                   failures=tuple(w / m for w, (_, m) in zip(walls, pairs)),  # type: ignore[arg-type]
                   interval_s=intervals, interval_rule=rule, checkpoint_s=checkpoint_s,  # type: ignore[arg-type]
                   restart_s=restart_s, failure_model=failures.source)
