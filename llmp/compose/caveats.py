"""What a prediction's headline must say beside its numbers, when the numbers alone would mislead.

A step time can look right and not be: a GPU described by hand with no measured ceilings runs its
GEMMs at the datasheet peak, which no GPU reaches, and a model FLOPs utilisation above what any
published run reached says the inputs are optimistic, not that the layout is excellent. Each
caveat is a sentence that names the cause and the fix; ``llmp predict`` prints them under the
utilisation line and ``--json`` carries them as ``caveats``.
"""

from __future__ import annotations

from llmp.hardware.catalog import catalog_ids
from llmp.spec.spec import Spec

BEST_PUBLISHED_MFU = 0.6423
"""The highest MFU among the published runs in ``validation/``: MPT-7B on 8 A100 80GB, sequence 2048
(mosaicml/llm-foundry@8c8dd48f72 scripts/train/benchmarking/README.md; validation/llm_foundry_mpt.csv).
Large runs report less: Megatron-LM GPT-3 175B 52% (Narayanan et al. 2021), PaLM 540B 46.2%
(Chowdhery et al. 2022), Llama 3 405B 38-43% (Dubey et al. 2024)."""

PLAUSIBLE_MFU = 0.65
"""Above this MFU a prediction is flagged: past the best published run (:data:`BEST_PUBLISHED_MFU`)."""

MFU_HFU = ("MFU counts 6N + 12 L h s FLOPs per token (PaLM's convention: attention without its causal half), "
           "HFU the FLOPs the kernels run (causal half, recompute included), so HFU can be the lower one")
"""Why the two utilisations differ, shown when MFU exceeds HFU."""


def _unmeasured_device(spec: Spec) -> str | None:
    """A caveat when the spec's GPU is written by hand or derived, and no measured ceiling bounds it."""
    gpu = spec.cluster.node.gpu
    if gpu.achievable is not None or gpu.flash_attention is not None:
        return None
    if gpu.derivation is None and gpu.id in catalog_ids()["gpu"]:
        return None  # a catalog entry as shipped: its provenance lists what its ceilings are
    origin = f"derived from {gpu.derivation.base}" if gpu.derivation is not None else "described in the spec"
    return (f"gpu {gpu.id} ({origin}) has no measured ceilings: GEMMs and attention are priced at its datasheet "
            "peak, which no GPU reaches, so this step is likely too fast; add achievable { ... } with a "
            "benchmark's rates (docs/language.md, 'achievable and flash_attention')")


def caveats(spec: Spec, mfu: float, hfu: float) -> tuple[str, ...]:
    """The headline's caveats for a prediction of ``spec`` with these utilisations."""
    out = []
    device = _unmeasured_device(spec)
    if device is not None:
        out.append(device)
    if mfu > PLAUSIBLE_MFU:
        out.append(f"MFU {mfu:.1%} is above any published training run (best: {BEST_PUBLISHED_MFU:.1%}, MPT-7B on "
                   "8 A100s; large runs 38-55%): the inputs are likely optimistic (a GPU's ceilings, a link, "
                   "overlap); check them before trusting the step time")
    if mfu > hfu:
        out.append(MFU_HFU)
    return tuple(out)
