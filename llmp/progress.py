"""Progress of long work: a callback the library calls, a bar the command line draws.

Library functions that can run for more than a couple of seconds (fitting, validating, planning
to a deadline, sensitivity, searching, calibrating, scoring) take ``progress: Progress | None``
and call it as the work advances; they never print. The CLI passes :func:`bar`'s callback: a
``rich`` bar on stderr, off with ``--quiet`` and whenever stderr is not a terminal (a pipe, a log,
CI), so output that is read by programs stays clean.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Progress = Callable[[int, int], None]
"""Called with (units done, units in all) as the work advances."""


def tick(progress: Progress | None, done: int, total: int) -> None:
    """Report ``done`` of ``total`` when someone listens."""
    if progress is not None:
        progress(done, total)


def enabled(quiet: bool) -> bool:
    """Whether to draw: asked for (no ``--quiet``) and stderr is a terminal someone watches."""
    return not quiet and sys.stderr.isatty()


@contextlib.contextmanager
def bar(label: str, *, quiet: bool = False) -> Iterator[Progress | None]:
    """A transient ``rich`` bar on stderr labelled ``label`` and its callback; None when
    :func:`enabled` says not to draw. The bar also shows the elapsed time, so a slow first unit
    is never silence."""
    if not enabled(quiet):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    drawn = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     console=Console(stderr=True), transient=True)
    task = drawn.add_task(label, total=None)

    def advance(done: int, total: int) -> None:
        drawn.update(task, completed=done, total=total)

    with drawn:
        yield advance
