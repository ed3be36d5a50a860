"""Which fields a sensitivity is taken with respect to, and how other fields move with them.

Names are the paths ``--set`` accepts (``model.hidden``, ``parallel.tp``, ``gpu.flops.bf16``,
``cluster.inter.bandwidth``; ``train.parallel.tp`` is spelled ``parallel.tp``) or the symbol
registry's names (``hidden``, ``gpu_mem_bandwidth``).

A derivative follows the spec's own derivations, exactly as ``--set`` would: in a spec that
omits ``dp``, raising ``parallel.tp`` lowers ``dp = GPUs / (tp pp cp)``; raising ``model.hidden``
raises ``head_dim = hidden / heads`` when the spec leaves ``head_dim`` to its default. The
derivations come from the resolver itself: the spec is resolved again with the field left free
(``--set path=symbol``), and every field that comes back as an expression of that symbol moves
with it (:func:`derivations`). Fields written as plain numbers stay fixed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy as sp

from llmp.dsl import checks
from llmp.errors import LlmpError, Span, SpecError
from llmp.spec import schema, specpath
from llmp.spec.spec import Spec
from llmp.spec.symbols import registry, symbol_for
from llmp.spec.values import Num, to_count, to_real
from llmp.units import COUNT, parse_quantity

Resolve = Callable[[Sequence[str]], Spec]
"""Resolve the same spec source again with extra ``--set`` overrides appended."""


def canonical(spec: Spec, name: str) -> str:
    """The spec path a ``--wrt``/``--at`` name refers to; a did-you-mean error if none."""
    text = name.strip()
    if text.startswith("train.parallel."):
        text = text.removeprefix("train.")
    present = specpath.paths(spec)
    if text in present:
        return text
    if text in registry() and registry()[text][0] in present:
        return registry()[text][0]
    fdef = schema.field_at(text)
    if fdef is not None and not fdef.numeric:
        raise SpecError(f"'{text}' is not a numeric field: a derivative needs a number",
                        label="not numeric", hint="pick a count or a rate, e.g. model.hidden or gpu.mem_bandwidth")
    if fdef is not None or (text in registry()):
        raise SpecError(f"'{text}' is not in this spec (a dense model has no model.moe.*; a GPU has only the "
                        "dtypes its flops block declares)", label="absent field")
    close = difflib.get_close_matches(text, [*present, *registry()], n=1, cutoff=0.6)
    hint = (f"did you mean '{close[0]}'?" if close
            else "names are --set paths, e.g. model.hidden, parallel.tp, gpu.mem_bandwidth")
    raise SpecError(f"'{text}' is not a spec field", label="unknown field", hint=hint)


def is_integer(path: str) -> bool:
    """Counts (layers, degrees, batch sizes) are whole numbers; they are differentiated as reals."""
    fdef = schema.field_at(path)
    return fdef is not None and fdef.kind is schema.Kind.COUNT


def free_paths(spec: Spec) -> tuple[str, ...]:
    """Fields the spec leaves free (``= symbol``)."""
    return tuple(spec.symbols)


def parse_at(spec: Spec, items: Sequence[str]) -> dict[str, float]:
    """``["model.hidden=4096", "gpu.mem_bandwidth=3 TB/s"]`` → path → SI value, for free fields only."""
    values: dict[str, float] = {}
    free = free_paths(spec)
    for line, item in enumerate(items, start=1):
        name, eq, text = item.partition("=")
        if not eq or not text.strip():
            raise SpecError(f"--at needs path=value, got {item!r}", label="bad --at",
                            hint="e.g. --at model.hidden=4096")
        path = canonical(spec, name)
        if path not in free:
            raise SpecError(f"{path} is not free in the spec; --at gives values to `= symbol` fields only",
                            label="bad --at", hint=f"change it with --set {path}={text.strip()}")
        q = parse_quantity(text)
        fdef = schema.field_at(path)
        assert fdef is not None
        if fdef.kind is schema.Kind.REAL and q.dim != fdef.dim:
            raise SpecError(f"--at {path} needs {fdef.dim.describe()}, got {text.strip()!r}", label="unit mismatch",
                            hint=f"e.g. --at {path}={fdef.dim.example()}")
        if fdef.kind is schema.Kind.COUNT and not q.dim.is_count:
            raise SpecError(f"--at {path} is a plain count, got {text.strip()!r}", label="unit mismatch")
        # the language's own checks of the field: sign, whole number, physical range
        convert = to_count if fdef.kind is schema.Kind.COUNT else to_real
        convert(Num(q.value, fdef.dim if fdef.kind is schema.Kind.REAL else COUNT), fdef, path,
                Span(AT_FILE, line, 1, line, len(item) + 1))
        values[path] = float(q.value)
    return values


AT_FILE = "--at"
"""The pseudo-file ``--at`` diagnostics point into: the k-th ``--at`` is its line k."""


def pin(spec: Spec, at: Mapping[str, float]) -> Spec:
    """The spec with its free fields set to ``at`` and every field derived from them evaluated.

    Raises when a free field has no value, or when the values break a cross-field rule.
    """
    missing = [p for p in free_paths(spec) if p not in at]
    if missing:
        raise SpecError(f"the spec leaves {', '.join(missing)} free; a value is needed here",
                        label="free field", hint=f"give it one with --at {missing[0]}=VALUE")
    subs = {symbol_for(p): sp.Integer(int(v)) if float(v).is_integer() else sp.Float(v) for p, v in at.items()}
    values: dict[str, Any] = {}
    for path in specpath.paths(spec):
        v = specpath.get(spec, path)
        if isinstance(v, sp.Basic) and v.free_symbols:
            x = v.xreplace(subs)
            if x.free_symbols:
                raise SpecError(f"{path} = {v} still has free symbols after --at", label="free field")
            if is_integer(path) and not float(x).is_integer():
                raise SpecError(f"--at makes {path} = {v} = {float(x):g}, not a whole number",
                                label="not a whole number", hint="choose values the spec's own expressions divide")
            fdef = schema.field_at(path)
            if fdef is not None and fdef.bound is not None and x.is_number and (
                    float(x) <= 0 if fdef.bound is schema.Bound.POSITIVE else float(x) < 0):
                raise SpecError(f"--at makes {path} = {v} = {float(x):g}, which must be "
                                f"{'positive' if fdef.bound is schema.Bound.POSITIVE else 'zero or more'}",
                                label="bad value")
            values[path] = int(x) if x.is_Integer or (is_integer(path) and float(x).is_integer()) else float(x)
    pinned = specpath.replace(spec, values)
    checks.check(pinned, lambda _path: None)
    return pinned


def derivations(spec: Spec, path: str, resolve: Resolve | None) -> tuple[dict[str, sp.Expr], bool]:
    """Fields that move with ``path``: path → its value as an expression of ``path``'s symbol.

    The second item is False when the derivations could not be learned (no resolver, or the
    spec does not resolve with the field free): then only the field itself moves.
    """
    sym = symbol_for(path)
    if path in free_paths(spec):
        source = spec
    elif resolve is None:
        return {path: sym}, False
    else:
        try:
            source = resolve([f"{path}=symbol"])
        except LlmpError:
            return {path: sym}, False
    out: dict[str, sp.Expr] = {}
    for p in specpath.paths(source):
        v = specpath.get(source, p)
        if isinstance(v, sp.Basic) and sym in v.free_symbols:
            out[p] = v
    out.setdefault(path, sym)
    return out, True
