"""Frames: the block instances the resolver evaluates, built from the AST before any field is read.

A :class:`Frame` is one block instance at a spec path (``model``, ``gpu.flops``, ``node.intra``):
its written fields and sub-blocks, the ``--set`` overrides of its path substituted for what the file
wrote (so an override goes through exactly the same checks as the file), and a derived gpu's entries
flattened over its bases (``derive.py``). Building one reads no field; which block is in effect at a
path, and what a link field names, do, so :class:`~llmp.dsl.resolve.Resolver` decides those and
calls here, then evaluates the frame's fields into ``vals`` and ``values``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llmp.dsl import ast, derive
from llmp.dsl.overrides import SET_FILE
from llmp.errors import Span
from llmp.hardware.spec import Derivation
from llmp.spec.schema import SECTIONS, Section
from llmp.spec.values import Val


@dataclass(frozen=True, slots=True)
class LinkTarget:
    """What a link field names: a ``link`` block's body (by id) or an inline ``link { }``."""

    id: str
    body: ast.Body
    span: Span


@dataclass(slots=True)
class Frame:
    """One block instance at a spec path, with its evaluated fields."""

    path: str
    section: Section
    block_id: str
    span: Span
    """Where the block starts (for 'missing field' errors)."""
    fields: dict[str, ast.Field]
    """Written fields, with ``--set`` overrides already substituted."""
    subs: dict[str, ast.Body]
    parent: Frame | None = None
    derivation: Derivation | None = None
    """For a derived gpu: its bases and which block wrote each entry (``derive.py``)."""
    vals: dict[str, Val | None] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


def block_frame(path: str, block: ast.Block, overrides: Mapping[str, ast.Field]) -> Frame:
    """The frame of a top-level block (named, or by its kind) at ``path``."""
    block_id = block.name.text if block.name is not None else block.kind.text
    return body_frame(path, SECTIONS[path], block_id, block.span, block.body, None, overrides)


def derived_frame(path: str, block: ast.Block, hardware: Mapping[str, Mapping[str, ast.Block]],
                  overrides: Mapping[str, ast.Field]) -> Frame:
    """A derived gpu: its entries over its bases' (``derive.py``), ``--set`` on top."""
    assert block.name is not None
    flat = derive.flatten(block, hardware)
    frame = _frame_from(path, SECTIONS[path], block.name.text, block.span,
                        dict(flat.fields), dict(flat.subs), None, overrides)
    origin = dict(flat.origin)
    for opath in overrides:
        parent_path, _, name = opath.rpartition(".")
        if parent_path == path:
            origin[name] = SET_FILE
        elif parent_path.startswith(f"{path}.") and parent_path.count(".") == 1:
            origin[parent_path.partition(".")[2] + "." + name] = SET_FILE
    frame.derivation = Derivation(chain=flat.chain, origin=origin)
    return frame


def body_frame(path: str, section: Section, block_id: str, span: Span, body: ast.Body | None,
               parent: Frame | None, overrides: Mapping[str, ast.Field]) -> Frame:
    """The frame of a block body (None: a block only ``--set`` writes), sub-blocks kept for their own."""
    entries = body.entries if body is not None else ()
    fields = {e.name.text: e for e in entries if isinstance(e, ast.Field)}
    subs = {e.name.text: e.body for e in entries if isinstance(e, ast.SubBlock)}
    return _frame_from(path, section, block_id, span, fields, subs, parent, overrides)


def _frame_from(path: str, section: Section, block_id: str, span: Span, fields: dict[str, ast.Field],
                subs: dict[str, ast.Body], parent: Frame | None, overrides: Mapping[str, ast.Field]) -> Frame:
    for opath, ofield in overrides.items():
        if opath.rpartition(".")[0] == path:
            fields[ofield.name.text] = ofield
    return Frame(path=path, section=section, block_id=block_id, span=span, fields=fields,
                 subs=subs, parent=parent)
