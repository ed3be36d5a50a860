"""Which catalog device a sampler is running on: an explicit table, never substring chains.

``torch.cuda.get_device_name()`` strings map to catalog ids by exact match through the one
table of GPU names, :data:`llmp.hardware.names.CUDA` (STYLE.md rule 12; torchtitan's ``"H100" in
name`` chains are the anti-pattern). A device not in the table is
recorded with ``device_id = null``; ``llmp fit --device-id ID`` then names it explicitly.
The CPU a sampler runs on is the catalog's ``cpu`` entry.

Standard library only.
"""

from __future__ import annotations

from llmp.hardware import names

CPU_ID = "cpu"
CPU_NODE_ID = "cpu_host"
"""The catalog node a CPU sampler's processes run on (gloo over loopback; ``llmp fit`` reads its links)."""


def catalog_id(kind: str, device_name: str) -> str | None:
    """The catalog id for a device, or ``None`` when this table does not know it."""
    if kind == "cpu":
        return CPU_ID
    return names.CUDA.get(device_name.strip())
