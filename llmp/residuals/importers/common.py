"""What every importer shares: samples, input bookkeeping, device and node checks, the composite
split, the duplicate rule and the manifest of an import.

An importer turns each measured row of a public source into one or more :class:`Sample` s: an
``analytic.kernels`` ``Kernel`` (or ``Collective``) exactly as llmp's operator graph builds it,
with the measured seconds, where the row came from (``source_ref``) and what is special about its
time (``notes``). :func:`finish` merges duplicates, checks the device, and builds the manifest
``import.json`` (per input file: rows read, written, skipped per reason, duplicates merged).
Reading the sources' CSVs is ``tables.py``; writing the sample directory, ``sampledir.py``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmp.analytic.kernels import Collective, Family, Kernel
from llmp.dsl import catalog as resolved
from llmp.errors import InputError
from llmp.hardware import catalog
from llmp.hardware.spec import Device
from llmp.residuals import dataset, features

IMPORTER_VERSION = 3
"""Bumped whenever a mapping or a rule changes what an import writes."""

COUNTING = ("rows_read: CSV records read; values_read: measured times among them (a seed operator record holds "
            "F_dur and B_dur); skipped: measured times not imported, per reason; rows_written: sample rows per "
            "family/pass (a composite span gives two); duplicates_merged: sample rows dropped as re-measurements")

NOTE_TAGS: dict[str, str] = {
    "composite:dgrad+wgrad": "one measured backward span covered dgrad and wgrad; split between the two rows "
                             "in proportion to their llmp rooflines (both carry the pair's measured/roofline)",
    "composite:dgrad+wgrad+bias": "as composite:dgrad+wgrad, and the span also holds the bias-gradient reduction",
    "composite:2x": "one measured span covered two identical kernels; the row holds half of it",
    "derived_time": "time computed from a stored efficiency or FLOP/s figure (exact inversion of the source's "
                    "own formula), not stored as a time",
    "wall_clock": "host wall clock around the call (includes launch and synchronisation overhead)",
    "cuda_events": "CUDA events around the call (includes launch gaps inside the call)",
    "median_kernel": "the median single kernel of the op (an op lowered to several kernels is understated)",
    "profiler_span": "GPU span from the op's first to its last kernel (idle gaps between kernels included)",
    "kernel_sum": "sum of the op's kernel durations (gaps between kernels excluded)",
    "tuned": "best of many candidate kernels for this exact shape (autotuned)",
    "fewer_samples": "the source's trimmed mean was over fewer samples than its protocol (value not on the "
                     "0.2 us grid)",
    "slow_inter_node": "inter-node NCCL of a setup running far below the NICs' capability (kept by option)",
    "bias": "the GEMM adds a bias in its epilogue",
}
"""Meaning of the fixed tags of the ``note`` column; ``key=value`` tags (``backend=cudnn``,
``fp8=e4m3xe5m2``, ``grouped:groups=8``, ...) name the setup the row was measured in."""

_ID = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    """One imported measurement: what ran (an llmp kernel or collective) and how long it took."""

    item: Kernel | Collective
    seconds: float
    tag: str
    """What the source measured (``seed:linear1``, ``kernels:cudnn_frontend:cudnn``, ...), with any setup
    that makes it a different measurement of the same kernel; part of the row key, so two source ops
    that ran the same kernel stay two rows, while a re-measurement of one op is a duplicate."""
    source_ref: str
    input: int
    """Index of the input file (:class:`Input`) the row was read from."""
    notes: tuple[str, ...] = ()
    role: str = ""
    """GEMM rows: ``fwd``/``dgrad``/``wgrad`` (written to the ``variant`` column, as ``llmp sample`` does)."""
    width: int = 0
    """Innermost width of the tensor an elementwise kernel sees (the sampler's ``width``), 0 if unknown."""
    repeats: int | None = None
    """Timed samples behind the value, when the source says."""
    dtype: str = ""
    """Collectives: the payload dtype label (kernels carry theirs in the ``Kernel``)."""
    backend: str = "nccl"
    """Collectives: the communication backend."""
    span_s: float | None = None
    """The measured time of the source row (a composite row's share is ``seconds``); duplicates are
    compared on it, so both halves of a composite come from the same source row."""
    preference: tuple[Any, ...] = ()
    """Among duplicates the largest wins (e.g. the newest software); then the fastest span."""

    @property
    def family(self) -> str:
        return features.family_of(self.item)

    @property
    def is_kernel(self) -> bool:
        return isinstance(self.item, Kernel)

    @property
    def key(self) -> str:
        it = self.item
        if isinstance(it, Kernel):
            dims = ",".join(f"{n}={int(v)}" for n, v in it.dims)
            variant = self.role if it.family is Family.GEMM else it.variant
            return (f"{it.family.value}/{it.pass_.value}/{variant or '-'}/{it.dtype.value}/{dims}/w={self.width}"
                    f"/src={self.tag}")
        return (f"{it.kind.value}/{self.dtype}/g={int(it.group)}/rpn={int(it.ranks_per_node)}/{it.tier.value}"
                f"/bytes={int(it.bytes)}/src={self.tag}")

    def row(self) -> dict[str, object]:
        """The CSV row in the sample-file columns."""
        it = self.item
        common = {"key": self.key, "time_s": f"{self.seconds:.6e}", "p10_s": "", "p90_s": "",
                  "repeats": "" if self.repeats is None else self.repeats, "error": "",
                  "source_ref": self.source_ref, "note": ";".join(self.notes)}
        if isinstance(it, Kernel):
            variant = self.role if it.family is Family.GEMM else it.variant
            return {**common, "family": it.family.value, "pass": it.pass_.value, "variant": variant,
                    "dtype": it.dtype.value, **{n: int(v) for n, v in it.dims}, "width": self.width}
        return {**common, "kind": it.kind.value, "bytes": int(it.bytes), "group": int(it.group),
                "ranks_per_node": int(it.ranks_per_node), "tier": it.tier.value, "dtype": self.dtype,
                "backend": self.backend}


@dataclass(kw_only=True, slots=True)
class Input:
    """One input file: where it comes from and what became of its rows (filled while importing)."""

    name: str
    """The file's name (never its absolute path: the manifest must not depend on where data sits)."""
    source_ref: str
    """``owner/repo@commit:path`` of the file in its public repository."""
    licence: str
    rows_read: int = 0
    """CSV records read."""
    values_read: int = 0
    """Measured times among them (a seed operator record holds two, F_dur and B_dur; a Vidur mlp.csv
    record one per op)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Reason -> measured times not imported."""

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n


@dataclass(frozen=True, kw_only=True, slots=True)
class Collected:
    """What an importer read: samples (duplicates still in), its inputs, and the header record."""

    fmt: str
    device_id: str
    node_id: str | None
    meta: dict[str, Any]
    samples: tuple[Sample, ...]
    inputs: tuple[Input, ...]
    rules: tuple[str, ...]
    """The rules applied (mapping choices, fault handling), quoted in ``import.json``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Imported:
    """A finished import: unique rows sorted by key, and the manifest ``import.json`` holds."""

    collected: Collected
    samples: tuple[Sample, ...]
    manifest: dict[str, Any]


# ---------------------------------------------------------------------------------------------- ids


def check_id(value: str, what: str) -> str:
    if not _ID.match(value):
        raise InputError(f"invalid {what} id {value!r}", hint="catalog ids are lower-case words joined by '_'")
    return value


def in_catalog(device_id: str) -> bool:
    return device_id in catalog.catalog_ids()["gpu"]


def check_device(device_id: str, known: Iterable[str], fmt: str) -> str:
    """``device_id`` must be a catalog GPU or a device this source's table names (one that is about to
    join the catalog: its rows are written and ``import.json`` says the catalog lacks it)."""
    check_id(device_id, "device")
    known = set(known)
    if in_catalog(device_id) or device_id in known:
        return device_id
    ids = sorted(set(catalog.catalog_ids()["gpu"]) | known)
    raise InputError(f"unknown device id '{device_id}' for --format {fmt}",
                     hint=f"use a catalog GPU id or one this source maps to: {', '.join(ids)}")


def catalog_device(device_id: str) -> Device | None:
    """The catalog's ``Device`` for ``device_id``, or ``None`` when the catalog has no such GPU yet."""
    if not in_catalog(device_id):
        return None
    return dataset.catalog_device(device_id)


def check_node(node_id: str, device_id: str) -> str:
    """``node_id`` must be a catalog node holding ``device_id`` (the node ``dataset.load`` resolves)."""
    check_id(node_id, "node")
    nodes = catalog.catalog_ids()["node"]
    if node_id not in nodes:
        raise InputError(f"unknown node id '{node_id}'", hint=f"catalog nodes: {', '.join(nodes)}")
    gpu = resolved.node(node_id).gpu.id
    if gpu != device_id:
        raise InputError(f"catalog node '{node_id}' holds '{gpu}', not --device '{device_id}'",
                         hint="pass the node the measured GPUs sat in with --node-id")
    return node_id


# ---------------------------------------------------------------------------------------------- rules


def split_span(kernels_: Sequence[Kernel], span_s: float, device: Device) -> list[float]:
    """Share one measured span among the kernels that ran in it, in proportion to their llmp
    rooflines (``features.roofline_seconds``, the very roofline the fit divides by), so every row
    carries the span's measured/roofline ratio and the shares sum to the span."""
    roofs = [features.roofline_seconds(k, device)[1] for k in kernels_]
    total = sum(roofs)
    return [span_s * r / total for r in roofs]


def _best(group: list[Sample]) -> Sample:
    """The duplicate kept: the largest ``preference`` (e.g. the newest software), then the fastest
    span (interference only slows a kernel down), then the first source reference."""
    top = max(s.preference for s in group)
    return min((s for s in group if s.preference == top), key=lambda s: (s.span_s or s.seconds, s.source_ref))


def finish(c: Collected, ignored: Sequence[str] = ()) -> Imported:
    """Merge duplicates (one row per key), sort, check the selection, and build the manifest.
    ``ignored``: names of files a directory walk found that are not of the format (listed, not read)."""
    groups: dict[str, list[Sample]] = {}
    for s in c.samples:
        groups.setdefault(s.key, []).append(s)
    kept: list[Sample] = []
    merged: Counter[int] = Counter()
    for key in sorted(groups):
        group = groups[key]
        best = _best(group)
        kept.append(best)
        for s in group:
            if s is not best:
                merged[s.input] += 1
    if not kept:
        reasons: Counter[str] = Counter()
        for inp in c.inputs:
            reasons.update(inp.skipped)
        detail = "; ".join(f"{r}: {n}" for r, n in reasons.most_common(4))
        raise InputError(f"nothing to import for device '{c.device_id}' from {len(c.inputs)} input file(s)",
                         hint=detail or "the inputs hold no rows for this device")
    device = catalog_device(c.device_id)
    has_collectives = any(not s.is_kernel for s in kept)
    if has_collectives:
        assert c.node_id is not None, "collective rows need the node they ran on"
        check_node(c.node_id, c.device_id)
    manifest = _manifest(c, kept, merged, device)
    manifest["ignored_files"] = sorted(ignored)
    return Imported(collected=c, samples=tuple(kept), manifest=manifest)


def _family_pass(s: Sample) -> str:
    it = s.item
    return f"{it.family.value}/{it.pass_.value}" if isinstance(it, Kernel) else f"collective/{it.kind.value}"


def _manifest(c: Collected, kept: list[Sample], merged: Counter[int], device: Device | None) -> dict[str, Any]:
    written: dict[int, Counter[str]] = {}
    for s in kept:
        written.setdefault(s.input, Counter())[_family_pass(s)] += 1
    inputs = []
    order = sorted(range(len(c.inputs)), key=lambda i: (c.inputs[i].source_ref, c.inputs[i].name))
    for i in order:
        inp = c.inputs[i]
        inputs.append({"file": inp.name, "source_ref": inp.source_ref, "licence": inp.licence,
                       "rows_read": inp.rows_read, "values_read": inp.values_read,
                       "rows_written": dict(sorted(written.get(i, Counter()).items())),
                       "skipped": dict(sorted(inp.skipped.items())), "duplicates_merged": merged.get(i, 0)})
    totals: Counter[str] = Counter(_family_pass(s) for s in kept)
    skipped: Counter[str] = Counter()
    for inp in c.inputs:
        skipped.update(inp.skipped)
    notes: list[str] = []
    if device is None:
        notes.append(f"device '{c.device_id}' is not in the catalog yet: the rows are written, but "
                     "dataset.load (llmp fit) reads them only once the catalog has it")
    else:
        no_peak = Counter(s.item.dtype.value for s in kept
                          if isinstance(s.item, Kernel) and s.item.dtype not in device.peak_flops)
        for dtype, n in sorted(no_peak.items()):
            notes.append(f"{n} {dtype} rows are written although '{c.device_id}' has no {dtype} peak in the "
                         "catalog: dataset.load skips them until it has one")
    return {"importer": IMPORTER_VERSION, "format": c.fmt, "device_id": c.device_id,
            "device_in_catalog": device is not None,
            "node_id": c.node_id if any(not s.is_kernel for s in kept) else None, "counting": COUNTING,
            "rows_written": dict(sorted(totals.items())), "skipped": dict(sorted(skipped.items())),
            "duplicates_merged": sum(merged.values()), "rules": list(c.rules), "notes": notes, "inputs": inputs}
