"""The what-if controls: one entry per knob, each a spec field set with ``--set``.

A control's value differs from the spec's → one override, exactly the ``--set`` the CLI takes, so
the page and ``llmp predict --set`` give the same step. Choices come from the spec language's own
enums and the hardware catalog, never from a list kept here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from llmp.hardware.catalog import catalog_ids
from llmp.spec import schema
from llmp.spec.spec import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Control:
    name: str
    """The form field's name."""
    path: str
    """The spec field it sets (``--set PATH=value``)."""
    label: str

    def choices(self) -> tuple[str, ...]:
        """Allowed values for a select (empty for a number)."""
        if self.path == "cluster.node":
            return tuple(catalog_ids()["node"])
        fdef = schema.field_at(self.path)
        enum = getattr(fdef, "enum", None)
        return tuple(str(m.value) for m in enum) if enum is not None else ()

    def value(self, spec: Spec) -> str:
        """The spec's own value, as the form shows it."""
        section, _, name = self.path.partition(".")
        obj: Any = {"parallel": spec.parallel, "train": spec.train, "cluster": spec.cluster}[section]
        value = getattr(obj, name)
        if self.path == "cluster.node":
            return str(value.id)
        return str(value.value) if isinstance(value, Enum) else str(int(value))


CONTROLS: tuple[Control, ...] = (
    Control(name="tp", path="parallel.tp", label="tensor parallel (tp)"),
    Control(name="pp", path="parallel.pp", label="pipeline parallel (pp)"),
    Control(name="vp", path="parallel.vp", label="virtual stages (vp)"),
    Control(name="dp", path="parallel.dp", label="data parallel (dp)"),
    Control(name="cp", path="parallel.cp", label="context parallel (cp)"),
    Control(name="ep", path="parallel.ep", label="expert parallel (ep)"),
    Control(name="micro_batch", path="train.micro_batch", label="micro-batch"),
    Control(name="recompute", path="train.recompute", label="recompute"),
    Control(name="zero", path="parallel.zero", label="ZeRO / FSDP"),
    Control(name="schedule", path="parallel.schedule", label="schedule"),
    Control(name="precision", path="train.precision", label="precision"),
    Control(name="node", path="cluster.node", label="GPU node"),
    Control(name="nodes", path="cluster.nodes", label="nodes"),
)
"""Every knob of the What-if tab, in the order shown."""

BY_NAME = {c.name: c for c in CONTROLS}
BY_PATH = {c.path: c for c in CONTROLS}
PREFIX = "wi_"
"""Form names of the controls are ``wi_<name>`` (kept apart from the plan and search inputs)."""


def overrides(form: Mapping[str, str], base: Spec) -> list[str]:
    """``--set`` texts for the controls whose form value differs from the spec's (in table order;
    dp only when it was changed, since it is derived from the others by default)."""
    out = []
    for c in CONTROLS:
        raw = form.get(PREFIX + c.name, "").strip()
        if raw and raw != c.value(base):
            out.append(f"{c.path}={raw}")
    return out


def field_of(sets: Sequence[str], line: int) -> str | None:
    """The control name of the ``line``-th override (1-based, as ``--set`` diagnostics count), if one."""
    if not 0 < line <= len(sets):
        return None
    control = BY_PATH.get(sets[line - 1].partition("=")[0].strip())
    return None if control is None else control.name


WARMED = ("tp", "pp", "vp", "cp", "ep", "micro_batch", "nodes", "recompute", "zero", "schedule", "precision")
"""Controls whose neighbours the page predicts ahead (:func:`neighbours`): all but dp, which alone
cannot change on a fixed GPU count, and the node (see there)."""


def neighbours(spec: Spec, sets: Sequence[str]) -> list[list[str]]:
    """Override lists one control step away from ``sets`` on ``spec`` (a number doubled or halved,
    an option switched to each other option), pipeline knobs first: the changes a user is likely to
    make next, which the What-if tab predicts ahead so they answer from its cache. When no control
    is set yet (the tab just opened), every other catalog node last, once: a device's first
    prediction loads its residual store, which later ones reuse."""
    out = []
    for name in WARMED:
        c = BY_NAME[name]
        rest = [s for s in sets if s.partition("=")[0].strip() != c.path]
        current = c.value(spec)
        options = [v for v in c.choices() if v != current] if c.choices() else [
            str(v) for v in (int(current) * 2, int(current) // 2) if v >= 1 and str(v) != current]
        out += [[*rest, f"{c.path}={v}"] for v in options]
    if not any(s.partition("=")[0].strip() in BY_PATH for s in sets):
        node = BY_NAME["node"]
        out += [[*sets, f"{node.path}={v}"] for v in node.choices() if v != node.value(spec)]
    return out
