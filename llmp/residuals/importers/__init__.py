"""Public GPU operator and NCCL measurements -> llmp sample directories (``llmp import-samples``).

No GPU is available to this project, so the GPU residual stores are fitted on public
measurements. One module per source format turns the source's rows into the ``Kernel`` s and
``Collective`` s that really ran, with llmp's own FLOP and byte counts, so the fit target
log(measured / llmp roofline) means the same for every source:

* ``seed``: the seed paper's operator and NCCL CSVs (DebarghaG/estimate-train-time), of any GPU: its
  file prefix names the GPU through ``llmp.hardware.names``, or ``--gpu`` does;
* ``vidur``: Vidur's compute ``mlp.csv`` and network ``all_reduce``/``send_recv`` profiles (microsoft/vidur);
* ``kernels``: the normalised ``kernels.csv`` of the shared data (cuDNN, SimuMax, XLA, aiter, DeepGEMM,
  LLMCompass, Echo and vTrain rows).

``common`` holds what they share: the sample rows, the duplicate rule, the composite split, the
import's manifest; ``tables`` reads the sources' CSVs, ``sampledir`` writes the sample directory;
``physics`` the plausibility rules (rows above the device's peak or its links, a backward
faster than its forward allows), the same for every machine. :func:`run` is what the CLI calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmp.errors import InputError
from llmp.files import output_dir
from llmp.hardware import names
from llmp.residuals.importers import common, kernels, sampledir, seed, tables, vidur

FORMATS = ("seed", "vidur", "kernels")


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """What an import wrote: the directory, its size, and the manifest (``import.json``)."""

    out: Path
    bytes: int
    manifest: dict[str, Any]


def run(fmt: str, paths: Sequence[str | Path], out: str | Path, *, device: str | None = None,
        gpu_id: str | None = None, node_id: str | None = None) -> Report:
    """Import ``paths`` (files or directories) of source format ``fmt`` into the sample directory
    ``out`` (replaced atomically; a rerun writes the same bytes).

    ``device`` is the GPU the rows were measured on: a catalog id, an alias (``gh200``) or a driver
    product name, resolved by ``llmp.hardware.names`` (the seed's files name their GPU in their
    prefix, so there it may be left out). ``gpu_id`` (kernels only) selects the data's ``gpu_id``
    when it differs from ``device``; ``node_id`` overrides the catalog node collective rows ran on.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}", hint=f"choose one of {', '.join(FORMATS)}")
    output_dir(out, "-o (the sample directory)")
    if gpu_id is not None and fmt != "kernels":
        raise InputError("--gpu-id selects rows of kernels.csv; it does not apply to --format " + fmt)
    if device is None and fmt != "seed":
        raise InputError(f"--format {fmt} needs the GPU the rows were measured on",
                         hint="name it with --gpu ID (a catalog id or alias)")
    module = {"seed": seed, "vidur": vidur, "kernels": kernels}[fmt]
    files, ignored = tables.discover(paths, module.accept, fmt)
    if fmt == "seed":
        collected = seed.collect(files, device_id=device, node_id=node_id)
    elif fmt == "vidur":
        assert device is not None
        collected = vidur.collect(files, device_id=names.gpu_id(device), node_id=node_id)
    else:
        assert device is not None
        collected = kernels.collect(files, device_id=_kernels_device(device), gpu_id=gpu_id, node_id=node_id)
    imported = common.finish(collected, ignored=[p.name for p in ignored])
    size = sampledir.write(imported, Path(out))
    return Report(out=Path(out), bytes=size, manifest=imported.manifest)


def _kernels_device(device: str) -> str:
    """The kernels table also holds GPUs about to join the catalog (``mi210``): their ids pass as given."""
    return device if device in names.KERNELS.values() else names.gpu_id(device)
