"""Sample directories -> ``Observation`` objects: kernels, collectives and their catalog devices.

A sample file names its device by catalog id in its header (``device_id``; ``--device-id``
overrides, and is required when the sampler did not recognise the device). The device's spec
numbers come from the catalog resolver (:mod:`llmp.dsl.catalog`), so the features and the roofline
of a sample use exactly the numbers ``llmp predict`` will use for that device.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import DIMS, VARIANTS, Collective, CollectiveKind, Family, Kernel, Pass, Tier
from llmp.dsl import catalog
from llmp.errors import InputError, LlmpError
from llmp.hardware.catalog import canonical, catalog_ids
from llmp.hardware.spec import Device, Dtype, Node
from llmp.residuals import samplefile
from llmp.residuals.model import Observation

_ROLE_FAMILIES = {Family.GEMM}
"""Families whose sample ``variant`` column is not a kernel variant: a GEMM's is its role
(``fwd``/``dgrad``/``wgrad``), and the analytic graph's GEMMs have none."""
_KERNEL_COLUMNS = ("family", "pass", "dtype", "time_s")
_COLLECTIVE_COLUMNS = ("kind", "bytes", "group", "ranks_per_node", "tier", "time_s")
DEFAULT_NODE = {"cpu": "cpu_host"}
"""Catalog node whose links the collectives of a device's samples crossed, when not recorded."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadReport:
    observations: tuple[Observation, ...]
    devices: tuple[Device, ...]
    files: tuple[str, ...]
    skipped: dict[str, int]
    """Reason -> rows skipped (failed cases, dtypes without a peak on the device, truncated lines)."""


def catalog_device(device_id: str) -> Device:
    """The catalog device ``device_id`` of a sample file. A retired id (``gh200``, in sample files
    taken before the rename) names its canonical device."""
    if canonical(device_id) not in catalog_ids()["gpu"]:
        raise InputError(f"'{device_id}' is not a catalog device",
                         hint=f"catalog devices: {', '.join(catalog_ids()['gpu'])}")
    return _resolved(catalog.gpu, device_id, "device")


def catalog_node(device_id: str, node_id: str) -> Node:
    """The catalog node ``node_id`` that collective samples of ``device_id`` ran on."""
    device = catalog_device(device_id)
    known = catalog_ids()
    if node_id not in known["node"]:
        hint = (f"'{node_id}' is a cluster; pass the node it is built of (see llmp/hardware/catalog/{node_id}.llmp)"
                if node_id in known["cluster"] else f"catalog nodes: {', '.join(known['node'])}")
        raise InputError(f"'{node_id}' is not a catalog node", hint=hint)
    node = _resolved(catalog.node, node_id, "node")
    if node.gpu.id != device.id:
        raise InputError(f"catalog node '{node_id}' holds device '{node.gpu.id}', but the samples were taken on "
                         f"'{device.id}'", hint="pass the node of the sampled device with --node-id")
    return node


def _resolved(get: Callable[[str], Any], ident: str, kind: str) -> Any:
    try:
        return get(ident)
    except LlmpError as err:
        raise InputError(f"cannot resolve catalog {kind} '{ident}': {err.message}",
                         hint="pass a catalog id with --device-id / --node-id (see llmp/hardware/catalog/)") from None


def node_links(node: Node) -> Links:
    """The links of a one-node run on ``node`` (its own inter link: no cluster override), at the
    achievable rates the analytic collective model uses."""
    return Links.between(node, node.inter)


E = TypeVar("E", bound=Enum)


def _choice(enum: type[E], text: str, column: str) -> E:
    try:
        return enum(text)
    except ValueError:
        raise ValueError(f"{column} {text!r} is not one of {', '.join(e.value for e in enum)}") from None


MAX_DIM = 2**53
"""Largest kernel dimension a row may carry: beyond it float features lose whole numbers, and no
tensor on any device comes near it."""


def _count(row: dict[str, str], column: str, minimum: int = 1) -> int:
    if column not in row:
        raise ValueError(f"column {column!r} is missing")
    text = row[column]
    try:
        value = int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{column} {text!r} is not a whole number") from None
    if value < minimum:
        raise ValueError(f"{column} {value} must be at least {minimum}")
    if value > MAX_DIM:
        raise ValueError(f"{column} {value} is beyond any kernel's size (at most 2^53)")
    return value


def kernel_of(row: dict[str, str]) -> Kernel:
    """The ``Kernel`` a kernel-sample row timed (``ValueError`` naming the bad column otherwise).

    The ``variant`` column is carried into the kernel for every family (elementwise function,
    optimizer, and whatever variants a family gains), except the GEMM role, which maps to a
    plain fwd/bwd GEMM as the analytic graph has them.
    """
    family = _choice(Family, row.get("family", ""), "family")
    if family is Family.ATTENTION:
        # Sample files written before llmp's attention kernel had a value head dim and a window
        # timed full attention with one head dim.
        row = {"head_dim_v": row.get("head_dim", ""), "window": row.get("seq_kv", ""), **row}
    dims = {name: _count(row, name, 0 if name in ("causal", "flash", "rms") else 1) for name in DIMS[family]}
    variant = "" if family in _ROLE_FAMILIES else row.get("variant", "")
    variant = "" if variant == "-" else variant
    if variant not in VARIANTS[family]:
        raise ValueError(f"variant {variant!r}: {family.value} has no such variant "
                         f"(known: {', '.join(repr(v) for v in VARIANTS[family])})")
    return Kernel.make(family, _choice(Dtype, row.get("dtype", ""), "dtype"),
                       _choice(Pass, row.get("pass", ""), "pass"), variant, **dims)


def collective_of(row: dict[str, str]) -> Collective:
    """The ``Collective`` a collective-sample row timed (``ValueError`` naming the bad column otherwise)."""
    return Collective(kind=_choice(CollectiveKind, row.get("kind", ""), "kind"), bytes=_count(row, "bytes"),
                      group=_count(row, "group", 2), ranks_per_node=_count(row, "ranks_per_node"),
                      tier=_choice(Tier, row.get("tier", ""), "tier"))


def _seconds(row: dict[str, str]) -> float | None:
    if row.get("error"):
        return None
    try:
        t = float(row["time_s"])
    except (KeyError, ValueError):
        return None
    return t if math.isfinite(t) and t > 0 else None


TIMES = (1e-9, 3600.0)
"""A sample's time must lie between a nanosecond and an hour: no kernel launch is shorter, and the
sampler caps each case at seconds (``--repeat-seconds``), as do the public tables imported. A row
outside (``1e23 s``) is a unit slip or a corrupt line, skipped and counted, never fitted."""


def check_families(families: Sequence[str] | None) -> None:
    """Refuse a ``--families`` name that is no kernel family or collective kind (``gemmm``)."""
    known = [f.value for f in Family] + [k.value for k in CollectiveKind]
    for name in families or ():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            raise InputError(f"--families: unknown family {name!r}",
                             hint=(f"did you mean '{close[0]}'? " if close else "")
                             + f"families: {', '.join(known)}")


def load(dirs: Sequence[str | Path], *, device_id: str | None = None, node_id: str | None = None,
         families: Sequence[str] | None = None) -> LoadReport:
    """Every usable sample row under ``dirs`` as an ``Observation`` on its catalog device."""
    check_families(families)
    files = _sample_files(dirs)
    observations: list[Observation] = []
    devices: dict[str, Device] = {}
    skipped: dict[str, int] = {}

    def skip(reason: str, n: int = 1) -> None:
        skipped[reason] = skipped.get(reason, 0) + n

    for path in files:
        table = samplefile.read(path)
        if not isinstance(table.meta, dict):
            raise InputError(f"{path}: the header record (second line) must be a JSON object",
                             hint="sample files are written by llmp sample or llmp import-samples")
        if not table.rows:
            continue
        if table.dropped:
            skip("truncated or malformed lines", table.dropped)
        is_coll, device, links = _file_device(path, table, device_id, node_id)
        devices[device.id] = device
        for row in table.rows:
            observation = _observation(path, row, is_coll, device, links, families, skip)
            if observation is not None:
                observations.append(observation)
    if not observations:
        why = "; ".join(f"{n} {reason}" for reason, n in skipped.items()) or "the files hold no rows"
        picked = f" of families {', '.join(families)}" if families is not None else ""
        raise InputError(f"no usable sample rows{picked} in {', '.join(map(str, dirs))} ({why})",
                         hint="sample with llmp sample, or import with llmp import-samples")
    return LoadReport(observations=tuple(observations), devices=tuple(devices.values()),
                      files=tuple(str(f) for f in files), skipped=skipped)


def _sample_files(dirs: Sequence[str | Path]) -> list[Path]:
    """The sample files under ``dirs``: each file given, and the ``*.csv`` of each directory (sorted)."""
    files: list[Path] = []
    for d in dirs:
        d = Path(d)
        if d.is_file():
            files.append(d)
        elif d.is_dir():
            files.extend(sorted(p for p in d.glob("*.csv")))
        else:
            raise InputError(f"no such sample file or directory: {d}")
    if not files:
        raise InputError(f"no sample files (*.csv) in {', '.join(map(str, dirs))}", hint="run llmp sample --out DIR")
    return files


def _file_device(path: Path, table: samplefile.SampleTable, device_id: str | None,
                 node_id: str | None) -> tuple[bool, Device, Links | None]:
    """Whether a sample file holds collectives, the catalog device its rows ran on (``device_id``
    overrides its header's) and, for collectives, the links of the catalog node they crossed."""
    is_coll = "kind" in table.columns
    missing = [c for c in (_COLLECTIVE_COLUMNS if is_coll else _KERNEL_COLUMNS) if c not in table.columns]
    if missing:
        raise InputError(f"{path} has no column {', '.join(missing)} (columns: {', '.join(table.columns)})",
                         hint="sample files are written by llmp sample or llmp import-samples")
    dev_id = device_id or table.meta.get("device_id")
    if not dev_id or not isinstance(dev_id, str):
        raise InputError(f"{path} does not name its catalog device ('{table.meta.get('device_name')}')",
                         hint="pass --device-id ID (a gpu id of llmp/hardware/catalog)")
    node_of_file = node_id or table.meta.get("node_id") or DEFAULT_NODE.get(dev_id)
    node = None
    if is_coll:
        if not isinstance(node_of_file, str):
            raise InputError(f"{path}: collective samples need the catalog node they ran on",
                             hint="pass --node-id ID (a node id of llmp/hardware/catalog)")
        node = catalog_node(dev_id, node_of_file)
    device = node.gpu if node is not None else catalog_device(dev_id)
    links = node_links(node) if node is not None else None
    return is_coll, device, links


def _observation(path: Path, row: dict[str, str], is_coll: bool, device: Device, links: Links | None,
                 families: Sequence[str] | None, skip: Callable[[str], None]) -> Observation | None:
    """The observation of one sample row, or None for a row skipped (``skip`` told why) or of a
    family not asked for."""
    try:
        seconds = _seconds(row)
        if seconds is None:
            skip("failed or empty rows")
            return None
        if not TIMES[0] <= seconds <= TIMES[1]:
            skip("times outside 1 ns to 1 h (no kernel or collective takes that long)")
            return None
        item: Kernel | Collective = collective_of(row) if is_coll else kernel_of(row)
    except ValueError as err:
        raise InputError(f"{path}: row {row.get('key', '?')!r}: {err}",
                         hint="fix or delete the row (sample files are written by llmp sample or "
                              "llmp import-samples)") from None
    if isinstance(item, Collective):
        if families is not None and item.kind.value not in families:
            return None
        return Observation(item=item, device=device, seconds=seconds, links=links, key=row.get("key", ""))
    kernel = item
    if families is not None and kernel.family.value not in families:
        return None
    if kernel.dtype not in device.peak_flops:
        skip(f"{kernel.dtype} rows: device '{device.id}' has no {kernel.dtype} peak")
        return None
    return Observation(item=kernel, device=device, seconds=seconds, key=row.get("key", ""))
