"""The search space: axes (a field and its candidate values) and their product as columns.

Axes come from three places, later ones replacing earlier ones for the same field:

* sweep lists declared in the spec (``tp = [1, 2, 4, 8]``, :attr:`Spec.sweeps`);
* ``--vary path=v1,v2,...`` on the command line (values in .llmp syntax: ``2TB/s``, ``full``);
* layouts for ``N`` GPUs (:func:`layout_axes`): tensor, pipeline and virtual-pipeline degrees,
  micro-batch, recompute, sequence parallelism and ZeRO stage, with ``dp = N / (tp pp cp)`` and
  the cluster resized to ``N`` GPUs.

A grid is the ``itertools.product`` of its axes; every configuration is a row and every field a
column (a struct of arrays), which is what :func:`llmp.compose.evaluate` takes.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmp.analytic.schedules import entry
from llmp.errors import InputError, shorten
from llmp.spec import schema, specpath
from llmp.spec.spec import Recompute, Schedule, Spec, ZeroStage, replica_size
from llmp.spec.values import MAXIMA

LAYOUT_VP = (1, 2, 4)
LAYOUT_MICRO_BATCH = (1, 2, 4, 8)
LAYOUT_RECOMPUTE = tuple(r.value for r in Recompute)
LAYOUT_ZERO = (ZeroStage.NONE.value, ZeroStage.Z1.value, ZeroStage.Z2.value, ZeroStage.Z3.value)
"""ZeRO stages tried for layouts (``fsdp`` prices as ZeRO-3)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Axis:
    """One varied field and its candidate values (SI numbers, enum spellings or booleans)."""

    path: str
    values: tuple[Any, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Grid:
    """Configurations as columns: ``columns[path][i]`` is field ``path`` of configuration ``i``."""

    columns: dict[str, np.ndarray]
    varied: tuple[str, ...]
    """The fields the user (or the layout enumeration) varies, in display order."""
    size: int
    dropped: np.ndarray | None = None
    """Per configuration, why it was left out before any check ran ("" if it was not)."""

    def reasons(self) -> np.ndarray:
        return self.dropped.copy() if self.dropped is not None else np.full(self.size, "", dtype=object)

    def with_columns(self, columns: dict[str, np.ndarray]) -> Grid:
        return Grid(columns=columns, varied=self.varied, size=self.size, dropped=self.dropped)

    def take(self, rows: np.ndarray) -> Grid:
        """The configurations ``rows`` only, in that order."""
        return Grid(columns={p: c[rows] for p, c in self.columns.items()}, varied=self.varied, size=len(rows),
                    dropped=None if self.dropped is None else self.dropped[rows])


MAX_VALUES = 256
"""Most values one ``--vary`` lists: sweeps vary a degree or a size over a few powers of two; a list
of thousands is a generated grid, and each value multiplies the configurations search evaluates
(2,000 values of one field took 5.7 GB)."""


def parse_vary(text: str) -> tuple[str, list[str]]:
    """``"parallel.tp=1,2,4"`` → (``parallel.tp``, ``["1", "2", "4"]``); values are checked later."""
    path_text, eq, values_text = text.partition("=")
    raw = path_text.strip()
    path = "parallel." + raw.removeprefix("train.parallel.") if raw.startswith("train.parallel.") else raw
    if not eq:
        raise InputError(f"--vary needs path=v1,v2,..., got {text!r}", hint="e.g. --vary parallel.tp=1,2,4,8")
    fdef = schema.field_at(path)
    if fdef is None:
        close = difflib.get_close_matches(path, list(schema.paths()), n=1, cutoff=0.6)
        raise InputError(f"--vary: '{path}' is not a spec field",
                         hint=f"did you mean '{close[0]}'?" if close else "paths look like parallel.tp, model.hidden")
    if path in ("model.arch",) or fdef.kind in (schema.Kind.STRING, schema.Kind.REF, schema.Kind.LINK):
        raise InputError(f"--vary: {path} cannot be varied", hint="vary numeric fields, or train/parallel options")
    inner = values_text.strip().removeprefix("[").removesuffix("]")
    values = [v.strip() for v in inner.split(",")]
    if not inner.strip() or any(not v for v in values):
        raise InputError(f"--vary {path}: empty value in {values_text.strip()!r}", hint=f"e.g. --vary {path}=1,2,4")
    if len(values) > MAX_VALUES:
        raise InputError(f"--vary {path}: {len(values):,} values, more than the {MAX_VALUES} one sweep axis takes",
                         hint="vary over fewer values (powers of two, say), or search in several runs")
    if len(set(values)) != len(values):
        twice = next(v for v in values if values.count(v) > 1)
        raise InputError(f"--vary {path}: the value {shorten(twice, 60)!r} is listed twice in "
                         f"{shorten(values_text.strip(), 120)!r}")
    return path, values


def sweep_override(path: str, values: Sequence[str]) -> str:
    """The ``--set`` text that declares the same sweep, so the resolver checks units and names."""
    return f"{path}=[{', '.join(values)}]"


def declared_axes(spec: Spec) -> list[Axis]:
    """The spec's sweep lists as axes (enums as their spelling)."""
    return [Axis(path=s.path, values=tuple(_plain(v) for v in s.values)) for s in spec.sweeps]


def _plain(v: Any) -> Any:
    return v.value if hasattr(v, "value") and not isinstance(v, (int, float, bool)) else v


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending (pairs up to its square root, so 10^12 GPUs is quick)."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return low + [n // d for d in reversed(low) if d * d != n]


def layout_axes(spec: Spec, gpus: int) -> tuple[list[Axis], dict[str, Any]]:
    """Axes of every layout on ``gpus`` GPUs, and the fixed fields that resize the cluster to it.

    Candidates: tp divides the GPUs and is at most the attention heads (a group larger than a
    node or NVLink domain runs across the NICs, priced as such); pp divides the GPUs and is at
    most the layer count; vp, micro-batch, recompute, sequence parallelism and ZeRO from short lists that
    include the spec's own values. Combinations that cannot run are dropped later, with reasons.
    """
    per_node = int(spec.cluster.node.gpus_per_node)
    if gpus < 1:
        raise InputError(f"--gpus needs a positive count, got {gpus}")
    if gpus > MAXIMA["cluster.nodes"] * per_node:
        raise InputError(f"--gpus {gpus} is beyond any real cluster (at most {MAXIMA['cluster.nodes']:.0e} nodes)")
    if gpus % per_node == 0:
        fixed: dict[str, Any] = {"cluster.nodes": gpus // per_node, "node.gpus_per_node": per_node}
    elif gpus < per_node and per_node % gpus == 0:
        fixed = {"cluster.nodes": 1, "node.gpus_per_node": gpus}
    else:
        raise InputError(f"--gpus {gpus} does not fill whole nodes of {per_node} GPUs",
                         hint=f"use a multiple of {per_node}, or a divisor of it for part of one node")
    layers, heads = int(spec.model.layers), int(spec.model.heads)
    axes = [
        Axis(path="parallel.tp", values=tuple(d for d in divisors(gpus) if d <= heads)),
        Axis(path="parallel.pp", values=tuple(d for d in divisors(gpus) if d <= layers)),
        Axis(path="parallel.vp", values=tuple(sorted({*LAYOUT_VP, int(spec.parallel.vp)}))),
        Axis(path="train.micro_batch", values=tuple(sorted({*LAYOUT_MICRO_BATCH, int(spec.train.micro_batch)}))),
        Axis(path="train.recompute", values=LAYOUT_RECOMPUTE),
        Axis(path="parallel.sequence_parallel", values=(False, True)),
        Axis(path="parallel.zero", values=LAYOUT_ZERO),
    ]
    return axes, fixed


def merge_axes(*groups: Sequence[Axis]) -> list[Axis]:
    """Axes by path, a later group's axis replacing an earlier one's, first-seen order kept."""
    out: dict[str, Axis] = {}
    for group in groups:
        for axis in group:
            out[axis.path] = axis
    return list(out.values())


def product(axes: Sequence[Axis], fixed: Mapping[str, Any] | None = None) -> Grid:
    """Every combination of the axes' values, plus ``fixed`` fields, as columns (in the order of
    ``itertools.product``: the last axis varies fastest)."""
    sizes = [len(a.values) for a in axes]
    n = math.prod(sizes)
    columns: dict[str, np.ndarray] = {}
    for j, axis in enumerate(axes):
        which = np.tile(np.repeat(np.arange(sizes[j]), math.prod(sizes[j + 1:])), math.prod(sizes[:j]))
        columns[axis.path] = _column(list(axis.values))[which]
    for path, value in (fixed or {}).items():
        columns[path] = _column([value] * min(n, 1))[np.zeros(n, dtype=int)]
    return Grid(columns=columns, varied=tuple(a.path for a in axes), size=n)


def _column(values: list[Any]) -> np.ndarray:
    if values and all(isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=bool)
    if values and all(isinstance(v, (int, float)) for v in values):
        return np.asarray(values, dtype=float)
    return np.asarray(values, dtype=object)


def concat(grids: Sequence[Grid]) -> Grid:
    """Grids for several GPU counts, stacked (their fields are the same)."""
    if len(grids) == 1:
        return grids[0]
    paths = list(dict.fromkeys(p for g in grids for p in g.columns))
    columns = {p: np.concatenate([g.columns[p] for g in grids]) for p in paths}
    varied = tuple(dict.fromkeys(p for g in grids for p in g.varied))
    dropped = np.concatenate([g.reasons() for g in grids])
    return Grid(columns=columns, varied=varied, size=sum(g.size for g in grids), dropped=dropped)


def layout_columns(spec: Spec, grid: Grid, gpus: int) -> Grid:
    """Add the columns a layout implies: ``dp = gpus / (tp pp cp)`` and, unless the schedule is
    varied, the schedule (the spec's own where the layout's pp and vp meet its requirements, else
    interleaved 1F1B for vp > 1 and 1F1B for vp = 1); leave out degrees that do not multiply to the
    GPU count, and sequence parallelism without tp (the same configuration as without it)."""
    cols = dict(grid.columns)
    cp = float(specpath.get(spec, "parallel.cp"))
    model_parallel = replica_size(cols["parallel.tp"], cols["parallel.pp"], cp)
    cols["parallel.dp"] = gpus / model_parallel
    if "parallel.schedule" not in cols:
        own = spec.parallel.schedule
        degrees = np.column_stack([np.broadcast_to(cols[p], (grid.size,)) for p in ("parallel.pp", "parallel.vp")])
        pairs, which = np.unique(degrees, axis=0, return_inverse=True)
        names = [own if entry(own).requires(int(pp), int(vp), None, None) is None
                 else Schedule.INTERLEAVED if vp > 1 else Schedule.ONE_F_ONE_B for pp, vp in pairs]
        cols["parallel.schedule"] = np.array([n.value for n in names], dtype=object)[which.reshape(grid.size)]
    dropped = grid.reasons()
    sp_col = cols.get("parallel.sequence_parallel")
    if sp_col is not None:
        dropped[(sp_col == True) & (cols["parallel.tp"] == 1)] = (  # noqa: E712 - elementwise on a column
            "duplicate: sequence parallelism without tp is the same layout")
    dropped[np.mod(gpus, model_parallel) != 0] = "layout: tp x pp x cp does not divide the GPU count"
    return Grid(columns=cols, varied=grid.varied, size=grid.size, dropped=dropped)


def _option(spec: Spec, path: str, value: Any) -> Any:
    """An enum or boolean field of the model, train or parallel section, as the spec types it."""
    section, _, name = path.partition(".")
    current = getattr(getattr(spec, section), name)
    return bool(value) if isinstance(current, bool) else type(current)(value)


def _scalar(x: Any) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def row_spec(spec: Spec, columns: Mapping[str, np.ndarray], i: int, paths: Sequence[str] | None = None,
             numeric: frozenset[str] | None = None) -> Spec:
    """The spec of configuration ``i`` (only the fields ``paths``, default all); ``numeric`` is
    ``specpath.paths(spec)``, passed in by callers that build many rows. One copy of each section
    that changes, however many of its fields do (a search builds thousands)."""
    numbers = frozenset(specpath.paths(spec)) if numeric is None else numeric
    return specpath.replace(spec, {p: _scalar(columns[p][i]) if p in numbers else _option(spec, p, columns[p][i])
                                   for p in (columns if paths is None else paths)})


def group_index(grid: Grid, paths: Sequence[str]) -> np.ndarray:
    """Group index of each row over the columns ``paths``."""
    if not paths:
        return np.zeros(grid.size, dtype=int)
    codes, sizes = [], []
    for p in paths:
        found, code = np.unique(grid.columns[p].astype(str) if grid.columns[p].dtype == object else grid.columns[p],
                                return_inverse=True)
        codes.append(code.reshape(grid.size))
        sizes.append(max(len(found), 1))
    if math.prod(sizes) < 2**62:  # one number per combination, the first column the most significant
        combined = np.zeros(grid.size, dtype=np.int64)
        for code, size in zip(codes, sizes):
            combined = combined * size + code
        return np.unique(combined, return_inverse=True)[1].reshape(grid.size)
    return np.unique(np.column_stack(codes), axis=0, return_inverse=True)[1].reshape(grid.size)


def groups(grid: Grid, paths: Sequence[str], rows: np.ndarray) -> list[np.ndarray]:
    """``rows`` split into groups that agree on the columns ``paths``."""
    if len(rows) == 0:
        return []
    index = group_index(grid, paths)[rows]
    order = np.argsort(index, kind="stable")
    cuts = np.flatnonzero(np.diff(index[order])) + 1
    return np.split(rows[order], cuts)
