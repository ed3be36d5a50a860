"""What each micro-benchmark calibration does to the published end-to-end error, one step at a time.

    python benchmarks/calibration_ablation.py

The catalog carries three kinds of measured ceilings, all from published micro-benchmarks (never
from end-to-end rows): link efficiencies and mesh topology (nccl-tests), GEMM ceilings
(``gpu.achievable``, MAMF) and fused-attention ceilings (``gpu.flash_attention``, FlashAttention
figures). This script maps every row of validation/*.csv (a TEST set: nothing here is fitted)
exactly as ``llmp validate`` does, then predicts it with the calibrations added one after the
other, by removing the later ones from the resolved spec:

  datasheet      every ceiling removed: datasheet peaks, links at line rate behind a switch
  + links        link efficiency and peer_bandwidth
  + GEMM         gpu.achievable (attention falls back to it: attention is GEMMs on the same cores)
  + attention    gpu.flash_attention: the catalog as shipped (= benchmarks/validate_published.py)

and prints MAPE and bias per source for each step. The first column reproduces the roofline-only
baseline; the last one the calibrated validation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmp.hardware.spec import Link
from llmp.spec.spec import Spec
from llmp.validate import score
from llmp.validate.mapping import Mapped, map_measurement
from llmp.validate.rows import group_measurements, read_csvs
from llmp.validate.score import Scored


def _line_rate(link: Link) -> Link:
    return replace(link, efficiency=1.0, peer_bandwidth=None)


def without_links(spec: Spec) -> Spec:
    c = spec.cluster
    node = replace(c.node, intra=_line_rate(c.node.intra), inter=_line_rate(c.node.inter))
    return replace(spec, cluster=replace(c, node=node, inter=_line_rate(c.inter)))


def _gpu(spec: Spec, **changes: object) -> Spec:
    c = spec.cluster
    return replace(spec, cluster=replace(c, node=replace(c.node, gpu=replace(c.node.gpu, **changes))))


def without_gemm(spec: Spec) -> Spec:
    return _gpu(spec, achievable=None)


def without_attention(spec: Spec) -> Spec:
    return _gpu(spec, flash_attention=None)


STEPS: tuple[tuple[str, Callable[[Spec], Spec]], ...] = (
    ("datasheet", lambda s: without_attention(without_gemm(without_links(s)))),
    ("+ links", lambda s: without_attention(without_gemm(s))),
    ("+ GEMM", without_attention),
    ("+ attention (shipped)", lambda s: s),
)


def main() -> int:
    files = sorted(str(p) for p in (ROOT / "validation").glob("*.csv"))
    mapped = [m for m in map(map_measurement, group_measurements(read_csvs(tuple(files)))) if isinstance(m, Mapped)]
    results: dict[str, list[Scored]] = {}
    for name, strip in STEPS:
        rows = [score.score(replace(m, spec=strip(m.spec))) for m in mapped]
        results[name] = [r for r in rows if isinstance(r, Scored)]
    sources = sorted({r.source for r in results[STEPS[-1][0]]})
    print("## Calibration steps on the published rows (MAPE, bias in brackets)\n")
    print("- command: `python benchmarks/calibration_ablation.py`; data: validation/*.csv (TEST set, nothing fitted)\n")
    print("| source | rows | " + " | ".join(name for name, _ in STEPS) + " |")
    print("|---|---|" + "---|" * len(STEPS))
    for src in [*sources, None]:
        cells = []
        count = 0
        for name, _ in STEPS:
            chosen = [r for r in results[name] if src is None or r.source == src]
            s = score.summarize(chosen)
            count = s.rows
            cells.append(f"{100 * s.mape:.1f}% ({100 * s.bias:+.1f}%)")
        print(f"| {src or '**all**'} | {count} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
