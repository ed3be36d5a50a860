"""The page's calls into the library: the same functions as the CLI, with the CLI's defaults.

``llmp check`` → :func:`check` (``llmp.loads``), ``llmp predict`` → :func:`prediction`
(``llmp.predict`` with the default residual store and the 80% band), ``--trace`` →
``llmp.compose.trace.trace``, ``llmp search`` → :func:`search`, ``llmp plan`` → :func:`plan`.
Nothing is computed a second way here: the page only lays out what these return.

Predictions are kept in a small cache keyed by (text, file name, overrides), so flipping a
what-if control back and forth costs nothing, and the library is entered by one request at a
time (a lock): the page is a local app for one user, and the library's own caches were written
for one thread.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from llmp.compose import predict
from llmp.compose.prediction import Prediction
from llmp.compose.trace import trace as chrome_trace
from llmp.dsl import loads
from llmp.errors import LlmpError
from llmp.planning import plan as plan_run
from llmp.search import load as load_search
from llmp.search import search as search_layouts
from llmp.serve.controls import BY_PATH
from llmp.serve.edit import with_use
from llmp.serve.view import View
from llmp.spec.spec import Spec

T = TypeVar("T")
LOCK = threading.RLock()
CACHED = 256
"""Predictions kept (a 70B prediction holds about a megabyte)."""
_WAITING = [0]
"""Requests waiting for the library (the warm-up gives way to them)."""


def locked(fn: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        _WAITING[0] += 1  # a heuristic for the warm-up: a lost update only delays it by one prediction
        with LOCK:
            _WAITING[0] -= 1
            return fn(*args, **kwargs)
    return run


def evaluated_text(view: View) -> str:
    """The text the library reads: the editor's, with ``use "NODE"`` added when the node control
    names a catalog node the text does not include (a ``--set cluster.node`` needs it in scope)."""
    node = next((s.partition("=")[2].strip() for s in view.sets if s.startswith(BY_PATH["cluster.node"].path + "=")),
                None)
    return view.text if not node else with_use(view.text, node, view.filename)


@locked
def check(view: View) -> Spec:
    """``llmp check``: the resolved spec, or the located :class:`LlmpError`."""
    return _spec(evaluated_text(view), view.filename, view.sets)


@functools.lru_cache(maxsize=CACHED)
def _spec(text: str, filename: str, sets: tuple[str, ...]) -> Spec:
    return loads(text, filename=filename, overrides=sets)


@functools.lru_cache(maxsize=CACHED)
def _prediction(text: str, filename: str, sets: tuple[str, ...]) -> Prediction:
    pred = predict(_spec(text, filename, sets), "default")
    pred.band  # noqa: B018 - drawn now, inside the lock, so rendering never runs the library
    return pred


@locked
def prediction(view: View) -> Prediction:
    """``llmp predict`` (default residual store, 80% band) of the view's spec and overrides."""
    return _prediction(evaluated_text(view), view.filename, view.sets)


@locked
def trace(view: View) -> dict[str, Any]:
    """``llmp predict --trace``: the Chrome-trace / Perfetto JSON of the view's step."""
    return chrome_trace(_prediction(evaluated_text(view), view.filename, view.sets))


_IDLE = threading.Event()
_IDLE.set()


def warm(view: View, sets: Sequence[Sequence[str]]) -> None:
    """Predict each of ``sets`` on the view's text into the cache, one at a time, stopping as soon
    as a request waits for the library: the What-if tab's neighbours (each control one step away)
    are then answered from the cache. Run after a response is sent; errors (a layout the rules
    refuse) are the request's to report, so they are skipped here."""
    _IDLE.clear()
    try:
        for extra in sets:
            if _WAITING[0] > 0:
                return
            with LOCK:
                try:
                    _prediction(evaluated_text(view.with_sets(extra)), view.filename, tuple(extra))
                except LlmpError:
                    continue
    finally:
        _IDLE.set()


def idle(timeout: float) -> bool:
    """Wait until no warm-up runs (True), or ``timeout`` seconds (False); for benchmarks and tests."""
    return _IDLE.wait(timeout)


class SpecFile:
    """The view's spec as a file, for the commands that read one (search, plan): the file itself
    when the text is what is on disk, else a private temporary copy named after it (``use`` of
    catalog entries resolves from anywhere; a spec including files next to it is searched as
    saved). Removed on exit."""

    def __init__(self, view: View) -> None:
        self.view = view
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> str:
        path = Path(self.view.filename)
        text = evaluated_text(self.view)
        try:
            same = path.is_file() and path.read_text(encoding="utf-8") == text
        except (OSError, UnicodeDecodeError, ValueError):
            same = False
        if same:
            return str(path)
        self._tmp = tempfile.TemporaryDirectory(prefix="llmp-serve-")
        copy = Path(self._tmp.name) / (path.name if path.suffix == ".llmp" else "spec.llmp")
        copy.write_text(text, encoding="utf-8")
        return str(copy)

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


@locked
def search(view: View, gpus: Sequence[int], top: int) -> Any:
    """``llmp search SPEC --gpus N,... --top K`` (the CLI's objective, step time, and memory limit)."""
    with SpecFile(view) as path:
        spec, resolve = load_search(path, view.sets)
        return search_layouts(spec, gpus=list(gpus), top=top, resolve=resolve)


@locked
def plan(view: View, **kwargs: Any) -> Any:
    """``llmp plan`` of the view's spec with the plan tab's inputs (the CLI's defaults for the rest)."""
    with SpecFile(view) as path:
        return plan_run(path, sets=view.sets, **kwargs)


def message(err: LlmpError, view: View) -> str:
    """The diagnostic as ``llmp check`` prints it, the temporary copy's path (search, plan) shown as
    the spec's own name."""
    copy = re.escape(os.path.join(tempfile.gettempdir(), "llmp-serve-")) + r"[^/\s]+/[^:\s)]+"
    return re.sub(copy, lambda _: view.filename, err.render())
