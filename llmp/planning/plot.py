"""``--plot``: wall-clock days and cost (or GPU-hours) against the GPU count, with their bands.

matplotlib is the ``[plot]`` extra; without it the command says so instead of failing.
"""

from __future__ import annotations

from llmp.errors import InputError
from llmp.planning.report import DAY, Plan
from llmp.plotting import pyplot


def plot(result: Plan, out: str) -> None:
    """Write the figure to ``out``: one point per evaluated GPU count (its best layout), the
    chosen count marked, the deadline drawn when there is one."""
    plt = pyplot()
    points = sorted(result.scanned, key=lambda e: e.gpus)
    gpus = [e.gpus for e in points]
    walls = [e.wall_s(result.tokens) for e in points]
    price = result.price_per_gpu_hour
    scale = 1.0 if price is None else price
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for ax, values, label in (
            (left, [[w / DAY for w in wall] for wall in walls], "wall clock (days)"),
            (right, [[n * w / 3600.0 * scale for w in wall] for n, wall in zip(gpus, walls)],
             "cost" if price is not None else "GPU-hours")):
        ax.plot(gpus, [v[0] for v in values], "o-", color="tab:blue", label="predicted")
        ax.fill_between(gpus, [v[1] for v in values], [v[2] for v in values], color="tab:blue", alpha=0.2,
                        label="band")
        i = gpus.index(result.gpus)
        ax.plot([gpus[i]], [values[i][0]], "*", markersize=14, color="tab:red", label=f"plan: {result.gpus} GPUs")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs (best layout at each count)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    if result.deadline_s is not None:
        left.axhline(result.deadline_s / DAY, color="gray", linestyle="--", label="deadline")
    left.legend()
    right.set_title(f"at {price:g} per GPU-hour" if price is not None else "no --price-per-gpu-hour: GPU-hours")
    fig.suptitle(f"{result.source}: {result.tokens:.3g} tokens, global batch kept")
    try:
        fig.savefig(out, dpi=120)
    except OSError as err:
        raise InputError(f"cannot write the plot to {out}: {err.strerror}") from None
    except ValueError as err:
        raise InputError(f"cannot write the plot to {out}: {err}", hint="use a .png, .svg or .pdf file name") from None
    finally:
        plt.close(fig)
