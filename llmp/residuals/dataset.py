"""Sample directories -> ``Observation`` objects: kernels, collectives and their catalog devices.

A sample file names its device by catalog id in its header (``device_id``; ``--device-id``
overrides, and is required when the sampler did not recognise the device). The device's spec
numbers come from the catalog through the DSL, so the features and the roofline of a sample use
exactly the numbers ``llmp predict`` will use for that device.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llmp.analytic.collectives import Links
from llmp.analytic.kernels import VARIANTS, Collective, CollectiveKind, Family, Kernel, Pass, Tier
from llmp.errors import InputError, LlmpError
from llmp.hardware.catalog import canonical
from llmp.hardware.spec import Device, Dtype, Node
from llmp.residuals import samplefile
from llmp.residuals.design import DIMS
from llmp.residuals.model import Observation

DEFAULT_NODE = {"cpu": "cpu_host"}
"""Catalog node whose links the collectives of a device's samples crossed, when not recorded."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadReport:
    observations: tuple[Observation, ...]
    devices: tuple[Device, ...]
    files: tuple[str, ...]
    skipped: dict[str, int]
    """Reason -> rows skipped (failed cases, dtypes without a peak on the device, truncated lines)."""


def _catalog_spec_text(device_id: str, node_id: str | None) -> str:
    """A minimal spec around a catalog device (or node): the public way to resolve catalog numbers."""
    link = "link { bandwidth = 1 GB/s  latency = 1 us }"
    if node_id is None:
        node_id = "probe_node"
        node = f"node probe_node {{ gpu = {device_id}  gpus_per_node = 1  intra = {link}  inter = {link} }}\n"
        uses = f'use "{device_id}"\n'
    else:
        node, uses = "", f'use "{node_id}"\n'
    return (f"{uses}{node}cluster probe {{ node = {node_id}  nodes = 1 }}\n"
            "model probe { arch = gpt  layers = 1  hidden = 64  heads = 1  vocab = 128  seq_len = 8 }\n"
            "train { precision = fp32  global_batch = 1 }\n")


@functools.cache
def catalog_node(device_id: str, node_id: str | None = None) -> Node:
    """The catalog's device (in a one-device probe node), or the catalog node ``node_id``. A
    retired id (``gh200``, in sample files taken before the rename) names its canonical device."""
    from llmp import dsl

    device_id = canonical(device_id)
    try:
        spec = dsl.loads(_catalog_spec_text(device_id, node_id), filename=f"<catalog {node_id or device_id}>")
    except LlmpError as err:
        raise InputError(f"cannot resolve catalog {'node' if node_id else 'device'} "
                         f"'{node_id or device_id}': {err.message}",
                         hint="pass a catalog id with --device-id / --node-id (see llmp/hardware/catalog/)") from None
    node = spec.cluster.node
    if node.gpu.id != device_id:
        raise InputError(f"catalog node '{node_id}' holds device '{node.gpu.id}', but the samples were taken on "
                         f"'{device_id}'", hint="pass the node of the sampled device with --node-id")
    return node


def node_links(node: Node) -> Links:
    """The links of a one-node run on ``node`` (its own inter link: no cluster override), at the
    achievable rates the analytic collective model uses."""
    return Links.between(node, node.inter)


def kernel_of(row: dict[str, str]) -> Kernel:
    """The ``Kernel`` a kernel-sample row timed (GEMM roles ``fwd``/``dgrad``/``wgrad`` are a layout
    note of the sampler, not a kernel variant: the dims already say which product ran)."""
    family = Family(row["family"])
    dims = {name: int(row[name]) for name in DIMS[family.value]}
    variant = "" if family is Family.GEMM else row.get("variant", "")
    if variant == "-":
        variant = ""
    if variant not in VARIANTS[family]:
        raise InputError(f"sample row {row.get('key', '?')}: {family.value} has no variant {variant!r}",
                         hint=f"known {family.value} variants: {', '.join(repr(v) for v in VARIANTS[family])}")
    return Kernel.make(family, Dtype(row["dtype"]), Pass(row["pass"]), variant, **dims)


def collective_of(row: dict[str, str]) -> Collective:
    return Collective(kind=CollectiveKind(row["kind"]), bytes=int(row["bytes"]), group=int(row["group"]),
                      ranks_per_node=int(row["ranks_per_node"]), tier=Tier(row["tier"]))


def _seconds(row: dict[str, str]) -> float | None:
    if row.get("error"):
        return None
    try:
        t = float(row["time_s"])
    except (KeyError, ValueError):
        return None
    return t if math.isfinite(t) and t > 0 else None


def load(dirs: Sequence[str | Path], *, device_id: str | None = None, node_id: str | None = None,
         families: Sequence[str] | None = None) -> LoadReport:
    """Every usable sample row under ``dirs`` as an ``Observation`` on its catalog device."""
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
    observations: list[Observation] = []
    devices: dict[str, Device] = {}
    skipped: dict[str, int] = {}

    def skip(reason: str, n: int = 1) -> None:
        skipped[reason] = skipped.get(reason, 0) + n

    for path in files:
        table = samplefile.read(path)
        if table.dropped:
            skip("truncated or malformed lines", table.dropped)
        dev_id = device_id or table.meta.get("device_id")
        if not dev_id:
            raise InputError(f"{path} does not name its catalog device ('{table.meta.get('device_name')}')",
                             hint="pass --device-id ID (a gpu id of llmp/hardware/catalog)")
        is_coll = "kind" in table.columns
        node = catalog_node(str(dev_id), (node_id or table.meta.get("node_id") or DEFAULT_NODE.get(str(dev_id)))
                            if is_coll else None)
        device = node.gpu
        devices[device.id] = device
        for row in table.rows:
            seconds = _seconds(row)
            if seconds is None:
                skip("failed or empty rows")
                continue
            if is_coll:
                item = collective_of(row)
                if families is not None and item.kind.value not in families:
                    continue
                observations.append(Observation(item=item, device=device, seconds=seconds, links=node_links(node)))
                continue
            kernel = kernel_of(row)
            if families is not None and kernel.family.value not in families:
                continue
            if kernel.dtype not in device.peak_flops:
                skip(f"{kernel.dtype} rows: device '{device.id}' has no {kernel.dtype} peak")
                continue
            observations.append(Observation(item=kernel, device=device, seconds=seconds))
    return LoadReport(observations=tuple(observations), devices=tuple(devices.values()),
                      files=tuple(str(f) for f in files), skipped=skipped)
