"""matplotlib on demand: the ``[plot]`` extra, loaded only by the commands that draw (``--plot``),
on the non-interactive Agg backend; without it the command says so instead of failing."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from llmp import files
from llmp.errors import InputError

FORMATS = (".png", ".pdf", ".svg", ".svgz", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".eps", ".ps")
"""File formats matplotlib's Agg backend writes, by suffix (``FigureCanvasBase.get_supported_filetypes``;
pgf and raw are left out, as no reader opens them)."""


def plot_path(path: str | Path) -> Path:
    """``path`` if a figure can be written there (checked before any work): a file in an existing,
    writable directory, ending in a format matplotlib writes."""
    out = files.output_file(path, "--plot")
    if out.suffix.lower() not in FORMATS:
        raise InputError(f"--plot {out}: matplotlib writes no {out.suffix or 'suffix-less'} file",
                         label="bad --plot path", hint=f"end the name with one of {', '.join(FORMATS)}")
    return out


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or an :class:`InputError` naming the extra."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ModuleNotFoundError:
        raise InputError("--plot needs matplotlib, which is not installed", label="missing extra",
                         hint="pip install 'llmp[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")
