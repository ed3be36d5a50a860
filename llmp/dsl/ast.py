"""The .llmp syntax tree: frozen dataclasses named after the grammar rules that build them.

Fields are positional in the grammar's child order (``transform.py`` calls each class with the
rule's children inline) and every node ends with its :class:`~llmp.errors.Span`. Nothing here
knows what a field means; ``resolve.py`` gives the tree its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmp.errors import Span


@dataclass(frozen=True, slots=True)
class Ident:
    """A word in the text that names something: a field, a block id, a keyword, ``1f1b``."""

    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Number:
    """A number literal, kept as written (``1_000``, ``3.35``, ``1e-3``) so it stays exact."""

    text: str
    span: Span


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number followed by a unit literal: ``80 GiB``, ``400 Gb/s``."""

    number: Number
    unit: Ident
    span: Span


@dataclass(frozen=True, slots=True)
class Ref:
    """A bare word (``hidden``, ``llama``, ``dgx_h100``) or a dotted path (``model.hidden``).

    Whether a bare word is a field of the same block, an enum value or a hardware id depends on
    the field it is assigned to, so the resolver decides.
    """

    parts: tuple[Ident, ...]
    span: Span

    @property
    def dotted(self) -> str:
        return ".".join(p.text for p in self.parts)


@dataclass(frozen=True, slots=True)
class Boolean:
    """``true`` or ``false``."""

    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class String:
    """A double-quoted string, unescaped."""

    value: str
    span: Span


@dataclass(frozen=True, slots=True)
class Neg:
    """Unary minus."""

    operand: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Add:
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Sub:
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Mul:
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Div:
    left: Expr
    right: Expr
    span: Span


Expr = Number | Quantity | Ref | Boolean | String | Neg | Add | Sub | Mul | Div


@dataclass(frozen=True, slots=True)
class Sweep:
    """``[1, 2, 4, 8]``: the field takes the first value; ``llmp search`` tries them all."""

    items: tuple[Expr, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Symbol:
    """``symbol``: leave the field as a free SymPy symbol for sensitivity analysis."""

    span: Span


@dataclass(frozen=True, slots=True)
class Body:
    """The ``{ ... }`` of a block: fields and sub-blocks in written order."""

    entries: tuple[Field | SubBlock, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class InlineLink:
    """``link { bandwidth = ...  latency = ... }`` written as a field value."""

    body: Body
    span: Span


Value = Expr | Sweep | Symbol | InlineLink


@dataclass(frozen=True, slots=True)
class Field:
    """``name = value``."""

    name: Ident
    value: Value
    span: Span


@dataclass(frozen=True, slots=True)
class SubBlock:
    """``flops { ... }``, ``moe { ... }``, ``parallel { ... }`` inside a block."""

    name: Ident
    body: Body
    span: Span


@dataclass(frozen=True, slots=True)
class Block:
    """A top-level block: ``model llama3_8b { ... }``, ``train { ... }``,
    ``gpu h100_96 from h100_sxm5_80gb { ... }`` (``base`` is the id after ``from``)."""

    kind: Ident
    name: Ident | None
    base: Ident | None
    body: Body
    span: Span


@dataclass(frozen=True, slots=True)
class Use:
    """``use "file"``: include another file (relative path or catalog name)."""

    path: String
    span: Span


@dataclass(frozen=True, slots=True)
class Start:
    """A whole file: includes and blocks in written order (rule ``start``)."""

    items: tuple[Use | Block, ...]
    span: Span


Document = Start
"""The conventional name for a parsed file."""


@dataclass(frozen=True, slots=True)
class SetValue:
    """The value of one ``--set section.field=value`` (rule ``set_value``)."""

    value: Value
    span: Span
