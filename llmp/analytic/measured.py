"""A machine's own collective measurements, served for that machine.

Where public measurements of a specific machine exist (the seed paper's Perlmutter NCCL samples,
Vidur's DGX A100/H100 profiles, nccl-tests sweeps of 8x H200 and 8x B200), a prediction for that
machine takes a collective's time from them rather than from NCCL's model: interpolated in
message size (log-log) within one measured series of the same collective, members per scale-up
domain and number of domains. Outside the measured sizes, or for a group shape nobody measured,
the model prices the call and the lookup says why (:class:`Served`).

The tables ship in ``llmp/hardware/collectives/`` (``tables.csv``, one row per point, and
``manifest.json``: each series' source as ``owner/repo@commit:path``, licence, the raw rows it
was thinned from and the spread of those rows around it). They are derived from the raw files by
``python benchmarks/collective_tables.py``: per series, the median time in each of at most 48
log-spaced size bins, made non-decreasing in size (pool-adjacent-violators in log time), so an
interpolated time never falls as the message grows.

A series serves a catalog node by id (``machines`` in the manifest), and only while the node's
links are the ones measured: the manifest records the achievable rates of the links the series
ran on, and a spec whose links differ (a what-if ``--set node.intra.bandwidth=...``, a cluster
with other NICs) is priced by the model. Series measured across nodes also name the inter-node
link they crossed (``network``): the seed's inter-node samples ran at ~1.2 GB/s per GPU (seed
README §8), which is the ``perlmutter_seed`` machine, not a healthy Slingshot network.

A served time is a measurement, so the residual stores do not correct it further; its band is the
spread of the raw rows around the table (``q``: the 90% quantile of |log(raw / table)|), and the
prediction's provenance names every op a table served and every one that fell outside (see
``llmp.compose.measured``). Only plain numbers are served: a sweep's arrays are served
element-wise (:func:`serve_arrays`), and SymPy expressions (sensitivity) take the model.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType
from typing import Any

import numpy as np

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import Collective, CollectiveKind, Tier

TABLES = "tables.csv"
MANIFEST = "manifest.json"
LEVEL = 0.9
"""The quantile of |log(raw / table)| a series' ``q`` is (its band's level)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Series:
    """One measured curve: a collective on one group shape of one machine, time against size."""

    key: str
    """The series' name in the manifest, e.g. ``seed/allreduce/2x4``."""
    kind: CollectiveKind
    per_domain: int
    """Members per scale-up domain (ranks per node)."""
    domains: int
    """Scale-up domains (nodes) the group spans."""
    network: str | None
    """The inter-node link the series crossed (catalog id); None inside one domain."""
    machines: tuple[str, ...]
    """Catalog nodes the series serves."""
    intra_bandwidth: float
    """Achievable intra-domain bytes/s per GPU of the links measured (the series serves only these)."""
    inter_bandwidth: float | None
    """Achievable bytes/s per node of the inter-node link crossed; None inside one domain."""
    log_size: np.ndarray
    log_seconds: np.ndarray
    q: float
    """Spread of the raw rows around the table: the 90% quantile of |log(raw / table)|."""
    rows: int
    """Raw measurements the table was thinned from; of two series covering a call, the one with more
    serves it (two sources of one machine can disagree: Vidur's and ml-engineering's DGX A100)."""
    source: str
    """Where the measurements come from (``owner/repo@commit:path``)."""

    @property
    def lo(self) -> float:
        return float(math.exp(self.log_size[0]))

    @property
    def hi(self) -> float:
        return float(math.exp(self.log_size[-1]))

    def covers(self, size: Any) -> Any:
        """``size`` lies within the measured sizes (up to rounding; bool, or a mask for arrays)."""
        ls = np.log(size)
        return (ls >= self.log_size[0] - 1e-9) & (ls <= self.log_size[-1] + 1e-9)

    def at(self, size: Any) -> Any:
        """Seconds at ``size`` bytes (inside ``[lo, hi]``), log-log linear between points."""
        return np.exp(np.interp(np.log(size), self.log_size, self.log_seconds))


@dataclass(frozen=True, kw_only=True, slots=True)
class Served:
    """What the measured tables say about one collective call."""

    seconds: float | None
    """The measured time; None when no series covers the call (the model prices it)."""
    series: str
    """The series that served it, or the one it fell outside of ("" if none exists)."""
    q: float = 0.0
    note: str = ""
    """Why the model priced it although the machine has measurements (outside the sizes, ...)."""


@functools.cache
def load() -> Mapping[tuple[str, CollectiveKind, int, int], tuple[Series, ...]]:
    """Every shipped series, keyed by (machine, collective, members per domain, domains)."""
    folder = files("llmp.hardware").joinpath("collectives")
    manifest = json.loads(folder.joinpath(MANIFEST).read_text(encoding="utf-8"))
    points: dict[str, list[tuple[float, float]]] = {}
    for row in csv.DictReader(io.StringIO(folder.joinpath(TABLES).read_text(encoding="utf-8"), newline="")):
        points.setdefault(row["series"], []).append((float(row["size_bytes"]), float(row["seconds"])))
    out: dict[tuple[str, CollectiveKind, int, int], list[Series]] = {}
    for key, meta in manifest["series"].items():
        pts = sorted(points[key])
        s = Series(key=key, kind=CollectiveKind(meta["collective"]), per_domain=int(meta["ranks_per_node"]),
                   domains=int(meta["nodes"]), network=meta["network"] or None, machines=tuple(meta["machines"]),
                   intra_bandwidth=float(meta["intra_bandwidth"]),
                   inter_bandwidth=None if meta["inter_bandwidth"] is None else float(meta["inter_bandwidth"]),
                   log_size=np.log([p[0] for p in pts]), log_seconds=np.log([p[1] for p in pts]),
                   q=float(meta["q"]), rows=int(meta["raw_rows"]), source=meta["source"])
        for m in s.machines:
            out.setdefault((m, s.kind, s.per_domain, s.domains), []).append(s)
    return MappingProxyType({k: tuple(v) for k, v in out.items()})


def machines() -> frozenset[str]:
    """Catalog nodes some table serves."""
    return frozenset(m for m, *_ in load())


def _shape(c: Collective) -> tuple[int, int] | None:
    """(members per domain, domains) of a numeric call; None if the numbers are not whole. A send/
    receive is one pair, inside a domain or across two, whatever the size of its group. Host copies
    (offloading) are no collective of a network: None."""
    if c.tier not in (Tier.INTRA, Tier.INTER):
        return None
    if c.kind is CollectiveKind.SEND_RECV:
        return (1, 2) if c.tier is Tier.INTER else (2, 1)
    n, r = float(c.group), float(c.ranks_per_node) if c.tier is Tier.INTER else float(c.group)
    if n != int(n) or r != int(r) or r <= 0 or n % r:
        return None
    return int(r), int(n // r)


def _same(value: Any, measured: float | None) -> Any:
    """The link value is the measured one (bool, or a mask for a sweep's arrays)."""
    if measured is None:
        return True
    return np.isclose(np.asarray(value, dtype=float), measured, rtol=1e-9, atol=0.0)


def _matching(c: Collective, links: Links) -> tuple[Series, ...]:
    if links.machine is None:
        return ()
    shape = _shape(c)
    if shape is None:
        return ()
    found = load().get((links.machine, c.kind, *shape), ())
    return tuple(s for s in found if (s.network is None or s.network == links.network)
                 and bool(_same(links.intra_bandwidth, s.intra_bandwidth))
                 and bool(_same(links.inter_bandwidth, s.inter_bandwidth)))


def serve(c: Collective, links: Links) -> Served | None:
    """The measured time of a numeric call ``c`` on ``links``, or why the model must price it; None
    when the machine has no series of this shape on these links."""
    series = _matching(c, links)
    if not series:
        return None
    size = float(c.bytes)
    inside = [s for s in series if s.covers(size)]
    if not inside:
        s = series[0]
        return Served(seconds=None, series=s.key, note=f"{size:.4g} B is outside the measured "
                      f"{s.lo:.4g}-{s.hi:.4g} B of {s.key}: NCCL's model prices it")
    s = max(inside, key=lambda x: x.rows)
    return Served(seconds=float(s.at(size)), series=s.key, q=s.q)


def serve_arrays(c: Collective, t: np.ndarray, links: Links) -> np.ndarray:
    """``t`` (model seconds of a sweep's calls, one per configuration) with every element a series
    covers replaced by the measured time (the same look-up as :func:`serve`, element-wise)."""
    if links.machine is None or links.machine not in machines() or c.tier not in (Tier.INTRA, Tier.INTER):
        return t
    size, n, r = (np.broadcast_to(np.asarray(v, dtype=float), t.shape) for v in (c.bytes, c.group, c.ranks_per_node))
    r = r if c.tier is Tier.INTER else n
    if c.kind is CollectiveKind.SEND_RECV:  # one pair (see _shape)
        r, n = (np.ones(t.shape), np.full(t.shape, 2.0)) if c.tier is Tier.INTER else (np.full(t.shape, 2.0),) * 2
    out = np.array(t, dtype=float, copy=True)
    for (m, kind, per, domains), series in load().items():
        if m != links.machine or kind is not c.kind:
            continue
        for s in sorted((s for s in series if s.network is None or s.network == links.network), key=lambda x: x.rows):
            mask = ((r == per) & (n == per * domains) & s.covers(size)
                    & _same(links.intra_bandwidth, s.intra_bandwidth) & _same(links.inter_bandwidth, s.inter_bandwidth))
            if np.any(mask):
                out[mask] = s.at(size[mask])
    return out
