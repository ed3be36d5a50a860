"""Which catalog device a sampler is running on: an explicit table, never substring chains.

``torch.cuda.get_device_name()`` strings map to catalog ids by exact match (STYLE.md rule 12;
torchtitan's ``"H100" in name`` chains are the anti-pattern). A device not in the table is
recorded with ``device_id = null``; ``llmp fit --device-id ID`` then names it explicitly.
The CPU a sampler runs on is the catalog's ``cpu`` entry.

Standard library only.
"""

from __future__ import annotations

CPU_ID = "cpu"

CUDA_NAMES: dict[str, str] = {
    "NVIDIA H100 80GB HBM3": "h100_sxm5_80gb",
    "NVIDIA H200": "h200_sxm_141gb",
    "NVIDIA GH200 480GB": "gh200",
    "NVIDIA A100-SXM4-80GB": "a100_sxm4_80gb",
    "NVIDIA A100-SXM4-40GB": "a100_sxm4_40gb",
    "NVIDIA B200": "b200",
    "Tesla V100-SXM3-32GB": "v100_sxm3_32gb",
}
"""``torch.cuda.get_device_name`` -> catalog id (exact strings as the driver reports them)."""


def catalog_id(kind: str, device_name: str) -> str | None:
    """The catalog id for a device, or ``None`` when this table does not know it."""
    if kind == "cpu":
        return CPU_ID
    return CUDA_NAMES.get(device_name.strip())
