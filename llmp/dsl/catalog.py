"""Catalog ids → resolved hardware: the one way to get a catalog GPU, link, node or cluster.

    from llmp.dsl import catalog
    catalog.node("dgx_h100").inter.bandwidth      # 400e9 (bytes/s per node per direction)
    catalog.gpu("gh200").id                       # "gh200_96gb" (an alias names its entry)

The catalog is written in the .llmp language, so its entries are resolved by the language's own
resolver (units, expressions, defaults, ``gpu X from Y``), read from the catalog file that defines
the id and evaluated with that block pinned in place of a spec's active one: no model or train
section is needed, nothing is made up around the entry. What a spec gets for ``node = dgx_h100``
is exactly what :func:`node` returns. Finding the file (ids, aliases) is
:mod:`llmp.hardware.catalog`'s job, below the language; the typed objects are
:mod:`llmp.hardware.spec`'s. Results are cached: the catalog ships with the package.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from llmp.dsl.blocks import Definitions, collect
from llmp.dsl.build import build_cluster, build_device, build_link, build_node
from llmp.dsl.includes import attach_source_line, load_program, read_file
from llmp.dsl.resolve import Resolver
from llmp.errors import LlmpError, SpecError
from llmp.hardware import catalog as index
from llmp.hardware.spec import Cluster, Device, Link, Node

T = TypeVar("T")


@functools.cache
def _program(path: Path) -> tuple[Definitions, dict[str, str]]:
    """Every block of catalog file ``path`` and the files it uses, and their texts."""
    program = load_program(read_file(path), str(path))
    return collect(program), program.sources()


def _resolve(kind: str, ident: str, make: Callable[[Resolver], T]) -> T:
    found = index.entry(ident)
    if found is None or found[0] != kind:
        ids = index.catalog_ids()[kind]
        what = f"a catalog {found[0]}, not a {kind}" if found is not None else f"not a catalog {kind}"
        close = difflib.get_close_matches(ident, ids, n=1, cutoff=0.6)
        raise SpecError(f"'{ident}' is {what}", label="unknown catalog entry",
                        hint=f"did you mean '{close[0]}'?" if close else f"catalog {kind} ids: {', '.join(ids)}")
    path = found[1]
    defs, sources = _program(path)
    try:
        return make(Resolver(defs, str(path), {}, pinned={kind: index.canonical(ident)}))
    except LlmpError as err:
        attach_source_line(err, sources)
        raise


@functools.cache
def gpu(ident: str) -> Device:
    """The catalog GPU (or CPU device) ``ident``; an alias names its canonical entry."""
    return _resolve("gpu", ident, build_device)


@functools.cache
def link(ident: str) -> Link:
    """The catalog link ``ident`` (``nvlink4``, ``ndr_ib_x8``)."""
    return _resolve("link", ident, lambda r: build_link(r, "link"))


@functools.cache
def node(ident: str) -> Node:
    """The catalog node ``ident``, with its GPU and both links."""
    return _resolve("node", ident, build_node)


@functools.cache
def cluster(ident: str) -> Cluster:
    """The catalog cluster ``ident``, with its node (and its own inter-node link if it names one)."""
    return _resolve("cluster", ident, build_cluster)


def gpus() -> dict[str, Device]:
    """Every catalog GPU by id."""
    return {ident: gpu(ident) for ident in index.catalog_ids()["gpu"]}


@functools.cache
def nodes_with(gpu_id: str) -> tuple[Node, ...]:
    """The catalog nodes built from ``gpu_id`` (or its alias's entry), in id order."""
    wanted = index.canonical(gpu_id)
    return tuple(n for n in map(node, index.catalog_ids()["node"]) if n.gpu.id == wanted)
