"""Published micro-benchmark facts (package data) and the compute ceilings derived from them.

Why an empirical roofline rather than residual models. The analytic roofline runs every kernel
at its datasheet peak, and no GPU reaches it: the best shape of a brute-force GEMM search
(MAMF) gets 78-87 % of it on NVIDIA parts and 51 % on MI300X, FlashAttention-2 at most 65 % on
A100 and 34 % on H100. These published numbers are *ceilings* (each benchmark's best shape), which
is what a roofline's compute roof is, so they go into the catalog as such (``gpu.achievable``,
``gpu.flash_attention``) and the roofline uses them in place of the peak, visibly and with a
source, in the language where a user can read, override (``--set``) and differentiate them
(``llmp sensitivity`` treats them as symbols). Residual models then learn only what a roof cannot
express (small or skinny shapes, waves, launch overheads) from timed samples, relative to this
attainable roof. Turning one best-shape row per GPU into residual "samples" instead would fit a
constant per family from a single point and hide the number inside a model file.

What is derived (:func:`derive`), per catalog GPU:

* ``achievable``: MAMF's BF16 and FP8 rates of the measured part. FP16 takes the BF16 rate when
  the datasheet gives FP16 and BF16 the same peak (one tensor-core datapath; MAMF measured BF16).
* ``flash_attention``: the best forward+backward rate in the FlashAttention figures, over every
  implementation and shape (a training step runs both passes; one rate for both passes gives
  exactly the measured forward+backward time, with no assumption on how it splits). The figures
  are FP16; BF16 takes the rate when the peaks are equal. The FlashAttention-3 figure is forward
  only and sets no training ceiling.
* A GPU that is not a measured part takes a measured part's rate only when it has the same SM
  count, clock, board power and dtype peak (A100 SXM4 40GB from the 80GB part; H200 and H800 from
  H100, as the MAMF source itself says of H200). The same silicon held to a lower board power
  (torchtitan's 500 W H100) takes it as an upper bound: a power limit makes the GPU lower its
  clocks under load and never raises its throughput (NVIDIA's nvidia-smi ``--power-limit``: "the
  GPU will throttle its clocks to stay under the limit"), so the higher-power part's best rate is
  a tighter roof than the datasheet peak, still optimistic. Every other GPU keeps its datasheet
  peak.

``python benchmarks/published_ceilings.py`` prints the derivation, which is what the catalog's
``achievable`` and ``flash_attention`` lines hold (a test checks they agree).
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib.resources import files

from llmp.hardware.spec import Device, Dtype

MAMF_FILE = "mamf_bf16_fp8.csv"
FLASH_FILE = "flashattention_tflops_published.csv"
MAMF_SOURCE = ("MAMF (best torch.matmul shape), stas00/ml-engineering@744d01e compute/accelerator/README.md; "
               f"llmp/hardware/published/{MAMF_FILE}")
FLASH_SOURCE = ("best FlashAttention forward+backward rate of the published figure, Dao-AILab/flash-attention@0251105 "
                f"assets/; llmp/hardware/published/{FLASH_FILE}")

MEASURED_PART: dict[str, str] = {
    "NVIDIA A100 SXM": "a100_sxm4_80gb",
    "NVIDIA A100 PCIe": "a100_pcie_80gb",
    "NVIDIA H100 SXM": "h100_sxm5_80gb",
    "NVIDIA H200 SXM": "h200_sxm_141gb",
    "NVIDIA GH200 SXM": "gh200_144gb",  # the row's note: "900W 141GiB HBM3e version"
    "NVIDIA B200 SXM": "b200",
    "NVIDIA B300 SXM": "b300",
    "NVIDIA GB200 SXM": "gb200",
    "AMD MI300X": "mi300x",
    "AMD MI325X": "mi325x",
    "AMD MI355X": "mi355x",
    "A100 80GB SXM4": "a100_sxm4_80gb",
    "H100 80GB SXM5": "h100_sxm5_80gb",
}
"""Device names in the benchmark files → the catalog GPU that is that part. Not listed: Intel
Gaudi 2/3, which the catalog lacks. The GH200 row is the 141 GiB HBM3e 900 W version, i.e.
``gh200_144gb``, not the 96 GB HBM3 ``gh200_96gb``."""

MAMF_DTYPES = {"bf16": Dtype.BF16, "fp8_e4m3fn": Dtype.FP8}
FLASH_DTYPES = {"fp16": Dtype.FP16}
TWIN_DTYPES = ((Dtype.FP16, Dtype.BF16), (Dtype.BF16, Dtype.FP16))
"""(missing, measured): a dtype without a measurement takes its twin's rate at equal peaks."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fact:
    """One derived rate and how it was obtained."""

    rate: float
    """FLOP/s."""
    how: str
    """The row it comes from, and any transfer (another part, another dtype)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Ceilings:
    """The measured ceilings of one catalog GPU (empty tables: none, the datasheet peak applies)."""

    gpu: str
    achievable: dict[Dtype, Fact]
    flash_attention: dict[Dtype, Fact]


def rows(name: str) -> list[dict[str, str]]:
    """The rows of a shipped fact file."""
    text = files("llmp.hardware.published").joinpath(name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def mamf_facts() -> dict[str, dict[Dtype, Fact]]:
    """Measured catalog part → dtype → MAMF rate."""
    out: dict[str, dict[Dtype, Fact]] = {}
    for r in rows(MAMF_FILE):
        gpu = MEASURED_PART.get(r["accelerator"])
        if gpu is None or not r["mamf_tflops"]:
            continue
        how = (f"MAMF {r['accelerator']} {r['dtype']}: {r['mamf_tflops']} TFLOP/s at {r['best_shape_MxNxK']}, "
               f"torch {r['torch_version']}")
        out.setdefault(gpu, {})[MAMF_DTYPES[r["dtype"]]] = Fact(rate=float(r["mamf_tflops"]) * 1e12, how=how)
    return out


def flash_attention_facts() -> dict[str, dict[Dtype, Fact]]:
    """Measured catalog part → dtype → best forward+backward attention rate (any implementation)."""
    best: dict[tuple[str, Dtype], dict[str, str]] = {}
    for r in rows(FLASH_FILE):
        if r["pass"] != "fwd+bwd" or not r["tflops"] or r["gpu"] not in MEASURED_PART:
            continue
        key = (MEASURED_PART[r["gpu"]], FLASH_DTYPES[r["dtype"]])
        if key not in best or float(r["tflops"]) > float(best[key]["tflops"]):
            best[key] = r
    out: dict[str, dict[Dtype, Fact]] = {}
    for (gpu, dtype), r in best.items():
        causal = "causal" if r["causal"] == "True" else "non-causal"
        how = (f"{r['implementation']} fwd+bwd on {r['gpu']}: {r['tflops']} TFLOP/s at head_dim {r['head_dim']}, "
               f"{causal}, seqlen {r['seqlen']} x batch {r['batch']} ({r['figure']})")
        out.setdefault(gpu, {})[dtype] = Fact(rate=float(r["tflops"]) * 1e12, how=how)
    return out


def _same_silicon(a: Device, b: Device, dtype: Dtype) -> str | None:
    """How a compute-bound best-shape rate measured on ``b`` carries to ``a``: "same" for the same
    SMs, clock, board power and datasheet peak of ``dtype`` (the same silicon at the same operating
    point), "capped" when ``a`` is that silicon at a lower board power (the rate is then an upper
    bound), None otherwise."""
    if not ((a.sms, a.clock) == (b.sms, b.clock) and dtype in a.peak_flops
            and a.peak_flops.get(dtype) == b.peak_flops.get(dtype)):
        return None
    if a.tdp == b.tdp:
        return "same"
    return "capped" if a.tdp is not None and b.tdp is not None and float(a.tdp) < float(b.tdp) else None


def _for_device(device: Device, devices: Mapping[str, Device],
                measured: Mapping[str, dict[Dtype, Fact]]) -> dict[Dtype, Fact]:
    table = dict(measured.get(device.id, {}))
    others = [(o, devices[o], facts) for o, facts in sorted(measured.items()) if o != device.id and o in devices]
    for other, part, facts in others:  # the same silicon at the same operating point first
        for dtype, fact in facts.items():
            if dtype not in table and _same_silicon(device, part, dtype) == "same":
                table[dtype] = replace(fact, how=f"{fact.how}; measured on {other}, the same SMs, clock, "
                                                 "board power and peak")
    capped = [(fact.rate, dtype, other, part, fact) for other, part, facts in others for dtype, fact in facts.items()
              if dtype not in table and _same_silicon(device, part, dtype) == "capped"]
    for _, dtype, other, part, fact in sorted(capped, key=lambda c: (c[0], c[2])):  # the tightest bound
        if dtype not in table:
            table[dtype] = replace(fact, how=f"{fact.how}; an upper bound: measured on {other} at "
                                             f"{float(part.tdp or 0):.0f} W, the same silicon held to "
                                             f"{float(device.tdp or 0):.0f} W here")
    for missing, twin in TWIN_DTYPES:
        peaks = device.peak_flops
        if missing not in table and twin in table and missing in peaks and peaks[missing] == peaks.get(twin):
            fact = table[twin]
            table[missing] = replace(fact, how=f"{fact.how}; {missing.value} runs at the {twin.value} rate "
                                               "(equal datasheet peaks)")
    return {d: table[d] for d in Dtype if d in table and d in device.peak_flops}


def derive(devices: Mapping[str, Device]) -> dict[str, Ceilings]:
    """The measured ceilings of each device in ``devices`` (catalog id → resolved device)."""
    mamf, flash = mamf_facts(), flash_attention_facts()
    return {gpu: Ceilings(gpu=gpu, achievable=_for_device(d, devices, mamf),
                          flash_attention=_for_device(d, devices, flash)) for gpu, d in sorted(devices.items())}


FLASH_IMPLEMENTATIONS = {"flash1": "FlashAttention (v1)", "triton": "FlashAttention Triton"}
"""Attention kernels slower than FlashAttention-2 on the same shapes (``analytic.kernels.AttentionKernel``
value → the implementation's name in the figures)."""


@functools.cache
def _fwd_bwd_rates() -> dict[tuple[str, str, str, str], dict[str, float]]:
    """(GPU, causal, head dim, seqlen) -> implementation -> forward+backward TFLOP/s in the figures."""
    rates: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for r in rows(FLASH_FILE):
        if r["pass"] == "fwd+bwd" and r["tflops"]:
            rates.setdefault((r["gpu"], r["causal"], r["head_dim"], r["seqlen"]), {})[r["implementation"]] = \
                float(r["tflops"])
    return rates


@functools.cache
def relative_rate(kernel: str, head_dim: float | None, causal: bool) -> float:
    """The forward+backward rate of an earlier FlashAttention kernel relative to FlashAttention-2 on
    the same shape: the median over the figures' sequence lengths (512-16k) and GPUs (A100; H100
    for v1) at the measured head dim nearest ``head_dim`` in log scale (every head dim when it is
    None), with the mask. Both kernels compute the same FLOPs with the same traffic; the FA2 paper
    (Dao, arXiv 2307.08691, §3 and §4.1) puts the difference in work partitioning between thread
    blocks and warps: FA2 measured 1.7-3.0x FlashAttention and 1.3-2.5x its Triton version on
    A100. 0.41-0.74 in the figures, lowest at head dim 128."""
    name = FLASH_IMPLEMENTATIONS[kernel]
    rates = _fwd_bwd_rates()
    dims = sorted({int(key[2]) for key, by in rates.items() if name in by})
    near = dims if head_dim is None else [min(dims, key=lambda d: abs(math.log2(d / head_dim)))]
    ratios = [by[name] / by["FlashAttention-2"] for (_, c, d, _), by in rates.items()
              if name in by and "FlashAttention-2" in by and int(d) in near and (c == "True") == causal]
    return float(statistics.median(ratios))
