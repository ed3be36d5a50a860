"""From GPU board power to the facility's meter and the grid's CO2: the stated inputs and their defaults.

* Node overhead: what the rest of a server draws beside its GPUs (CPUs, memory, NICs, fans, the
  node's share of the switches), as a fraction of the GPUs' TDP, drawn the whole run. Default:
  NVIDIA's DGX H100 is rated at 10.2 kW maximum system power for eight 700 W GPUs (NVIDIA DGX
  H100 datasheet; the figure Latif et al. 2024, arXiv:2412.08602, measure against, observing at
  most 8.4 kW while training), so (10.2 - 8 x 0.7) / (8 x 0.7) = 0.82: a rated ceiling.
* PUE: facility energy over IT energy. Default 1.58, the data-centre average Strubell et al. use
  ("Energy and Policy Considerations for Deep Learning in NLP", ACL 2019, §2, from the Uptime
  Institute's 2018 survey); hyperscale sites report about 1.1, say so with ``--pue``.
* Grid intensity: grams of CO2-equivalent per kWh. Default 432.7 g/kWh, the U.S. average Strubell
  et al. use (ibid., 0.954 lb CO2e per kWh, from the U.S. EPA).

Energy over the run is the expected wall clock with failures (GPUs held by a job draw power while
it restarts and redoes lost work) times GPUs x (GPU power + node overhead) x PUE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmp.errors import InputError

DGX_H100_SYSTEM_W, DGX_H100_GPU_W, DGX_H100_GPUS = 10200.0, 700.0, 8
"""NVIDIA DGX H100 datasheet: maximum system power; H100 SXM5 TDP; GPUs per system."""
NODE_OVERHEAD = (DGX_H100_SYSTEM_W - DGX_H100_GPUS * DGX_H100_GPU_W) / (DGX_H100_GPUS * DGX_H100_GPU_W)
"""Non-GPU power of a node as a fraction of its GPUs' TDP (DGX H100 datasheet, rated maximum)."""
PUE = 1.58
"""Strubell et al. 2019, §2: the average data centre's power usage effectiveness (Uptime Institute 2018)."""
LB_PER_KG = 2.20462
GRID_G_PER_KWH = 0.954 / LB_PER_KG * 1000.0
"""Strubell et al. 2019, §2: 0.954 lb CO2e per kWh, the U.S. average (U.S. EPA), in grams."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Facility:
    """The stated inputs between GPU power and CO2."""

    node_overhead: float = NODE_OVERHEAD
    """Non-GPU node power as a fraction of the GPUs' TDP."""
    pue: float = PUE
    grid_g_per_kwh: float = GRID_G_PER_KWH

    def __post_init__(self) -> None:
        # Ranges: a DGX H100's non-GPU power is 0.82 x its GPUs' TDP (10.2 kW for 8 x 700 W); data
        # centres run at PUE 1.1-2.0 (Uptime Institute 2023 survey average 1.58); grids emit 0 to
        # ~1,000 g CO2e per kWh (coal: 820 g lifecycle median, IPCC AR5 WG3 Annex III).
        checks = ((self.node_overhead, 0.0, 10.0, "the node overhead (a fraction of GPU TDP)", "--node-overhead 0.8"),
                  (self.pue, 1.0, 5.0, "the PUE (facility over IT energy, at least 1)", "--pue 1.1"),
                  (self.grid_g_per_kwh, 0.0, 2000.0, "the grid intensity (g CO2e per kWh)", "--grid-intensity 400"))
        for value, least, most, what, example in checks:
            if not (isinstance(value, (int, float)) and math.isfinite(value) and least <= value <= most):
                raise InputError(f"{what} must be a number from {least:g} to {most:g}, got {value!r}",
                                 hint=f"e.g. {example}")

    def watts_per_gpu(self, gpu_watts: float, tdp_watts: float) -> float:
        """Facility power per GPU: (GPU + node overhead) x PUE."""
        return (gpu_watts + self.node_overhead * tdp_watts) * self.pue

    def describe(self) -> str:
        return (f"facility = (GPU + {self.node_overhead:.2f} x TDP node overhead) x PUE {self.pue:g}; "
                f"CO2 at {self.grid_g_per_kwh:.4g} g/kWh")
