"""Public GPU operator and NCCL measurements -> llmp sample directories (``llmp import-samples``).

No GPU is available to this project, so the GPU residual stores are fitted on public
measurements. One module per source format turns the source's rows into the ``Kernel`` s and
``Collective`` s that really ran, with llmp's own FLOP and byte counts, so the fit target
log(measured / llmp roofline) means the same for every source:

* ``seed``: the seed paper's Perlmutter A100 operator and NCCL CSVs (DebarghaG/estimate-train-time);
* ``vidur``: Vidur's compute ``mlp.csv`` and network ``all_reduce``/``send_recv`` profiles (microsoft/vidur);
* ``kernels``: the normalised ``kernels.csv`` of the shared data (cuDNN, SimuMax, XLA, aiter, DeepGEMM,
  LLMCompass, Echo and vTrain rows).

``common`` holds what they share: the sample rows, the duplicate rule, the composite split, the
writer. :func:`run` is what the CLI calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMATS = ("seed", "vidur", "kernels")


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """What an import wrote: the directory, its size, and the manifest (``import.json``)."""

    out: Path
    bytes: int
    manifest: dict[str, Any]


def run(fmt: str, paths: Sequence[str | Path], out: str | Path, *, device: str, gpu_id: str | None = None,
        node_id: str | None = None, keep_slow_inter_node: bool = False) -> Report:
    """Import ``paths`` (files or directories) of source format ``fmt`` for catalog device ``device``
    into the sample directory ``out`` (replaced atomically; a rerun writes the same bytes).

    ``gpu_id`` (kernels only) selects the data's ``gpu_id`` when it differs from ``device``;
    ``node_id`` overrides the catalog node collective rows ran on; ``keep_slow_inter_node`` keeps the
    seed's inter-node NCCL rows (README §8.1), which are skipped by default.
    """
    from llmp.errors import InputError
    from llmp.files import output_dir
    from llmp.residuals.importers import common, kernels, seed, vidur

    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint=f"choose one of {', '.join(FORMATS)}")
    output_dir(out, "-o (the sample directory)")
    if gpu_id is not None and fmt != "kernels":
        raise InputError("--gpu-id selects rows of kernels.csv; it does not apply to --format " + fmt)
    if keep_slow_inter_node and fmt != "seed":
        raise InputError("--keep-slow-inter-node applies to the seed's NCCL files only")
    module = {"seed": seed, "vidur": vidur, "kernels": kernels}[fmt]
    files, ignored = common.discover(paths, module.accept, fmt)
    if fmt == "seed":
        collected = seed.collect(files, device_id=device, node_id=node_id, keep_slow_inter_node=keep_slow_inter_node)
    elif fmt == "vidur":
        collected = vidur.collect(files, device_id=device, node_id=node_id)
    else:
        collected = kernels.collect(files, device_id=device, gpu_id=gpu_id, node_id=node_id)
    imported = common.finish(collected, ignored=[p.name for p in ignored])
    size = common.write(imported, Path(out))
    return Report(out=Path(out), bytes=size, manifest=imported.manifest)
