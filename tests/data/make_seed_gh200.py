"""Writes ``tests/data/seed_gh200/``: a small, synthetic set of operator and NCCL files in the seed
paper's format (DebarghaG/estimate-train-time; see llmp.residuals.importers.seed) for a GPU the
shipped stores never saw, named as its driver reports it (``NVIDIA GH200 480GB`` -> the file
prefix ``NVIDIAGH200480GB``), so the README's new-GPU workflow runs in tests and in CI, where the
shared public data is absent.

The times are NOT measurements: each span is llmp's GH200 roofline of the kernels that ran in it
times a smooth made-up efficiency (launch-bound small shapes slower, backward a little slower
than forward) with a deterministic +-6 % wobble. They exercise the commands, never a claim about
a GH200; tests/data/test_fixtures.py checks this script rewrites the files byte for byte.

    python tests/data/make_seed_gh200.py
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from llmp.analytic.collectives import bus_factor
from llmp.analytic.kernels import CollectiveKind
from llmp.hardware.spec import Dtype
from llmp.residuals import dataset, features
from llmp.residuals.importers import seed

OUT = Path(__file__).resolve().parent / "seed_gh200"
PREFIX = "NVIDIAGH200480GB"
OPS = ("linear1", "linear3", "linear4", "baddbmm", "bmm", "softmax", "layernorm", "gelu", "RoPE", "embedding")
GRID = {"mp": (1, 2), "b": (1, 4), "h": (16,), "l": (512, 1024, 2048), "dim": (1024, 2048, 4096)}


def _wobble(text: str) -> float:
    return 1 + 0.06 * (int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") / 2**32 * 2 - 1)


def _efficiency(t_roof: float, backward: bool) -> float:
    return (1.15 + 0.1 * backward) * (1 + 1.5 * math.exp(-t_roof / 20e-6))


def _operator(op: str) -> str:
    columns, spans_of = seed.OPERATORS[op]
    device = dataset.catalog_device("gh200_96gb")
    lines = [",".join((*columns, "F_dur(us)", "B_dur(us)"))]
    seen: set[tuple[int, ...]] = set()
    for mp in GRID["mp"]:
        for b in GRID["b"]:
            for length in GRID["l"]:
                for dim in GRID["dim"]:
                    d = {"mp": mp, "b": b, "h": GRID["h"][0], "l": length, "dim": dim}
                    shape = tuple(d[c] for c in columns)
                    if shape in seen:  # a file without some grid column (layernorm has no mp)
                        continue
                    seen.add(shape)
                    times = {}
                    for span in spans_of(d, Dtype.FP16, op):
                        roof = sum(features.roofline_seconds(k, device)[1] for k, _ in span.kernels)
                        t = roof * _efficiency(roof, span.column == "B_dur(us)") * _wobble(f"{op}{d}{span.column}")
                        times[span.column] = round(t * 1e6 * 5) / 5  # the seed's 0.2 us grid
                    times.setdefault("B_dur(us)", times["F_dur(us)"])
                    row = [f"{float(d[c])}" for c in columns] + [f"{times['F_dur(us)']:.1f}",
                                                                  f"{times['B_dur(us)']:.1f}"]
                    lines.append(",".join(row))
    return "\n".join(lines) + "\n"


def _nccl() -> str:
    lines = ["shape,nodes,GPUsPerNode,dur(us)"]
    for i in range(12):
        shape = 2 ** (18 + i)
        busbw = 20e9 * (1 - math.exp(-shape / 2**22))  # one NDR NIC per GH200 node, latency-bound when small
        t = bus_factor(CollectiveKind.ALL_REDUCE, 2) * 2 * shape / busbw + 15e-6
        lines.append(f"{float(shape)},2.0,1.0,{round(t * 1e6 * _wobble(str(shape)) * 5) / 5:.1f}")
    return "\n".join(lines) + "\n"


def files() -> dict[str, str]:
    """File name -> text of every file of the fixture."""
    out = {f"{PREFIX}_{op}_fp16.csv": _operator(op) for op in OPS}
    out[f"{PREFIX}_allreduce_fp16_2_1.csv"] = _nccl()
    return out


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    for name, text in files().items():
        (OUT / name).write_text(text)
