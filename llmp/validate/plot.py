"""Predicted vs measured step time, log-log, one colour and marker per source (matplotlib, the [plot] extra)."""

from __future__ import annotations

from pathlib import Path

from llmp.errors import InputError
from llmp.plotting import pyplot
from llmp.validate.score import Report

MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def styles(n: int) -> list[tuple[tuple[float, ...], str]]:
    """``n`` distinct (colour, marker) pairs: the 20 colours of matplotlib's ``tab20`` with 7 markers
    on their own cycle, so no two of the first 140 sources look alike (``validation/`` has 13, more
    than the 10 colours of the default cycle)."""
    from matplotlib import colormaps

    tab20 = colormaps["tab20"]
    return [(tuple(tab20(i % 20)), MARKERS[i % len(MARKERS)]) for i in range(n)]


def plot(report: Report, path: str | Path, *, title: str = "llmp validate: step time") -> Path:
    """Write the scatter plot of ``report`` to ``path`` (format from the suffix: .png, .pdf, .svg).

    The y = x line marks a perfect prediction and the shaded band ±10 %; points above the line
    are rows llmp predicts too slow.
    """
    plt = pyplot()
    if not report.rows:
        raise InputError("nothing to plot: no row was predicted", label="empty plot",
                         hint="see the skipped rows in the report for why")
    out = Path(path)
    if not out.parent.exists():
        raise InputError(f"cannot write {out}: directory {out.parent} does not exist", label="bad --plot path",
                         hint="create the directory or choose another path")
    measured = [r.measured_s for r in report.rows]
    predicted = [r.predicted_s for r in report.rows]
    lo = min(measured + predicted) / 1.5
    hi = max(measured + predicted) * 1.5
    fig, ax = plt.subplots(figsize=(7, 6.5))
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.88", label="±10 %")
    ax.plot([lo, hi], [lo, hi], color="0.3", linewidth=1, label="y = x")
    by_source: dict[str, list[int]] = {}
    for i, r in enumerate(report.rows):
        by_source.setdefault(r.source, []).append(i)
    stats = report.by_source
    for (source, idx), (colour, marker) in zip(sorted(by_source.items()), styles(len(by_source))):
        ax.scatter([measured[i] for i in idx], [predicted[i] for i in idx], s=16, alpha=0.8, color=colour,
                   marker=marker, label=f"{source} (n={len(idx)}, MAPE {100 * stats[source].mape:.0f} %)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured step time [s]")
    ax.set_ylabel("predicted step time [s]")
    overall = report.overall
    assert overall is not None
    ax.set_title(f"{title} — {overall.rows} rows, MAPE {100 * overall.mape:.1f} %")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=130)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot write {out}: {err}", label="bad --plot path",
                         hint="use a writable path ending in .png, .pdf or .svg") from None
    finally:
        plt.close(fig)
    return out
