"""Training stacks as data: which kernels run, what overlaps and the fixed work of each step.

``profile(stack)`` is the one place a stack's behaviour is looked up; the resolver fills the
spec fields a stack decides (``train.attention``, ``parallel.dp_overlap``, ...) from it, and the
operator graph reads the facts that have no spec field (how gradients are cleared, clipped and
unscaled, how the loss is reported, how the vocab is padded).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llmp.spec.serialize import plain
from llmp.spec.spec import Spec, Stack
from llmp.stacks.catalog import PROFILES
from llmp.stacks.profile import (
    DEFAULT_FIELDS,
    ClipScale,
    Item,
    LossSync,
    Profile,
    SelectiveRecompute,
    Unscale,
    ZeroGrad,
)
from llmp.sym import has_free_symbols, sympy

__all__ = ["DEFAULT_FIELDS", "PROFILES", "ClipScale", "Item", "LossSync", "Profile", "SelectiveRecompute", "Unscale",
           "ZeroGrad", "defaults", "in_effect", "padded_vocab", "profile"]


def profile(stack: Stack) -> Profile:
    """The profile of ``stack``."""
    return PROFILES[stack]


def defaults(stack: Stack, section: str) -> dict[str, Any]:
    """The ``section`` fields (``train`` or ``parallel``) whose value ``stack`` decides, as its profile
    gives them: what code building a :class:`~llmp.spec.spec.TrainSpec` or
    :class:`~llmp.spec.spec.ParallelSpec` by hand passes (those fields have no dataclass default, so
    the profile stays their one home)."""
    prof = profile(stack)
    return {name: getattr(prof, name).value for name in DEFAULT_FIELDS[section]}


def _ceil_to(x: Any, multiple: Any) -> Any:
    """``x`` rounded up to a multiple of ``multiple`` (ints, numpy arrays or SymPy)."""
    if isinstance(x, int) and isinstance(multiple, int):
        return -(-x // multiple) * multiple
    if isinstance(x, np.ndarray) or isinstance(multiple, np.ndarray):
        return np.ceil(np.asarray(x, float) / multiple) * multiple
    sp = sympy()
    return sp.ceiling(sp.sympify(x) / multiple) * multiple


def padded_vocab(spec: Spec) -> Any:
    """Rows of the embedding and the output head: ``model.vocab`` rounded up to
    ``train.vocab_divisible_by`` (times ``tp`` where the stack pads per tensor-parallel rank, as
    Megatron's and GPT-NeoX's ``_vocab_size_with_padding`` do). A multiple of 1 leaves the vocab as
    written, whatever it holds. A symbolic multiple (sensitivity's closed forms) leaves it too:
    rounding is a step function, flat almost everywhere, and a closed form needs it smooth."""
    m, t, p = spec.model, spec.train, spec.parallel
    multiple = t.vocab_divisible_by * (p.tp if profile(t.stack).vocab_pad_tp.value else 1)
    if (isinstance(multiple, int) and multiple == 1) or has_free_symbols(multiple):
        return m.vocab
    return _ceil_to(m.vocab, multiple)


def in_effect(spec: Spec) -> list[dict[str, Any]]:
    """Every item of the spec's stack profile: its value in effect and where that comes from
    (the spec, when it set the field; else the profile item's citation)."""
    prof = profile(spec.train.stack)
    sections = {name: sec for sec, names in DEFAULT_FIELDS.items() for name in names}
    rows = []
    for name, item in prof.items():
        sec = sections.get(name)
        if sec is not None and f"{sec}.{name}" in spec.stack_set:
            value, source = getattr(getattr(spec, sec), name), "spec"
        else:
            value, source = (getattr(getattr(spec, sec), name) if sec else item.value), item.source
        rows.append({"item": name, "field": f"{sec}.{name}" if sec else None, "value": plain(value),
                     "source": source, "note": item.note})
    return rows
