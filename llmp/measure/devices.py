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
    "Tesla V100-SXM3-32GB": "v100_sxm3_32gb",
    "NVIDIA A100-SXM4-40GB": "a100_sxm4_40gb",
    "NVIDIA A100-SXM4-80GB": "a100_sxm4_80gb",
    "NVIDIA A100 80GB PCIe": "a100_pcie_80gb",
    "NVIDIA A40": "a40",
    "NVIDIA H100 80GB HBM3": "h100_sxm5_80gb",
    "NVIDIA H800": "h800_sxm5_80gb",
    "NVIDIA H200": "h200_sxm_141gb",
    "NVIDIA GH200 480GB": "gh200_96gb",
    "NVIDIA GH200 144G HBM3e": "gh200_144gb",
    "NVIDIA B200": "b200",
    "NVIDIA B300 SXM6 AC": "b300",
    "NVIDIA GB200": "gb200",
    "NVIDIA GB300": "gb300",
}
"""``torch.cuda.get_device_name`` -> catalog id: the exact product names the NVIDIA driver
reports (torch returns NVML's name), as listed in the "Compatible GPUs" table of
NVIDIA/open-gpu-kernel-modules README.md (PCI ids 20B0 A100-SXM4-40GB, 20B2 A100-SXM4-80GB,
20B5 A100 80GB PCIe, 2235 A40, 2330 H100 80GB HBM3, 2324 H800, 2335 H200, 2342 GH200 480GB,
2348 GH200 144G HBM3e, 2901 B200, 3182 B300 SXM6 AC, 2941 GB200, 31C2 GB300); V100 SXM3 (pre-
Turing, not in that table) as the DGX-2 reports it. Names that several parts share are not
guessed: "NVIDIA H100" (PCI id 2339) and "NVIDIA H100 NVL" are other boards, and a 96 GB H100
reports no distinct name we could cite, so those get ``device_id = null`` (name it with
``--device-id``). AMD parts (ROCm) are not listed yet."""


def catalog_id(kind: str, device_name: str) -> str | None:
    """The catalog id for a device, or ``None`` when this table does not know it."""
    if kind == "cpu":
        return CPU_ID
    return CUDA_NAMES.get(device_name.strip())
