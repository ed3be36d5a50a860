"""``--plot``: a tornado chart of elasticities and the step time along the most influential fields.

matplotlib is the ``[plot]`` extra; without it the command says so instead of failing.
"""

from __future__ import annotations

from typing import Any

from llmp.errors import InputError
from llmp.plotting import pyplot
from llmp.sensitivity.analysis import Operating, curve
from llmp.sensitivity.report import Sensitivity


def figure(result: Sensitivity, op: Operating, *, top: int = 10, curves: int = 4, factor: float = 4.0) -> Any:
    """The figure: elasticities of the ``top`` fields, and ``T(x)`` over ``x / factor .. x * factor``
    for the ``curves`` largest (closed form, counts relaxed to reals)."""
    from matplotlib import ticker

    plt = pyplot()
    fields = [f for f in result.fields if f.derivative != 0.0][:top]
    shown = fields[:curves]
    fig = plt.figure(figsize=(13, 6), layout="constrained")
    grid = fig.add_gridspec(2, 3)
    ax = fig.add_subplot(grid[:, 0])
    names = [f.path for f in reversed(fields)]
    values = [f.elasticity for f in reversed(fields)]
    ax.barh(names, values, color=["tab:red" if v > 0 else "tab:blue" for v in values])
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel("elasticity (x/T) dT/dx")
    ax.set_title("step time sensitivity")
    for i, f in enumerate(shown):
        sub = fig.add_subplot(grid[i // 2, 1 + i % 2])
        xs, ts = curve(op, f.path, factor=factor)
        sub.plot(xs, ts, color="tab:purple")
        sub.axvline(f.value, color="gray", linestyle="--", linewidth=0.8)
        sub.plot([f.value], [result.closed_form_s], "o", color="black")
        sub.set_xscale("log")
        # labels at 1, 2 and 5 per decade only: matplotlib labels the minor ticks of an axis spanning
        # less than a few decades, and their "2x10^3 3x10^3 4x10^3" run into each other
        sub.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0), numticks=5))
        sub.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        sub.xaxis.set_minor_formatter(ticker.NullFormatter())
        sub.set_xlabel(f.path)
        sub.set_ylabel("step time (s)")
    fig.suptitle(f"{result.source}: closed form, other fields at their values")
    return fig


def plot(result: Sensitivity, op: Operating, out: str, *, top: int = 10, curves: int = 4, factor: float = 4.0) -> None:
    """Write :func:`figure` to ``out``."""
    plt = pyplot()
    fig = figure(result, op, top=top, curves=curves, factor=factor)
    try:
        fig.savefig(out, dpi=120)
    except OSError as err:
        raise InputError(f"cannot write the plot to {out}: {err.strerror}") from None
    except ValueError as err:
        raise InputError(f"cannot write the plot to {out}: {err}", hint="use a .png, .svg or .pdf file name") from None
    finally:
        plt.close(fig)
