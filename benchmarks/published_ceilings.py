"""Print the catalog's measured compute ceilings and their derivation from the published tables.

    python benchmarks/published_ceilings.py

A program over the package, not part of it: it reads the catalog's GPUs through the language
(:mod:`llmp.dsl.catalog`), which sits above the hardware package, and the ceilings
(:func:`llmp.hardware.published.derive`) that the catalog's ``achievable`` and
``flash_attention`` lines hold."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmp.dsl import catalog
from llmp.hardware.published import derive
from llmp.units import format_flops


def main() -> int:
    devices = catalog.gpus()
    for gpu, ceilings in derive(devices).items():
        peak = devices[gpu].peak_flops
        blocks = (("achievable", ceilings.achievable), ("flash_attention", ceilings.flash_attention))
        if not any(table for _, table in blocks):
            print(f"gpu {gpu}: no published micro-benchmark facts (datasheet peaks)\n")
            continue
        print(f"gpu {gpu}:")
        for block, table in blocks:
            for dtype, fact in table.items():
                print(f"  {block}.{dtype.value} = {fact.rate / 1e12:g} TFLOP/s "
                      f"({fact.rate / peak[dtype]:.1%} of {format_flops(peak[dtype])})  # {fact.how}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
