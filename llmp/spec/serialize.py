"""A resolved Spec as plain JSON-ready data (for ``llmp check --json`` and golden files).

Numbers stay SI numbers, enums become their DSL spelling, free-symbol expressions become their
SymPy text (``4*hidden``), and the dtype-keyed peak table becomes ``{"bf16": ...}``.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from llmp.spec.spec import Spec
from llmp.sym import is_expr


def plain(value: Any) -> Any:
    """JSON-ready form of a spec value (recursing through dataclasses, dicts and tuples)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if is_expr(value):
        if value.is_Integer:
            return int(value)
        if value.is_Number:
            return float(value)
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    raise TypeError(f"cannot serialise {type(value).__name__}")


def spec_to_dict(spec: Spec) -> dict[str, Any]:
    """The spec as a dict: model, train, parallel, cluster, sweeps, symbols, source."""
    data: dict[str, Any] = plain(spec)
    return data
