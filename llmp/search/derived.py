"""The fields a spec derives from varied ones (``dp = 64 / tp``, ``nvlink_domain = gpus_per_node``).

A search varies some fields; a field the spec computes from them must follow. The resolver is
the one home of those computations, so it computes them again, exactly as ``llmp.load`` with
``--set`` would:

1. :class:`Resolution` (what :func:`llmp.search.engine.load` returns) resolves the spec once more
   with a resolver that records which fields each field reads (:class:`_Reads`), so each field's
   varied inputs are known without SymPy;
2. each field that reads a varied numeric field, directly or not, is resolved again for every
   combination of those fields' values in the grid (a layout search has one or a few: the nodes
   and GPUs per node of the resized cluster), with the values as ``--set`` overrides.

A numeric search then never imports SymPy (a third of a second). With more than :data:`LIMIT`
combinations, or a combination the resolver refuses (a derived ``dp`` that does not divide),
the fields are derived symbolically instead: resolved once with the varied fields as free
symbols and evaluated on the columns (:func:`_symbolic`), as before this module existed.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmp import dsl
from llmp.dsl.blocks import collect
from llmp.dsl.build import build
from llmp.dsl.frames import Frame
from llmp.dsl.includes import load_program, read_file
from llmp.dsl.overrides import parse_overrides
from llmp.dsl.resolve import Resolver
from llmp.errors import LlmpError, Span
from llmp.search.space import Grid
from llmp.spec import schema, specpath
from llmp.spec.spec import Spec
from llmp.spec.symbols import symbol_for
from llmp.spec.values import Val
from llmp.sym import has_free_symbols, is_expr, sympy
from llmp.units import COUNT, UNITS

LIMIT = 64
"""Most combinations of varied values a derived field is resolved for one by one (about a
millisecond each); beyond, one symbolic resolution and a vectorised evaluation are cheaper."""

_SI = {u.dim: symbol for symbol, u in UNITS.items() if u.factor == 1}
"""The unit of factor 1 of each dimension (``B``, ``B/s``, ``FLOP/s``, ``s``, ...): a value in
SI written with it reads back exactly."""


class _Reads(Resolver):
    """A resolver that records, for each field, the fields its evaluation reads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads: dict[str, set[str]] = {}
        """Field → the fields its own expression (or default) reads."""
        self._open: list[str] = []

    def val(self, frame: Frame, name: str, span: Span | None = None) -> Val | None:
        key = f"{frame.path}.{name}"
        self.reads.setdefault(key, set())
        if self._open:
            self.reads[self._open[-1]].add(key)
        self._open.append(key)
        try:
            return super().val(frame, name, span)
        finally:
            self._open.pop()


class Resolution:
    """Resolves the searched spec (its file, ``--set`` and ``--vary`` overrides) again with more
    overrides; a :data:`~llmp.search.engine.Resolve`."""

    def __init__(self, source: str | os.PathLike[str], overrides: Sequence[str]) -> None:
        self.source = source
        self.overrides = tuple(overrides)
        self._defs: Any = None

    def __call__(self, extra: Sequence[str]) -> Spec:
        return dsl.load(self.source, [*self.overrides, *extra])

    def _resolver(self, extra: Sequence[str] = (), cls: type[Resolver] = Resolver) -> Resolver:
        if self._defs is None:
            self._defs = collect(load_program(read_file(self.source), str(self.source)))
        return cls(self._defs, str(self.source), parse_overrides([*self.overrides, *extra]))

    def inputs(self) -> dict[str, frozenset[str]]:
        """Every field the spec evaluates → the fields its value depends on (directly or not)."""
        resolver = self._resolver(cls=_Reads)
        assert isinstance(resolver, _Reads)
        build(resolver, str(self.source))
        closed: dict[str, frozenset[str]] = {}

        def close(key: str) -> frozenset[str]:  # the resolver refuses circular definitions
            if key not in closed:
                direct = resolver.reads[key]
                closed[key] = frozenset(direct).union(*(close(k) for k in direct))
            return closed[key]

        return {key: close(key) for key in resolver.reads}

    def value(self, key: str, extra: Sequence[str]) -> Any:
        """The value of field ``key`` (a resolver path) with ``extra`` overrides."""
        resolver = self._resolver(extra)
        frame, _, name = key.rpartition(".")
        return resolver.get(resolver.frame(frame), name)


def resolution_of(spec: Spec) -> Resolution | None:
    """A :class:`Resolution` of ``spec``'s own file, when that file alone resolves to ``spec`` (a
    spec loaded with ``--set`` overrides, or from text, has none: its derivations cannot be read
    again, so the API and the command agree only when they were given the same file)."""
    if not os.path.isfile(spec.source):
        return None
    again = Resolution(spec.source, ())
    try:
        return again if again(()) == spec else None
    except LlmpError:
        return None


def derive(resolve: Any, spec: Spec, grid: Grid) -> tuple[Grid, list[str]]:
    """Add columns for the fields the spec derives from varied numeric fields (fields that also
    depend on a field the spec leaves free get none: the search then says what is missing)."""
    numeric = [p for p in grid.columns if p in specpath.paths(spec) and grid.columns[p].dtype != object]
    if not numeric:
        return grid, []
    if isinstance(resolve, Resolution):
        try:
            columns = _numeric(resolve, spec, grid, numeric)
        except (LlmpError, _TooMany):
            columns = None
        if columns is not None:
            return grid.with_columns(columns), []
    return _symbolic(resolve, spec, grid, numeric)


class _TooMany(Exception):
    """More combinations than :data:`LIMIT`, or a value with no exact text."""


def _key(path: str, evaluated: dict[str, frozenset[str]]) -> str:
    """The resolver field a spec path reads: a cluster without an inter link of its own uses the
    node's (``llmp.dsl.build.build_cluster``)."""
    if path.startswith("cluster.inter.") and path not in evaluated:
        return "node.inter." + path.removeprefix("cluster.inter.")
    return path


def _text(path: str, value: float) -> str:
    """``--set`` text that resolves to ``value`` exactly."""
    fdef = schema.field_at(path)
    assert fdef is not None
    if not np.isfinite(value):
        raise _TooMany(path)
    if fdef.kind is schema.Kind.COUNT:
        if value != int(value):
            raise _TooMany(path)
        return f"{path}={int(value)}"
    unit = "" if fdef.dim == COUNT else " " + _SI[fdef.dim]
    return f"{path}={float(value)!r}{unit}"


def _numeric(resolution: Resolution, spec: Spec, grid: Grid, numeric: list[str]) -> dict[str, np.ndarray]:
    inputs = resolution.inputs()
    varied = {_key(p, inputs): p for p in numeric}
    columns = dict(grid.columns)
    by_inputs: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path in specpath.paths(spec):
        if path in columns:
            continue
        reads = inputs.get(_key(path, inputs), frozenset())
        used = tuple(p for k, p in varied.items() if k in reads)
        if used:
            by_inputs[used].append(path)
    for used, paths in by_inputs.items():
        stacked = np.column_stack([np.broadcast_to(grid.columns[p], (grid.size,)) for p in used])
        combos, which = np.unique(stacked, axis=0, return_inverse=True)
        if len(combos) > LIMIT:
            raise _TooMany(used)
        values: dict[str, list[Any]] = {p: [] for p in paths}
        for combo in combos:
            extra = [_text(p, float(v)) for p, v in zip(used, combo)]
            for path in paths:
                values[path].append(resolution.value(_key(path, inputs), extra))
        for path, found in values.items():
            if any(is_expr(v) for v in found):
                continue  # it also reads a field the spec leaves free
            columns[path] = np.asarray(found, float)[which.reshape(grid.size)]
    return columns


def _symbolic(resolve: Any, spec: Spec, grid: Grid, numeric: list[str]) -> tuple[Grid, list[str]]:
    """Resolve once with the varied fields free and evaluate the derived fields on the columns."""
    try:
        free = resolve([f"{p}=symbol" for p in numeric])
    except LlmpError as err:
        return grid, [f"fields derived from the varied ones were not re-derived: {err.message}"]
    syms = [symbol_for(p) for p in numeric]
    columns = dict(grid.columns)
    for path in specpath.paths(free):
        value = specpath.get(free, path)
        if path in columns or not has_free_symbols(value) or not value.free_symbols <= set(syms):
            continue
        fn = sympy().lambdify(syms, value, modules="numpy")
        columns[path] = np.broadcast_to(np.asarray(fn(*(grid.columns[p] for p in numeric)), float), (grid.size,)).copy()
    return grid.with_columns(columns), []

