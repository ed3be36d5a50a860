"""Device fingerprints: the spec numbers a residual store was fitted with, and their hash.

A store's factors correct the roofline its features and rooflines were computed from. The
manifest records, per fitted device, those numbers and their hash (``store.py`` module
docstring): a store refuses a device whose numbers no longer hash the same (the catalog changed,
or ``--set gpu.*``), saying which numbers differ, and loading refuses a fingerprint that does not
match its own numbers (the manifest was edited). Written by ``saving.py``, checked by
``manifest.py``, compared by ``store.Residuals.refusal``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from llmp.hardware.spec import Device

RATE_TABLES = ("peak_flops", "achievable", "flash_attention")
"""Fingerprinted numbers that are tables of rates per dtype."""
SCALAR_NUMBERS = ("mem_bandwidth", "sms", "clock", "l2_cache", "launch_overhead")
"""Fingerprinted numbers that are single values."""


def numbers(device: Device) -> dict[str, Any]:
    """The spec numbers a device's features and rooflines are computed from (``features.py``,
    ``roofline.ceiling``, ``roofline.roofline``): peaks, measured ceilings, bandwidth, SMs, clock,
    cache, launch cost, and the architecture whose tiles quantize its kernels."""
    def rates(table: Any) -> dict[str, float]:
        return {str(k): float(v) for k, v in sorted(table.items())}

    return {"peak_flops": rates(device.peak_flops),
            "achievable": rates(device.achievable.rates) if device.achievable else {},
            "flash_attention": rates(device.flash_attention.rates) if device.flash_attention else {},
            **{name: float(getattr(device, name)) for name in SCALAR_NUMBERS},
            "microarch": device.microarch.value if device.microarch is not None else ""}


def digest(numbers: dict[str, Any]) -> str:
    """The hash a fingerprint records of its numbers."""
    return hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()[:16]


def device_fingerprint(device: Device) -> dict[str, object]:
    """The spec numbers a model's device features came from, and their hash."""
    device_numbers = numbers(device)
    return {"id": device.id, "name": device.name, "sha256": digest(device_numbers), **device_numbers}


MEMORY = ("mem_bandwidth",)
"""Numbers that differ between two parts of one die sold with other memory stacks (A100 SXM4 40 GB
HBM2 and 80 GB HBM2e: same SMs, clock, L2 and tensor-core rates, 1555 vs 2039 GB/s)."""


def same_silicon(recorded: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether ``current`` is the die of ``recorded`` with other memory: every fingerprinted number
    equal but the memory bandwidth. A store's factors then carry over: its features normalise
    bytes by the device's own bandwidth, and a per-device store saw one bandwidth, so none of its
    trees splits on it."""
    return all(recorded.get(name) == current[name] for name in (*RATE_TABLES, *SCALAR_NUMBERS, "microarch")
               if name not in MEMORY)


def differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The numbers of a recorded fingerprint that differ from ``current`` (for the refusal message)."""
    out = []
    for name in (*RATE_TABLES, *SCALAR_NUMBERS, "microarch"):
        a, b = recorded.get(name), current[name]
        if a != b:
            out.append(f"{name} {a} -> {b}" if name not in RATE_TABLES else f"{name}")
    return out
