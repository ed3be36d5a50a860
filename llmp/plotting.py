"""matplotlib on demand: the ``[plot]`` extra, loaded only by the commands that draw (``--plot``),
on the non-interactive Agg backend; without it the command says so instead of failing."""

from __future__ import annotations

import importlib
from typing import Any

from llmp.errors import InputError


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or an :class:`InputError` naming the extra."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ModuleNotFoundError:
        raise InputError("--plot needs matplotlib, which is not installed", label="missing extra",
                         hint="pip install 'llmp[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")
