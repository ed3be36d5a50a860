"""The shipped hardware catalog: ``llmp/hardware/catalog/*.llmp``, looked up by exact id.

Every GPU, node and cluster id lives in a file of the same name (``dgx_h100.llmp`` defines
``node dgx_h100``), so ``use "dgx_h100"`` finds it; links live together in ``links.llmp``.
:func:`find` also accepts any id defined in a catalog file, so ``use "nvlink4"`` works too,
and the retired short ids of :data:`ALIASES` (``gh200``), which name their canonical entry.

The index is built by a light scan of block headers (``gpu h100_sxm5_80gb {``), not by the DSL
parser: the resolver calls :func:`find` while resolving ``use``, so this module must not
depend on it. No network, no writes, nothing at import time.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType

from llmp.errors import SpecError

SUFFIX = ".llmp"

# `device` is the grammar's alias of `gpu`; both are reported as kind "gpu". A derived gpu
# (`gpu b300_1000w from b300 {`) is indexed under its own id.
_HEADER = re.compile(r"^[ \t]*(gpu|device|link|node|cluster)[ \t]+([A-Za-z_][A-Za-z0-9_]*)"
                     r"(?:[ \t]+from[ \t]+[A-Za-z_][A-Za-z0-9_]*)?[ \t]*\{", re.MULTILINE)
_KINDS = ("gpu", "link", "node", "cluster")

ALIASES: Mapping[str, str] = MappingProxyType({
    "gh200": "gh200_96gb",  # the 96 GB HBM3 GH200 was `gh200` until the 144 GB HBM3e part joined
})
"""Retired or short catalog ids -> the canonical id. The one table every lookup goes through:
``use "gh200"`` (:func:`find`), ``node.gpu = gh200`` and ``gpu x from gh200`` (the resolver,
through :func:`canonical`). A spec resolves to the canonical id, which ``llmp check`` shows."""


def catalog_dir() -> Path:
    """The directory holding the shipped ``*.llmp`` catalog files."""
    return Path(str(files("llmp.hardware").joinpath("catalog")))


@functools.cache
def defaults_dir(device_id: str) -> Path:
    """Where the residual store shipped for a catalog device lives (``llmp/hardware/defaults/<id>/``),
    whether or not one ships. Standard library only, so callers can look before importing xgboost."""
    return Path(str(files("llmp.hardware"))) / "defaults" / device_id


def _index() -> tuple[tuple[str, str, Path], ...]:
    """(kind, id, file) for every block header in the catalog, in file and line order."""
    entries = []
    for path in sorted(catalog_dir().glob(f"*{SUFFIX}")):
        text = "\n".join(line.split("#", 1)[0] for line in path.read_text(encoding="utf-8").splitlines())
        for match in _HEADER.finditer(text):
            kind = "gpu" if match.group(1) == "device" else match.group(1)
            entries.append((kind, match.group(2), path))
    return tuple(entries)


def catalog_ids() -> dict[str, list[str]]:
    """Ids defined in the catalog by kind: ``{"gpu": [...], "link": [...], "node": [...], "cluster": [...]}``."""
    ids: dict[str, list[str]] = {kind: [] for kind in _KINDS}
    for kind, ident, _ in _index():
        ids[kind].append(ident)
    return {kind: sorted(names) for kind, names in ids.items()}


def canonical(ident: str) -> str:
    """The canonical catalog id for ``ident`` (itself unless :data:`ALIASES` renames it)."""
    return ALIASES.get(ident, ident)


def entry(ident: str) -> tuple[str, Path] | None:
    """(kind, file) of the catalog block with id ``ident`` (an alias names its target), or None."""
    wanted = canonical(ident)
    return next(((kind, path) for kind, found, path in _index() if found == wanted), None)


def find(name: str) -> Path:
    """The catalog file for ``name``: a file stem (``".llmp"`` optional), an id defined in a
    file, or an alias of either (:data:`ALIASES`).

    Raises :class:`SpecError` with a did-you-mean hint when nothing matches.
    """
    stem = canonical(name.removesuffix(SUFFIX))
    candidate = catalog_dir() / f"{stem}{SUFFIX}"
    if "/" not in stem and "\\" not in stem and candidate.is_file():
        return candidate
    by_id = {ident: path for _, ident, path in _index()}
    if stem in by_id:
        return by_id[stem]
    known = sorted({path.stem for path in catalog_dir().glob(f"*{SUFFIX}")} | set(by_id) | set(ALIASES))
    close = difflib.get_close_matches(stem, known, n=1, cutoff=0.6)
    hint = (f"did you mean '{close[0]}'?" if close
            else "catalog entries: " + ", ".join(known))
    raise SpecError(f"'{name}' is neither a catalog file nor an id defined in one",
                    label="unknown catalog entry", hint=hint)
