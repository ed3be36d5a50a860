"""The public collective measurements llmp may learn from, read into one shape (training data).

Read from ../shared/data, never copied: the seed paper's Perlmutter NCCL samples
(``seed-estimate-train-time/perlmutter-a100/nccl``), Vidur's DGX A100/H100 network profiles
(``vidur/network``), and the nccl-tests figures transcribed in ``microbench/collectives_published``
(ml-engineering sweeps and NVIDIA/nccl(-tests) issue reference points). Each source's README
faults are handled here, once, for ``collective_tables.py`` (the shipped tables) and
``collectives_published.py`` (scoring the model).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from recording import data_folder

from llmp.analytic.collectives import bus_factor
from llmp.analytic.kernels import CollectiveKind, Tier

ROOT = Path(__file__).resolve().parents[1]
DATA = next((p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
            ROOT.parent / "shared" / "data")
"""The team's data folder, ``../shared/data`` beside the checkout (or beside a worktree's parent)."""
MICRO = DATA / "microbench" / "collectives_published"
SEED = DATA / "seed-estimate-train-time" / "perlmutter-a100" / "nccl"
VIDUR = DATA / "vidur" / "network"
GIB = 1 << 30

SEED_REF = ("DebarghaG/estimate-train-time@1ac4d5e441169983737f4f5c1c2c3b05b618307d:"
            "src/estimate_train_time/data/regressors/Perlmutter/nccl/")
VIDUR_REF = "microsoft/vidur@7d47513:data/profiling/network/"
MLENG_REF = "stas00/ml-engineering@744d01e:network/README.md"
LICENCES = {"seed": "MIT", "vidur": "MIT", "ml-engineering": "CC-BY-SA-4.0 (attribution: Stas Bekman and contributors)",
            "reference": "quoted figures from NVIDIA/nccl and NVIDIA/nccl-tests issues (facts)"}

SEED_NODE, SEED_HEALTHY = "perlmutter_seed", "perlmutter_gpu_80gb"
"""The seed's machine (its slow inter-node network) and the healthy Perlmutter its NVLink is."""

KINDS = {"all_reduce": CollectiveKind.ALL_REDUCE, "all_gather": CollectiveKind.ALL_GATHER,
         "reduce_scatter": CollectiveKind.REDUCE_SCATTER, "send_recv": CollectiveKind.SEND_RECV}

ML_ENG_SYSTEMS = {
    "8x A100 SXM (single node, NVLink3/NVSwitch)": "dgx_a100",
    "8x H200 SXM (single node, NVLink4/NVSwitch)": "hgx_h200",
    "8x H200 SXM (single node)": "hgx_h200",
    "1x p6-b200.48xlarge (8x B200/node, NVLink5; 8x 50GBps EFA v4 per node)": "dgx_b200",
    "4x p6-b200.48xlarge (8x B200/node, NVLink5; 8x 50GBps EFA v4 per node)": "dgx_b200",
    "8x B200 p6-b200.48xlarge (single node)": "dgx_b200",
}
"""ml-engineering systems → the catalog node with the same GPU and NVLink (an AWS p6-b200 is an
HGX B200 board, the NVLink of a DGX B200)."""

EFA = "AWS EFA network, not the catalog's InfiniBand NICs"
ALGOS: dict[str, str | None] = {
    "NCCL default (ring/tree; no NVLS on A100)": None,
    "NCCL default (NVLS at >=2MiB per text)": None,
    "NCCL default (AWS ofi tuner)": None,
    "NCCL picks Ring": None,
    "NCCL picks NVLS": None,
    "Ring (NCCL_NVLS_ENABLE=0)": "ring",
    "Ring (`NCCL_NVLS_ENABLE=0`)": "ring",
    "Ring": "ring",
    "NVLS (`NCCL_NVLS_ENABLE=1`)": "nvls",
}
"""ml-engineering ``algo`` cells → the algorithm a run forced (None: NCCL chose). A series NCCL
chose itself measures what llmp predicts (the tuner's pick); a forced one is scored against that
algorithm's own candidates."""

REFERENCE = {
    ("8x H100 SXM (DGX/HGX, NVLink4)", "non-allreduce collectives / all_reduce with NCCL_ALGO=RING", "Ring"):
        ("dgx_h100", None, (8,), 1, 4 * GIB, "ring", ""),
    ("8x H100 SXM (DGX/HGX, NVLink4)", "all_reduce", "NVLS (NVLink SHARP, default)"):
        ("dgx_h100", None, (8,), 1, 4 * GIB, None, ""),
    ("8x H100 SXM single node", "all_reduce", "NVLS"): ("dgx_h100", None, (8,), 1, 4 * GIB, None, ""),
    ("8x H100 SXM single node", "all_reduce", "Ring"): ("dgx_h100", None, (2, 4, 8), 1, 4 * GIB, "ring", ""),
    ("H100 nodes, NDR 400Gb/s IB (ConnectX-7)", "per-NIC network bandwidth via NCCL",
     "Ring (recommended NCCL_ALGO=RING for 2-node tests)"): ("dgx_h100", None, (16,), 2, 4 * GIB, "ring", ""),
    ("3 nodes x 8x A100 SXM4 40GB, 4x HDR 200Gb/s IB per node", "all_reduce", "NCCL default"):
        ("dgx_a100_40gb", "hdr_ib_x4", (24,), 3, 128 << 20, None, ""),
    ("2 nodes x HGX A100 80GB, 4x ConnectX-6 200Gb/s IB per node", "all_reduce", "NCCL default"):
        ("dgx_a100", "hdr_ib_x4", (16,), 2, 4 * GIB, None, ""),
    ("4 nodes x 8x H200 (AWS p5en.48xlarge, EFA)", "all_reduce",
     "Ring (AWS ofi tuner choice); NCCL_ALGO=allreduce:nvlstree gave 310.07"):
        ("hgx_h200", None, (32,), 4, 4 * GIB, None, EFA),
    ("8x AMD MI300X single node (Infinity Fabric, 7 links)", "all_reduce", "RCCL default"):
        ("mi300x_platform", None, (8,), 1, 4 * GIB, None, ""),
}
"""Rows of nccl_reference_points.csv that name a catalog machine (system, collective, algo) →
(node, inter link override or None, ranks, nodes, size for "large"/ranges, forced algorithm or
None, why not the catalog machine). The NVLS ramp row ("5,6,7,8" GPUs: "420,440,460,480") gives
one point per group size; "2..8 GPUs" ring figures are taken at 2, 4 and 8."""
SMALL_GROUP = re.compile(r"(\d+) GPUs: ([\d.]+) GB/s busbw")
"""A second point in a reference row's notes (MI300X: "2 GPUs: 47.671 GB/s busbw")."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """Measurements of one collective on one machine and group shape, vs message size."""

    dataset: str
    source: str
    """Which source (a key of :data:`LICENCES`)."""
    ref: str
    """``owner/repo@commit:path`` of the raw file."""
    node: str
    """The catalog node the measurements ran on (the machine)."""
    inter: str | None
    """Inter-node link override (catalog id), when the measured nodes had other NICs."""
    kind: CollectiveKind
    n: int
    nodes: int
    sizes: np.ndarray
    """nccl-tests size in bytes (all-reduce input, all-gather output, message)."""
    measured: np.ndarray
    """Seconds per call."""
    algorithm: str | None = None
    """The algorithm the run forced ("ring", "nvls"); None: NCCL chose (what llmp predicts)."""
    excluded: str = ""
    """Why the series does not measure the catalog machine (another network, a network nobody
    describes): scored apart, never fitted nor served."""

    @property
    def tier(self) -> Tier:
        return Tier.INTRA if self.nodes == 1 else Tier.INTER

    @property
    def per_node(self) -> int:
        return 2 if self.kind is CollectiveKind.SEND_RECV and self.nodes == 1 else self.n // self.nodes


def _seconds(size: float, kind: CollectiveKind, n: int, busbw: float) -> float:
    return size * float(bus_factor(kind, n)) / busbw


def ml_engineering() -> Iterator[Group]:
    rows = list(csv.DictReader((MICRO / "ml_engineering_nccl_measurements.csv").open(newline="")))
    keys: dict[tuple[str, str, str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        keys.setdefault((row["system"], row["gpus"], row["nodes"], row["collective"], row["algo"]), []).append(row)
    for (system, gpus, nodes, coll, algo), rs in keys.items():
        n, kind = int(gpus), KINDS[coll]
        sizes = np.array([float(r["size_bytes"]) for r in rs])
        seconds = np.array([_seconds(float(r["size_bytes"]), kind, n, float(r["busbw_GBps"]) * 1e9) for r in rs])
        yield Group(dataset=f"ml-engineering {system} [{algo}]", source="ml-engineering", ref=MLENG_REF,
                    node=ML_ENG_SYSTEMS[system], inter=None, kind=kind, n=n, nodes=int(nodes), sizes=sizes,
                    measured=seconds, algorithm=ALGOS[algo], excluded=EFA if int(nodes) > 1 else "")


def reference_points() -> Iterator[Group]:
    for row in csv.DictReader((MICRO / "nccl_reference_points.csv").open(newline="")):
        key = (row["system"], row["collective"], row["algo"])
        if key not in REFERENCE:
            continue
        node, inter, ranks, nodes, size, algorithm, excluded = REFERENCE[key]
        figures = [float(x) for x in re.findall(r"[\d.]+", row["busbw_GBps"].split("(")[0])]
        per_nic = "per NIC" in row["busbw_GBps"]
        if len(figures) == len(ranks) and len(figures) > 1:
            points = list(zip(ranks, figures))  # one figure per group size
        else:  # "avg 84.8, peak ~96": the average; a range "46-48": its middle
            busbw = figures[0] if "avg" in row["busbw_GBps"] else sum(figures[:2]) / len(figures[:2])
            points = [(r, busbw) for r in ranks]
        if row["gpus"] == "5,6,7,8":
            points = list(zip((5, 6, 7, 8), figures))
        small = SMALL_GROUP.search(row["notes"])
        if small:
            points.append((int(small.group(1)), float(small.group(2))))
        for n, bw in points:
            bw = bw * 1e9 * (8 if per_nic else 1)  # "46-48 per NIC" on 8-NIC nodes: the node aggregate
            yield Group(dataset=f"reference: {row['source']} [{row['algo']}]", source="reference", ref=row["source"],
                        node=node, inter=inter, kind=CollectiveKind.ALL_REDUCE, n=n, nodes=nodes,
                        sizes=np.array([float(size)]), measured=np.array([_seconds(size, CollectiveKind.ALL_REDUCE,
                                                                                     n, bw)]),
                        algorithm=algorithm, excluded=excluded)


SEED_FILE = re.compile(r"NVIDIAA100-SXM4-80GB_(allreduce|allreduce_large|allgather_large|p2p)_fp16_(\d)_(\d)\.csv")


def seed() -> Iterator[Group]:
    """The seed's per-topology files (the combined files duplicate them; the summary is not data).
    Inside one node they measured Perlmutter's NVLink; across nodes, the seed's own slow network
    (README §8.1), i.e. the ``perlmutter_seed`` machine. ``allgather_large_1_4`` is bimodal (§8.2):
    kept (it is what that machine did), and its spread widens its band."""
    for path in sorted(SEED.glob("*.csv")):
        m = SEED_FILE.fullmatch(path.name)
        if not m:
            continue
        coll, nodes, per_node = m.group(1), int(m.group(2)), int(m.group(3))
        with path.open(newline="") as f:
            data = np.array([[float(x) for x in r] for r in list(csv.reader(f))[1:]])
        shape, us = data[:, 0], data[:, 3]
        n = nodes * per_node if coll != "p2p" else 2
        kind = {"allreduce": CollectiveKind.ALL_REDUCE, "allreduce_large": CollectiveKind.ALL_REDUCE,
                "allgather_large": CollectiveKind.ALL_GATHER, "p2p": CollectiveKind.SEND_RECV}[coll]
        sizes = 2 * shape * (n if kind is CollectiveKind.ALL_GATHER else 1)  # fp16 elements; all-gather per rank
        keep = np.ones(len(sizes), dtype=bool)
        if coll == "p2p" and nodes > 1:
            keep[-1] = False  # the last row is a 3.4x outlier (README §5.3)
        yield Group(dataset=f"seed Perlmutter {path.stem.split('_', 1)[1]}", source="seed", ref=SEED_REF + path.name,
                    node=SEED_NODE if nodes > 1 else SEED_HEALTHY, inter=None, kind=kind, n=n, nodes=nodes,
                    sizes=sizes[keep], measured=us[keep] * 1e-6)


def vidur() -> Iterator[Group]:
    """Vidur's DGX profiles (median of its repeats). Cross-node series are left out: Vidur does not
    describe the network between its nodes (its A100 cross-node send_recv peaks near 8 GB/s, a
    third of one HDR NIC, so it is not a DGX A100 with 8x HDR)."""
    for system, node in (("a100_dgx", "dgx_a100"), ("h100_dgx", "dgx_h100")):
        for coll in ("all_reduce", "send_recv"):
            rows = list(csv.DictReader((VIDUR / system / f"{coll}.csv").open(newline="")))
            shapes: dict[tuple[int, int], list[tuple[float, float]]] = {}
            for r in rows:
                key = (int(r["num_workers"]), int(r["devices_per_node"]))
                shapes.setdefault(key, []).append((float(r["size"]), float(r[f"time_stats.{coll}.median"]) * 1e-3))
            for (workers, per_node), pts in shapes.items():
                pts.sort()
                n = 2 if coll == "send_recv" else workers
                nodes = max(1, workers // per_node)
                excluded = "Vidur does not describe the network between its nodes" if nodes > 1 else ""
                yield Group(dataset=f"vidur {system} {coll} {workers}x({per_node}/node)", source="vidur",
                            ref=f"{VIDUR_REF}{system}/{coll}.csv", node=node, inter=None, kind=KINDS[coll], n=n,
                            nodes=nodes, sizes=np.array([p[0] for p in pts]), measured=np.array([p[1] for p in pts]),
                            excluded=excluded)


def every() -> list[Group]:
    """Every series of every source (a clear exit when the data folder is not there)."""
    for folder in (MICRO, SEED, VIDUR):
        data_folder(DATA, str(folder.relative_to(DATA)))
    return [*ml_engineering(), *reference_points(), *seed(), *vidur()]


def pct(log_err: float) -> str:
    return f"{100 * (math.exp(log_err) - 1):+.0f}%"
