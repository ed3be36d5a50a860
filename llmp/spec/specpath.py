"""Read and replace a spec's numeric fields by path, and turn a spec into symbols plus a point.

Paths are the ``section.field`` names of ``--set`` and of the symbol registry
(``llmp.spec.symbols``): ``model.hidden``, ``parallel.tp``, ``gpu.flops.bf16``,
``node.intra.bandwidth``, ``cluster.inter.latency``. This module maps them onto the nested
:class:`~llmp.spec.spec.Spec` dataclasses, so the analytic model can

* evaluate the same formulas symbolically: :func:`symbolize` replaces every numeric field by
  its registry symbol and returns the values as a point (``{symbol: value}``) to substitute late;
* evaluate a sweep: :func:`replace` puts numpy arrays (one per varied field) into the spec.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llmp.errors import SpecError
from llmp.hardware.spec import Dtype
from llmp.recent import Recent
from llmp.spec import schema
from llmp.spec.spec import Spec
from llmp.spec.symbols import symbol_for
from llmp.sym import is_expr

if TYPE_CHECKING:
    import sympy as sp

# First path component → attribute chain from the Spec root.
_ROOTS: dict[str, tuple[str, ...]] = {
    "model": ("model",), "train": ("train",), "parallel": ("parallel",),
    "cluster": ("cluster",), "node": ("cluster", "node"), "gpu": ("cluster", "node", "gpu"),
}

_RATE_BLOCKS = ("achievable", "flash_attention")
"""gpu sub-blocks held as :class:`~llmp.hardware.spec.Attainable` (``gpu.achievable.bf16``)."""


@functools.cache
def _locate(path: str) -> tuple[tuple[str, ...], str | Dtype]:
    """``gpu.flops.bf16`` → (("cluster", "node", "gpu", "peak_flops"), Dtype.BF16)."""
    head, *rest = path.split(".")
    if head not in _ROOTS or not rest:
        raise SpecError(f"no numeric spec field {path!r}")
    chain = _ROOTS[head] + tuple(rest[:-1])
    if head == "gpu" and rest[0] == "flops":
        return _ROOTS[head] + ("peak_flops",), Dtype(rest[-1])
    if head == "gpu" and rest[0] in _RATE_BLOCKS:
        return _ROOTS[head] + (rest[0], "rates"), Dtype(rest[-1])
    return chain, rest[-1]


@functools.cache
def _numeric_paths() -> tuple[str, ...]:
    return tuple(p for p, f in schema.paths().items() if f.numeric)


_LAST = Recent(1)
"""The last spec asked about and its paths (a search asks again for the same spec per batch)."""


def paths(spec: Spec) -> tuple[str, ...]:
    """Numeric field paths present in ``spec`` (MoE and MLA fields only for such models, fine-tuning fields
    for a fine-tuning step, declared dtypes,
    optional fields only when set)."""
    return _LAST.of(spec, lambda: _paths(spec))


def _paths(spec: Spec) -> tuple[str, ...]:
    out = []
    for path in _numeric_paths():
        if (path.startswith("model.moe.") and spec.model.moe is None) or (
                path.startswith("model.mla.") and spec.model.mla is None) or (
                path.startswith("train.finetune.") and spec.train.finetune is None):
            continue
        if path.startswith("gpu.flops.") and Dtype(path.rsplit(".", 1)[1]) not in spec.cluster.gpu.peak_flops:
            continue
        parts = path.split(".")
        if parts[0] == "gpu" and parts[1] in _RATE_BLOCKS:
            block = getattr(spec.cluster.gpu, parts[1])
            if block is None or Dtype(parts[2]) not in block.rates:
                continue
        elif get(spec, path) is None:  # an optional field left out (a link's peer_bandwidth)
            continue
        out.append(path)
    return tuple(out)


def get(spec: Spec, path: str) -> Any:
    """The value of a numeric field."""
    chain, last = _locate(path)
    obj: Any = spec
    for attr in chain:
        obj = getattr(obj, attr)
    return obj[last] if isinstance(last, Dtype) else getattr(obj, last)


class _Branch(dict):  # type: ignore[type-arg]
    """Changes below one field of a spec: attribute (or dtype) -> value or a further branch."""


def _apply(obj: Any, changes: _Branch) -> Any:
    if isinstance(obj, dict):  # a dtype-keyed table (``gpu.flops``): its entries are the leaves
        return {**obj, **changes}
    return dataclasses.replace(obj, **{str(k): _apply(getattr(obj, str(k)), v) if isinstance(v, _Branch) else v
                                       for k, v in changes.items()})


def replace(spec: Spec, values: Mapping[str, Any]) -> Spec:
    """A copy of ``spec`` with the numeric fields at ``values``' paths replaced (one copy of each
    section and block that changes, however many of its fields do: a search builds many)."""
    if not values:
        return spec
    tree = _Branch()
    for path, value in values.items():
        chain, last = _locate(path)
        node = tree
        for attr in chain:
            node = node.setdefault(attr, _Branch())
        node[last] = value
    return _apply(spec, tree)  # type: ignore[no-any-return]


def symbolize(spec: Spec) -> tuple[Spec, dict[sp.Symbol, Any]]:
    """Every numeric field replaced by its registry symbol, and the point that restores it.

    A field that already holds an expression (a free ``= symbol`` in the spec, or a field
    derived from one) keeps it and contributes nothing to the point.
    """
    values: dict[str, Any] = {}
    point: dict[sp.Symbol, Any] = {}
    for path in paths(spec):
        value = get(spec, path)
        if is_expr(value) and not value.is_number:
            continue
        sym = symbol_for(path)
        values[path] = sym
        point[sym] = value
    return replace(spec, values), point
