"""The human-readable ``llmp validate`` report: per-row table, aggregates, memory, worst rows, skips."""

from __future__ import annotations

from collections.abc import Sequence

from llmp.validate.score import GIB, Report, Scored, Stats


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _secs(x: float) -> str:
    return f"{x:.4g} s"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _stats_table(title: str, groups: dict[str, Stats]) -> list[str]:
    rows = [[name, str(s.rows), f"{100 * s.mape:.1f}%", f"{100 * s.median:.1f}%", f"{100 * s.max:.1f}%",
             _pct(s.bias), s.worst] for name, s in groups.items()]
    return ["", title, *_table([title.split()[-1], "rows", "MAPE", "median", "max", "bias", "worst row"], rows,
                               right=frozenset({1, 2, 3, 4, 5}))]


def _memory_cell(r: Scored) -> str:
    """``predicted/measured GiB (error)``, ``OOM`` when llmp says a run that ran does not fit."""
    oom = "OOM! " if r.oom_failure else ""
    c = r.memory_check
    if c is None:
        return f"{oom}{r.memory.total / GIB:.1f}" if r.memory is not None else oom.strip()
    measured = f"{c.predicted / GIB:.1f}/{c.measured / GIB:.1f} {c.kind.value}"
    return f"{oom}{measured} " + (_pct(c.error) if c.error is not None else "(other rank)")


def render(report: Report, *, per_row: bool = True) -> str:
    """The report as text; ``per_row=False`` leaves out the row table (aggregates only)."""
    out: list[str] = []
    if per_row and report.rows:
        rows = [[r.source, r.key, r.stack, r.mapped.metric_row.text("model_name"), r.mapped.metric_row.text("num_gpus"),
                 r.layout, r.mapped.reading.name, _secs(r.predicted_s), _secs(r.measured_s), _pct(r.error),
                 _memory_cell(r)]
                for r in report.rows]
        out += _table(["source", "row", "stack", "model", "gpus", "layout", "metric", "predicted", "measured", "error",
                       "memory GiB (llmp/measured)"], rows, right=frozenset({4, 7, 8, 9}))
    overall = report.overall
    if overall is None:
        out.append("no row could be predicted")
    else:
        out += ["", (f"{overall.rows} rows predicted: MAPE {100 * overall.mape:.1f}%, median |error| "
                f"{100 * overall.median:.1f}%, max |error| {100 * overall.max:.1f}%, bias {_pct(overall.bias)} "
                "(error = predicted/measured - 1 on step time)")]
        out += _stats_table("Error by source", report.by_source)
        out += _stats_table("Error by stack", report.by_stack)
        out += _stats_table("Error by gpu", report.by_gpu)
        memory = report.memory
        out += ["", "Memory per GPU against measured peaks: " + (
            f"{memory.rows} rows, MAPE {100 * memory.mape:.1f}%, max |error| {100 * memory.max:.1f}%, "
            f"bias {_pct(memory.bias)} (worst {memory.worst})" if memory is not None else "no row gives one")]
        ooms = report.oom_failures
        out.append(f"Out-of-memory verdicts on runs that ran: {len(ooms)}"
                   + (": " + ", ".join(f"{r.key} ({r.memory.total / GIB:.1f} of {r.memory.capacity / GIB:.0f} GiB)"
                                       for r in ooms if r.memory is not None) if ooms else ""))
        out += ["", "Worst rows"]
        for i, r in enumerate(report.worst(), 1):
            out.append(f"  {i}. {r.key} {r.mapped.metric_row.text('model_name')} ({r.source}, "
                       f"{r.mapped.metric_row.text('num_gpus')} x {r.gpu}, {r.layout}): {_pct(r.error)} "
                       f"(predicted {_secs(r.predicted_s)}, measured {_secs(r.measured_s)})")
    if report.skipped:
        out += ["", f"Skipped: {len(report.skipped)} measurements"]
        for reason, count in report.skip_counts.items():
            out.append(f"  {reason}: {count}")
            for s in report.skipped:
                if s.reason.value == reason:
                    detail = s.detail.splitlines()[0]
                    out.append(f"    {s.measurement.lines} {s.measurement.config.text('model_name')}: {detail}")
    return "\n".join(out)
