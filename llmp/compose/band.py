"""The step-time band: an interval at a stated level (80% unless asked), from measured errors
propagated through the same composition as the point prediction.

Where the width comes from:

1. **Ops a residual store serves.** The store gives each item an interval [low, high] around its
   factor at the store's level (``Correction.level``, 1 - alpha: CV+ conformal for per-device
   groups, the quantile of held-out-GPU errors for cross-GPU units; 90% for every shipped store).
   It is read as a normal error in log space, ``sigma = log(high / factor) / z``, ``z`` the standard
   normal quantile at ``(1 + level) / 2`` (1.645 at 90%), so a band at any other level follows from
   the same sigma without refitting the store.
2. **Ops no store serves.** As wide as the bare analytic time's measured error for the family:
   ``roofline_error`` in the shipped stores' manifests (the 90% quantile of |log(measured /
   analytic)| on the public operator measurements, written by ``benchmarks/fit_public.py``), from
   the device's own store, else the cross-GPU store (pooled over GPUs, each weighted equally); a
   family no GPU measured (the optimizer, reduce-scatter, ...) takes the widest measured family of
   its kind (kernel or collective). The band names these families (``uncovered``).
3. **What the ops cannot see** (overlap, the stack's and the host's per-step work): the
   *composition term*, a two-piece normal in log space with its own width below and above,
   estimated by ``benchmarks/bands.py`` (:mod:`~llmp.compose.composition_estimate`) on the
   published runs in ``validation/`` with leave-one-source-out cross-validation, and shipped in
   ``composition_term.json`` with that provenance. It widens the band; the point prediction never reads it.

Correlation: the same kernel runs in every layer and microbatch, so its error is shared across the
step, not independent: each family (kernel family or collective kind) draws one log error for all
of its ops; families are independent of each other and of the composition term (an assumption,
stated here and in docs/bands.md).

Propagation: ``DRAWS`` Latin-hypercube draws (one column per family and one for the composition
term, seeded, so a band is reproducible) scale every op's time by ``exp(sigma_op * z_family)``; the
step is composed once on arrays (the schedule, the overlaps and the critical rank follow each draw),
multiplied by ``exp(composition draw)``, and the band is the equal-tailed quantile pair at the
level. Each term's *share* is its first-order part of the variance of log step time over the draws
(normalised to sum to 1), so ``--json`` says where the width comes from.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from statistics import NormalDist
from typing import Any

import numpy as np

from llmp.analytic.correction import Correction
from llmp.analytic.kernels import Collective, CollectiveKind
from llmp.analytic.op import OpGraph, Scope
from llmp.errors import InputError, ResidualSchemaError
from llmp.residuals import store
from llmp.residuals.store import OUT_OF_DOMAIN_WIDEN
from llmp.stacks.host import Spread

LEVEL = 0.8
"""The band's default level: the share of real steps it should hold."""
DRAWS = 256
"""Monte Carlo draws per band (Latin hypercube: the 10% and 90% quantiles settle within ~1%)."""
SEED = 0
TERM_FILE = "composition_term.json"
TERM_FORMAT = "llmp-composition-term"


def z_of(level: float) -> float:
    """Standard normal quantile of a two-sided interval at ``level`` (1.645 at 0.9, 1.2816 at 0.8)."""
    return NormalDist().inv_cdf((1 + level) / 2)


def check_level(level: float) -> float:
    """``level`` if it is a usable band level, else ``InputError``."""
    if not (isinstance(level, (int, float)) and 0.5 <= float(level) < 1):
        raise InputError(f"band level {level!r} must lie in [0.5, 1)", hint="e.g. 0.8 for an 80% band")
    return float(level)


@functools.cache
def _scores(draws: int) -> np.ndarray:
    return np.asarray([NormalDist().inv_cdf((i + 0.5) / draws) for i in range(draws)])


@functools.cache
def normal_draws(draws: int, columns: int, seed: int = SEED) -> np.ndarray:
    """``(draws, columns)`` standard normal draws, each column a Latin hypercube (every stratum of
    probability ``1 / draws`` once, at its midpoint) in a seeded random order (read-only: the same
    array for the same arguments)."""
    rng = np.random.default_rng(seed)
    scores = _scores(draws)
    out = np.stack([scores[rng.permutation(draws)] for _ in range(columns)], axis=1) if columns else \
        np.zeros((draws, 0))
    out.flags.writeable = False
    return out


def two_piece(z: np.ndarray, below: float, above: float) -> np.ndarray:
    """A two-piece normal from standard normal draws: width ``below`` under 0, ``above`` over it."""
    return np.where(z < 0, below * z, above * z)


# -- the composition term ----------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class CompositionTerm:
    """What the operators cannot see, as a two-piece normal error of log step time."""

    below: float
    """Log-space width of the lower half (steps faster than composed)."""
    above: float
    """Log-space width of the upper half (steps slower than composed)."""
    within: float
    """Log-space spread of one stack on one cluster around its own systematic error: what remains
    after ``llmp calibrate`` has learnt that error from enough of the user's runs."""
    source: str
    """How and on what it was estimated (the split is named)."""
    sources: tuple[str, ...] = ()
    """The validation sources it was estimated on."""

    def to_dict(self) -> dict[str, Any]:
        return {"format": TERM_FORMAT, "version": 1, "below": self.below, "above": self.above,
                "within": self.within, "source": self.source, "sources": list(self.sources)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> CompositionTerm:
        """Strict reading: every field present, widths finite and non-negative."""
        def fail(what: str) -> ResidualSchemaError:
            return ResidualSchemaError(f"{where}: {what}",
                                       hint="rebuild it: python benchmarks/bands.py --ship")
        if d.get("format") != TERM_FORMAT or d.get("version") != 1:
            raise fail(f"not a {TERM_FORMAT} version 1 file")
        widths = {}
        for key in ("below", "above", "within"):
            v = d.get(key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise fail(f"{key} must be a finite non-negative number, got {v!r}")
            widths[key] = float(v)
        if not isinstance(d.get("source"), str) or not isinstance(d.get("sources"), list):
            raise fail("source (text) and sources (list) are required")
        return cls(**widths, source=d["source"], sources=tuple(str(s) for s in d["sources"]))


@functools.cache
def composition_term() -> CompositionTerm:
    """The shipped composition term (``llmp/compose/composition_term.json``)."""
    path = files("llmp.compose").joinpath(TERM_FILE)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ResidualSchemaError(f"cannot read the shipped composition term {path}: {err}",
                                  hint="reinstall llmp, or rebuild it: python benchmarks/bands.py --ship") from None
    return CompositionTerm.from_dict(data, str(path))


# -- per-family widths -------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Width:
    """One measured error width: a log-space half-width at a level, and where it was measured."""

    q: float
    level: float
    source: str

    @property
    def sigma(self) -> float:
        return self.q / z_of(self.level)


def _table(manifest: Mapping[str, Any], where: str) -> dict[str, Width]:
    entries = manifest.get("roofline_error")
    if entries is None:
        return {}
    out = {}
    try:
        for family, e in dict(entries).items():
            q, level, n = float(e["q"]), float(e["level"]), int(e["n"])
            if not (math.isfinite(q) and q >= 0 and 0 < level < 1 and n > 0):
                raise ValueError(f"{family}: q {q}, level {level}, n {n}")
            machines = ", ".join(e.get("machines", [])) or "unnamed machines"
            out[str(family)] = Width(q=q, level=level, source=(
                f"the roofline's measured error on {n} public {family} rows ({machines}; {where})"))
    except (KeyError, TypeError, ValueError) as err:
        raise ResidualSchemaError(f"{where}: manifest field roofline_error is malformed ({err})",
                                  hint="rebuild the stores: python benchmarks/fit_public.py --ship") from None
    return out


@functools.cache
def roofline_widths(device_id: str) -> dict[str, Width]:
    """Family -> the roofline's measured error: the device's own shipped store, then the shipped
    cross-GPU store (module docstring, item 2)."""
    out: dict[str, Width] = {}
    for name in (store.CROSS_GPU, device_id):  # the device's own table overrides the pooled one
        manifest = store.shipped_manifest(name)
        if manifest is not None:
            where = "cross-GPU store" if name == store.CROSS_GPU else f"store shipped for {name}"
            out |= _table(manifest, where)
    return out


def _unmeasured(widths: Mapping[str, Width], family: str, collective: bool) -> Width:
    """A family no GPU measured: the widest measured family of its kind."""
    kinds = {k.value for k in CollectiveKind}
    kin = {f: w for f, w in widths.items() if (f in kinds) == collective}
    if not kin:
        raise ResidualSchemaError("no shipped store records the roofline's measured error (roofline_error)",
                                  hint="rebuild the stores: python benchmarks/fit_public.py --ship")
    widest = max(kin, key=lambda f: kin[f].sigma)
    w = kin[widest]
    return Width(q=w.q, level=w.level, source=(f"no public measurement of {family}: as wide as the widest "
                                               f"measured {'collective' if collective else 'kernel family'} "
                                               f"({widest}: {w.source})"))


@dataclass(frozen=True, kw_only=True, slots=True)
class OpErrors:
    """Each op's log-space error sigma and the family whose shared draw it takes."""

    sigma: np.ndarray
    column: np.ndarray
    """Index into ``families`` per op."""
    families: tuple[str, ...]
    covered: tuple[bool, ...]
    """Per family: every op of it was corrected by a store."""
    sources: tuple[str, ...]
    """Per family: where its width comes from."""
    weight: np.ndarray
    """Per op: how many times its time counts in a step (its count, times the layers of a chunk
    for a per-layer op), to weigh its error within its family."""
    widen: np.ndarray
    """Per op: how many times wider its interval is for lying outside its store's domain
    (``llmp.residuals.store.OUT_OF_DOMAIN_WIDEN``, else 1)."""

    def widened(self, times: Sequence[float]) -> dict[str, float]:
        """Per family: the part of its variance that is the out-of-domain widening, its ops'
        errors weighed by their time in the step (``1 - (sum w t sigma / widen)^2 / (sum w t sigma)^2``)."""
        w = np.asarray(times, float) * self.weight * self.sigma
        out = {}
        for i, f in enumerate(self.families):
            mine = self.column == i
            total = float(w[mine].sum())
            out[f] = 1.0 - (float((w[mine] / self.widen[mine]).sum()) / total) ** 2 if total > 0 else 0.0
        return out


def op_errors(graph: OpGraph, corr: Correction, device_id: str) -> OpErrors:
    """Per-op sigma from the store's interval, or from the roofline's error where none serves."""
    n = len(graph.ops)
    families = sorted({op.family for op in graph.ops})
    index = {f: i for i, f in enumerate(families)}
    column = np.asarray([index[op.family] for op in graph.ops], dtype=np.int64)
    factor = np.asarray(corr.factor, float)
    half = np.maximum(np.log(np.asarray(corr.high, float) / factor), np.log(factor / np.asarray(corr.low, float)))
    sigma = half / z_of(corr.level)
    covered = np.asarray(corr.covered, bool)
    roof = roofline_widths(device_id) if not covered.all() else {}
    fam_covered, fam_source = [], []
    for f in families:
        ops = [i for i in range(n) if column[i] == index[f]]
        if all(covered[i] for i in ops):
            fam_covered.append(True)
            fam_source.append(f"the residual store's {corr.level:.0%} interval (sigma = log(high/factor) / "
                              f"{z_of(corr.level):.3f})")
            continue
        collective = isinstance(graph.ops[ops[0]].work, Collective)
        w = roof.get(f) or _unmeasured(roof, f, collective)
        for i in ops:
            if not covered[i]:
                sigma[i] = w.sigma
        fam_covered.append(False)
        fam_source.append(w.source)
    per_layer = float(graph.layers_per_chunk)
    weight = np.asarray([float(op.count) * (per_layer if op.scope is Scope.LAYER else 1.0) for op in graph.ops])
    ood = np.zeros(n, bool) if corr.out_of_domain is None else np.asarray(corr.out_of_domain, bool) & covered
    return OpErrors(sigma=sigma, column=column, families=tuple(families), covered=tuple(fam_covered),
                    sources=tuple(fam_source), weight=weight, widen=np.where(ood, OUT_OF_DOMAIN_WIDEN, 1.0))


# -- the band ----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, slots=True)
class Term:
    """One source of the band's width."""

    name: str
    kind: str
    """``store`` (a family a store serves), ``roofline`` (a family none serves), ``host`` (the run's
    host CPU against the measuring one), ``composition``, ``calibration`` (a factor ``llmp
    calibrate`` fitted) or ``residual`` (a calibrated stack's run-to-run spread)."""
    sigma_below: float
    sigma_above: float
    share: float
    """First-order share of the variance of log step time (all terms sum to 1)."""
    source: str
    out_of_domain: float = 0.0
    """The part of ``share`` that is the out-of-domain widening of the family's store intervals
    (``OpErrors.widened``); 0 for every other kind."""

    @property
    def part(self) -> str:
        """Which of the band's parts (``Band.parts``) the term's width belongs to."""
        return PARTS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "sigma_below": self.sigma_below,
                "sigma_above": self.sigma_above, "share": self.share, "out_of_domain": self.out_of_domain,
                "source": self.source}


PARTS = {"store": "operator_intervals", "roofline": "roofline_errors", "host": "host", "composition": "composition",
         "calibration": "calibration", "residual": "run_to_run"}
"""The band's parts by term kind: the residual stores' intervals (with ``out_of_domain``, their
widening carved out), the roofline's measured error where no store serves, the host CPU, the
composition term, a calibration's factors and its run-to-run spread."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Band:
    """The step-time band and where its width comes from."""

    low: float
    high: float
    level: float
    draws: int
    method: str
    """``zero-shot`` (stores, roofline errors, composition term) or ``calibrated``."""
    terms: tuple[Term, ...]
    uncovered: tuple[str, ...]
    """Families no residual store served (their width is the roofline's measured error)."""
    log_draws: np.ndarray | None = None
    """Log step time of each draw before the composition term (``zero-shot``; for
    :func:`estimate_term`)."""
    term_draws: np.ndarray | None = None
    """The standard normal draws the composition term was taken from, aligned with ``log_draws``."""

    @classmethod
    def point(cls, t: float, level: float) -> Band:
        return cls(low=t, high=t, level=level, draws=0, method="none", terms=(), uncovered=())

    def describe(self) -> list[str]:
        """Lines for the prediction's table: the level, the terms that make the width, and the
        families no store served."""
        head = f"band ({self.level:.0%}, {self.method}"
        if not self.terms:
            return [head + "): none"]
        ranked = sorted(self.terms, key=lambda t: -t.share)
        shown = ", ".join(f"{t.name} {t.share:.0%}" for t in ranked if t.share >= 0.005) or ranked[0].name
        lines = [head + f", {self.draws} draws): width from {shown}"]
        if self.uncovered:
            lines.append(f"  no residual store serves {', '.join(self.uncovered)}: as wide as the roofline's "
                         "measured error for them")
        return lines

    @property
    def parts(self) -> dict[str, float]:
        """The share of the band's width from each part (``PARTS``, and ``out_of_domain``: the
        stores' widening outside their domains); they sum to 1 as the terms do."""
        out: dict[str, float] = {}
        for t in self.terms:
            out[t.part] = out.get(t.part, 0.0) + t.share * (1.0 - t.out_of_domain)
            if t.out_of_domain > 0:
                out["out_of_domain"] = out.get("out_of_domain", 0.0) + t.share * t.out_of_domain
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": self.level, "draws": self.draws,
                "method": self.method, "uncovered": list(self.uncovered), "parts": self.parts,
                "terms": [t.to_dict() for t in sorted(self.terms, key=lambda t: -t.share)]}


def compose_draws(compose: Callable[..., Any], times: Sequence[float], sigma: np.ndarray,
                  z: np.ndarray, host: np.ndarray | None = None) -> np.ndarray:
    """Step time per draw: ``compose`` (per-op times -> step time) on each op's time scaled by
    ``exp(sigma[i] z[:, i])`` (``z``: one column per op); an op of no error keeps its number;
    ``host``: each draw's factor on the host thread's costs (``compose(times, host_scale)``)."""
    err = sigma > 0
    scaled: list[Any] = list(times)
    rows = np.asarray(times, float)[err, None] * np.exp(sigma[err, None] * z[:, err].T)
    for i, row in zip(np.flatnonzero(err), rows):
        scaled[i] = row
    return np.asarray(compose(scaled) if host is None else compose(scaled, host), dtype=float)


def shares(log_t: np.ndarray, columns: Mapping[str, np.ndarray]) -> dict[str, float]:
    """First-order share of each named draw column in the variance of ``log_t`` (sums to 1)."""
    names = list(columns)
    z = np.stack([columns[k] for k in names], axis=1) if names else np.zeros((len(log_t), 0))
    z = z - z.mean(axis=0)
    var = (z * z).mean(axis=0)
    cov = (log_t - log_t.mean()) @ z / len(log_t)
    parts = {k: float(c) ** 2 / float(v) if v > 0 else 0.0 for k, c, v in zip(names, cov, var)}
    total = sum(parts.values())
    return {k: (v / total if total > 0 else 0.0) for k, v in parts.items()}


def quantiles(log_y: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(log_y, [(1 - level) / 2, (1 + level) / 2])
    return float(math.exp(lo)), float(math.exp(hi))


def zero_shot(compose: Callable[..., Any], times: Sequence[float], errors: OpErrors,
              term: CompositionTerm, level: float = LEVEL, draws: int = DRAWS, host: Spread | None = None) -> Band:
    """The uncalibrated band (module docstring): family draws through ``compose``, the host
    thread's speed (``host``: its spread against the measuring CPU; None where the device is its
    own host), then the composition term."""
    level = check_level(level)
    z = normal_draws(draws, len(errors.families) + 2)
    eta_host = two_piece(z[:, -2], host.below, host.above) if host is not None else None
    log_t = np.broadcast_to(np.log(compose_draws(compose, times, errors.sigma, z[:, errors.column],
                                                 None if eta_host is None else np.exp(eta_host))),
                            (draws,)).copy()  # no error: one value
    return with_term(log_t, z, errors, term, level, host, eta_host, widened=errors.widened(times))


def with_term(log_t: np.ndarray, z: np.ndarray, errors: OpErrors, term: CompositionTerm, level: float,
              host: Spread | None, eta_host: np.ndarray | None, *, widened: Mapping[str, float]) -> Band:
    """The band from the draws ``log_t`` (taken with the family columns of ``z`` and, where there
    is a host, its column ``-2`` as ``eta_host``) and ``term`` (drawn from the last column);
    ``widened``: per family, the part of its width that is out-of-domain widening."""
    eta = two_piece(z[:, -1], term.below, term.above)
    log_y = log_t + eta
    low, high = quantiles(log_y, level)
    widths = {f: float(errors.sigma[errors.column == i].max()) for i, f in enumerate(errors.families)}
    columns = {**{f: z[:, i] for i, f in enumerate(errors.families) if widths[f] > 0}, "composition": eta}
    if eta_host is not None:
        columns["host"] = eta_host
    share = shares(log_y, columns)
    terms = []
    for i, f in enumerate(errors.families):
        if widths[f] > 0:
            terms.append(Term(name=f, kind="store" if errors.covered[i] else "roofline", sigma_below=widths[f],
                              sigma_above=widths[f], share=share[f], source=errors.sources[i],
                              out_of_domain=widened[f]))
    if host is not None:
        terms.append(Term(name="host", kind="host", sigma_below=host.below, sigma_above=host.above,
                          share=share["host"], source=host.source))
    terms.append(Term(name="composition", kind="composition", sigma_below=term.below, sigma_above=term.above,
                      share=share["composition"], source=term.source))
    uncovered = tuple(f for f, c in zip(errors.families, errors.covered) if not c)
    return Band(low=low, high=high, level=level, draws=len(log_t), method="zero-shot", terms=tuple(terms),
                uncovered=uncovered, log_draws=log_t, term_draws=z[:, -1])

