"""Derived devices: ``gpu h100_96 from h100_sxm5_80gb { memory = 96 GiB  tdp = 500 W }``.

A user describes a variant of a catalog GPU by what differs, instead of copying ~20 datasheet
values. A derived gpu block starts from its base:

* a field written in the block replaces the base's; every other field is the base's, except
  ``name``, which names the base's product and so is never inherited (it defaults to the id);
* a sub-block written in the block (``flops { }``, ``achievable { }``) replaces the base's
  sub-block as a whole, so one device never mixes two datasheets' rate tables, and an empty
  ``achievable { }`` drops measured ceilings that belong to the base's exact part;
* a base may itself be derived; the chain is followed to a block written out in full, and a
  loop is an error that shows it.

This happens on the syntax tree, before anything is evaluated: inherited fields are evaluated
in the derived block exactly like written ones (a base's ``fp16 = bf16`` follows a derived
``bf16``), with the same unit and bound checks, and ``--set gpu.memory=...`` applies on top.
Base ids go through the catalog's alias table (``from gh200`` means ``gh200_96gb``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from llmp.dsl import ast
from llmp.errors import SpecError
from llmp.hardware import catalog

NOT_INHERITED = frozenset({"name"})
"""Fields a derived block never takes from its base."""


@dataclass(frozen=True, slots=True)
class Flattened:
    """A derived block's effective entries: its own over its bases'."""

    fields: dict[str, ast.Field]
    subs: dict[str, ast.Body]
    origin: dict[str, str]
    """Entry name -> id of the block in the chain that wrote it."""
    chain: tuple[str, ...]
    """Base ids, nearest first."""


def flatten(block: ast.Block, hardware: Mapping[str, Mapping[str, ast.Block]]) -> Flattened:
    """The entries of the derived gpu ``block`` (``block.base`` set), bases resolved through
    ``hardware`` (section -> id -> block: every gpu, node and link of the program)."""
    assert block.name is not None and block.base is not None
    chain = [block]
    current = block
    while current.base is not None:
        base_id = catalog.canonical(current.base.text)
        ids = [b.name.text for b in chain if b.name is not None]
        if base_id in ids:
            loop = " from ".join([*ids[ids.index(base_id):], base_id])
            raise SpecError(f"gpu {loop}", current.base.span, label="circular derivation",
                            hint="a gpu cannot be derived from itself, directly or through others")
        base = hardware["gpu"].get(base_id)
        if base is None:
            raise _unknown_base(current.base, base_id, hardware)
        chain.append(base)
        current = base
    fields: dict[str, ast.Field] = {}
    subs: dict[str, ast.Body] = {}
    origin: dict[str, str] = {}
    for source in reversed(chain):
        assert source.name is not None
        for entry in source.body.entries:
            name = entry.name.text
            if isinstance(entry, ast.Field):
                if source is not block and name in NOT_INHERITED:
                    continue
                fields[name] = entry
            else:
                subs[name] = entry.body
            origin[name] = source.name.text
    return Flattened(fields=fields, subs=subs, origin=origin,
                     chain=tuple(b.name.text for b in chain[1:] if b.name is not None))


def check_all(hardware: Mapping[str, Mapping[str, ast.Block]]) -> None:
    """Follow every derived gpu's chain (unknown bases, loops), used or not, so a catalog file
    with a bad base fails the first time any spec includes it."""
    for block in hardware["gpu"].values():
        if block.base is not None:
            flatten(block, hardware)


def _unknown_base(ident: ast.Ident, base_id: str, hardware: Mapping[str, Mapping[str, ast.Block]]) -> SpecError:
    written = ident.text if ident.text == base_id else f"{ident.text} (= {base_id})"
    for section in ("node", "link"):
        if base_id in hardware[section]:
            return SpecError(f"'{written}' is a {section}, not a gpu; a gpu derives from a gpu",
                             ident.span, label="wrong type",
                             hint="name a gpu id after 'from' (e.g. h100_sxm5_80gb)")
    found = catalog.entry(base_id)
    if found is not None and found[0] == "gpu":
        return SpecError(f"gpu '{written}' is not defined in this spec", ident.span,
                         label="unknown base", hint=f'it is in the catalog: add use "{found[1].stem}"')
    known = sorted(set(hardware["gpu"]) | set(catalog.catalog_ids()["gpu"]) | set(catalog.ALIASES))
    close = difflib.get_close_matches(ident.text, known, n=1, cutoff=0.6)
    return SpecError(f"no gpu has the id '{written}'", ident.span, label="unknown base",
                     hint=f"did you mean '{close[0]}'?" if close else
                     "a gpu derives from a gpu defined in the spec or its use'd files")
