"""What other tools call a GPU -> the catalog id: the one table, and the one resolver.

A GPU reaches llmp under many names: its catalog id (``gh200_96gb``), a retired short id
(``gh200``, :data:`llmp.hardware.catalog.ALIASES`), the product name the driver reports
(``torch.cuda.get_device_name()``: ``NVIDIA GH200 480GB``), that name without its spaces (the seed
paper's file prefix ``NVIDIAGH200480GB_linear1_fp16.csv``), and the labels public data sets use
(Vidur's ``a100`` folder, the shared kernels table's ``a100_unstated``). Each tool's names live
here, one :data:`NAMES` entry per tool, so a sampler, every importer and the CLI resolve a name
the same way (DESIGN.md: one registry per extension point), always by exact match (STYLE.md
rule 12: never ``"H100" in name``). Standard library only: the samplers read it on a GPU host.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from llmp.errors import InputError
from llmp.hardware import catalog

CUDA: Mapping[str, str] = MappingProxyType({
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
})
"""``torch.cuda.get_device_name`` -> catalog id: the exact product names the NVIDIA driver
reports (torch returns NVML's name), as listed in the "Compatible GPUs" table of
NVIDIA/open-gpu-kernel-modules README.md (PCI ids 20B0 A100-SXM4-40GB, 20B2 A100-SXM4-80GB,
20B5 A100 80GB PCIe, 2235 A40, 2330 H100 80GB HBM3, 2324 H800, 2335 H200, 2342 GH200 480GB,
2348 GH200 144G HBM3e, 2901 B200, 3182 B300 SXM6 AC, 2941 GB200, 31C2 GB300); V100 SXM3 (pre-
Turing, not in that table) as the DGX-2 reports it. Names that several parts share are not
guessed: "NVIDIA H100" (PCI id 2339) and "NVIDIA H100 NVL" are other boards, and a 96 GB H100
reports no distinct name we could cite, so those resolve to nothing (name the part with its
catalog id). AMD parts (ROCm) are not listed yet."""

VIDUR: Mapping[str, str] = MappingProxyType({"a100": "a100_sxm4_80gb", "h100": "h100_sxm5_80gb", "a40": "a40"})
"""Vidur's compute device folders (microsoft/vidur ``data/profiling/compute/<gpu>``) -> catalog ids.
The profiles do not name the part; Vidur's profiling README calls its A100 node "A100 DGX with 8
80GB A100s", so the 80 GB SXM parts are assumed for a100 and h100 (the DGX H100's GPU)."""

KERNELS: Mapping[str, str | None] = MappingProxyType({
    "h100_sxm5_80gb": "h100_sxm5_80gb",
    "h200_sxm_141gb": "h200_sxm_141gb",
    "b200": "b200",
    "gb200": "gb200",
    "mi300x": "mi300x",
    "a100_sxm4_40gb": "a100_sxm4_40gb",
    "a100_sxm4_mem_unstated": "a100_sxm4_40gb",  # vTrain "a100": NVSwitch-class, memory unknown (identical NVLink)
    "a100_unstated": "a100_sxm4_80gb",  # LLMCompass "A100": nearest, same SMs and clock (unverified)
    "a100_pcie_80gb": "a100_pcie_80gb",  # SimuMax A100 80GB PCIe
    "h800_sxm5_80gb": "h800_sxm5_80gb",  # DeepGEMM H800 (compute-equivalent to H100 SXM5)
    "gb300": "gb300",
    "mi355x": "mi355x",
    "mi210": "mi210",
    "v100_unstated": None,  # vTrain "v100": SXM2 or SXM3 unknown; select it explicitly with --gpu-id
})
"""The shared data's ``kernels.csv`` ``gpu_id`` -> the catalog id its rows are imported for by
default (its README, "gpu_id values and the catalog"); ``None``: never by default. Ids the catalog
lacks yet are written anyway, and ``import.json`` says so."""

NAMES: Mapping[str, Mapping[str, str | None]] = MappingProxyType({"cuda": CUDA, "vidur": VIDUR, "kernels": KERNELS})
"""Tool -> its names of GPUs -> catalog id."""


def _squeezed(name: str) -> str:
    return "".join(name.split()).lower()


def from_cuda(device_name: str) -> str | None:
    """The catalog id of a driver product name, with or without its spaces (the seed's file
    prefixes drop them), or ``None`` when :data:`CUDA` does not list it."""
    exact = CUDA.get(device_name.strip())
    if exact is not None:
        return exact
    wanted = _squeezed(device_name)
    return next((ident for name, ident in CUDA.items() if _squeezed(name) == wanted), None)


def gpu_id(name: str) -> str:
    """The canonical catalog GPU id ``name`` means: a catalog id, an alias (``gh200``), or a
    driver product name (:func:`from_cuda`). Raises :class:`InputError` naming the choices."""
    gpus = catalog.catalog_ids()["gpu"]
    ident = catalog.canonical(name.strip())
    if ident in gpus:
        return ident
    found = from_cuda(name)
    if found is not None:
        return found
    raise InputError(f"'{name}' names no catalog GPU",
                     hint="pass a catalog GPU id or alias (" + ", ".join([*gpus, *catalog.ALIASES]) + ") "
                          "or the name torch.cuda.get_device_name() reports")
