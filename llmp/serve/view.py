"""What the page shows, as one value: the spec text, its ``--set`` overrides, the tab, and the
inputs of the search and plan tabs.

A view comes from a form (every request of the page posts the whole form) or from a link's
query string (:meth:`View.to_query` writes the link that reproduces it), and is checked the same
way from both: a value the page cannot read is an :class:`~llmp.errors.InputError` naming the
field and the fix, never a 500.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlencode

from llmp.errors import InputError

MAX_TEXT = 1_000_000
"""Characters of spec text the page accepts (the largest shipped example is about 5,000)."""


class Tab(StrEnum):
    EDITOR = "editor"
    PREDICTION = "prediction"
    WHATIF = "whatif"
    SEARCH = "search"
    PLAN = "plan"
    EXPORT = "export"


PLAN_FIELDS = ("tokens", "gpus", "deadline", "price", "mttf", "restart", "checkpoint", "storage", "pue",
               "node_overhead", "grid", "power", "idle")
"""The plan tab's inputs, named as the form names them (each maps to an ``llmp plan`` flag)."""
SEARCH_FIELDS = ("search_gpus", "top")


@dataclass(frozen=True, kw_only=True, slots=True)
class View:
    """Everything one page shows."""

    text: str
    """The spec as edited."""
    filename: str
    """Where the spec came from (``use`` paths resolve next to it); the name a download gets."""
    sets: tuple[str, ...] = ()
    """``section.field=value`` overrides on top of the text (the what-if controls, a chosen layout)."""
    tab: Tab = Tab.EDITOR
    plan: Mapping[str, str] = field(default_factory=dict)
    """Plan inputs by :data:`PLAN_FIELDS` name, as typed (checked by ``llmp.plan`` itself)."""
    search: Mapping[str, str] = field(default_factory=dict)

    def with_sets(self, sets: Sequence[str]) -> View:
        return replace(self, sets=tuple(sets))

    def to_query(self) -> str:
        """The query string of a link that reproduces this view (the text itself travels in it)."""
        pairs: list[tuple[str, str]] = [("file", self.filename), ("text", self.text), ("tab", self.tab.value)]
        pairs += [("set", s) for s in self.sets]
        pairs += [(k, v) for k, v in {**self.plan, **self.search}.items() if v]
        return urlencode(pairs)


def from_params(params: Mapping[str, str] | None, lists: Mapping[str, list[str]], default: tuple[str, str]) -> View:
    """The view a form or query string describes; ``default`` (filename, text) when it names no spec.

    ``params`` holds single values, ``lists`` repeated ones (``set``). A ``spec`` parameter names
    one of the files the app was started with, by position (``spec=0``)."""
    params = params or {}
    filename, text = default
    if "text" in params:
        text = params["text"]
        filename = params.get("file") or filename
    if len(text) > MAX_TEXT:
        raise InputError(f"the spec text is {len(text):,} characters, more than the {MAX_TEXT:,} the page takes",
                         hint="shorten it, or run llmp predict on the file")
    tab_text = params.get("tab", Tab.EDITOR.value)
    try:
        tab = Tab(tab_text)
    except ValueError:
        raise InputError(f"unknown tab {tab_text!r}", hint=f"use one of: {', '.join(t.value for t in Tab)}") from None
    sets = tuple(s.strip() for s in lists.get("set", []) if s.strip())
    for s in sets:
        if "=" not in s:
            raise InputError(f"an override needs section.field=value, got {s!r}", hint="e.g. set=parallel.tp=8")
    return View(text=text, filename=_clean_name(filename), sets=sets, tab=tab,
                plan={k: params[k].strip() for k in PLAN_FIELDS if params.get(k, "").strip()},
                search={k: params[k].strip() for k in SEARCH_FIELDS if params.get(k, "").strip()})


def _clean_name(filename: str) -> str:
    """The spec's name as given (a path the app was started with, or a name from a link); a name
    with a NUL or a newline is refused, since it ends up in diagnostics and download headers."""
    if any(c in filename for c in "\0\r\n") or len(filename) > 4096:
        raise InputError("the spec's file name has a control character or is too long", hint="use a plain path")
    return filename or "spec.llmp"


def download_name(filename: str) -> str:
    """A safe file name for a download of the spec (its own name, letters, digits, ``._-`` only)."""
    stem = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(filename).stem) or "spec"
    return f"{stem}.llmp"
