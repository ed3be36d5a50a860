"""SVG drawings of what the library returned: a stacked bar, a step's Gantt chart, a scatter, a
curve with its band. Drawing only: every number comes in from the caller.

Plain SVG, written here, so the page needs no plotting library in the browser; every mark has a
``<title>`` (a tooltip) with its exact value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from llmp.units import format_count

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#86bcb6", "#d37295", "#a0cbe8", "#ffbe7d", "#8cd17d", "#499894")
"""Tableau 10 and its light variants (colour-blind aware, a public colour scheme)."""


def colour(key: str, keys: Sequence[str]) -> str:
    """A stable colour per category: its position in ``keys``."""
    return PALETTE[keys.index(key) % len(PALETTE)] if key in keys else "#999999"


def _t(text: object) -> str:
    return str(escape(str(text)))


def stacked_bar(parts: Sequence[tuple[str, float]], total: float, keys: Sequence[str], *, unit: str,
                fmt: Any, capacity: float | None = None, width: int = 720, label: str = "") -> Markup:
    """One horizontal bar of ``parts`` (name, value) scaled to ``max(total, capacity)``, a legend
    below, and a capacity line when given."""
    scale = max(total, capacity or 0.0) or 1.0
    x, marks, legend = 0.0, [], []
    for i, (name, value) in enumerate(p for p in parts if p[1] > 0):
        w = value / scale * width
        share = value / total if total > 0 else 0.0
        marks.append(f'<rect x="{x:.2f}" y="0" width="{max(w, 0.5):.2f}" height="26" fill="{colour(name, keys)}">'
                     f"<title>{_t(name)}: {_t(fmt(value))} ({share:.1%})</title></rect>")
        legend.append(f'<g transform="translate({(i % 4) * 180},{40 + (i // 4) * 18})">'
                      f'<rect width="10" height="10" fill="{colour(name, keys)}"/>'
                      f'<text x="14" y="9">{_t(name)} {_t(fmt(value))}</text></g>')
        x += w
    line = ""
    if capacity:
        cx = capacity / scale * width
        line = (f'<line x1="{cx:.2f}" x2="{cx:.2f}" y1="-4" y2="30" class="capacity"/>'
                f'<text x="{min(cx, width - 120):.2f}" y="-7" class="note">capacity {_t(fmt(capacity))}</text>')
    height = 50 + 18 * ((len(legend) + 3) // 4)
    return Markup(f'<svg class="bar" role="img" aria-label="{_t(label)}" viewBox="-2 -20 {width + 4} {height + 20}" '
                  f'width="{width + 4}" height="{height + 20}">{"".join(marks)}{line}{"".join(legend)}</svg>')


PASSES = ("forward", "backward", "weight grad", "fwd&bwd", "grad sync", "update", "exposed comm")
"""Gantt colours: one per kind of task (the categories inside a task are the breakdown bar's)."""


def _pass(label: str, tid: int) -> str:
    if tid == 1:
        return "exposed comm"
    if "&" in label:
        return "fwd&bwd"
    return {"F": "forward", "B": "backward", "W": "weight grad"}.get(label[:1], label)


def _tasks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive events of one task on one row merged (the trace writes one per category)."""
    out: list[dict[str, Any]] = []
    for e in sorted(events, key=lambda e: (e["pid"], e["tid"], e["ts"])):
        label = e["name"].rsplit(" ", 1)[0]
        last = out[-1] if out else None
        if (last is not None and (last["pid"], last["tid"], last["label"]) == (e["pid"], e["tid"], label)
                and abs(last["ts"] + last["dur"] - e["ts"]) <= 1e-6 * max(1.0, e["ts"])):
            last["dur"] = e["ts"] + e["dur"] - last["ts"]
            last["parts"].append((e["cat"], e["dur"]))
            continue
        out.append({"pid": e["pid"], "tid": e["tid"], "label": label, "ts": e["ts"], "dur": e["dur"],
                    "parts": [(e["cat"], e["dur"])]})
    return out


def gantt(trace: Mapping[str, Any], *, width: int = 960) -> Markup:
    """One step per pipeline rank from a Chrome-trace object (``llmp predict --trace``): a row per
    rank for its compute stream and one for its exposed communication, each task (``F3``, ``B3``,
    ``W3``, grad sync, update) a rectangle coloured by its kind, its categories in the tooltip."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    if not events:
        return Markup('<p class="note">the step has no timeline events</p>')
    tasks = _tasks(events)
    end = max(t["ts"] + t["dur"] for t in tasks) or 1.0
    ranks = sorted({t["pid"] for t in tasks})
    row, left = 14, 190
    plot = width - left - 10
    rows = {(pid, tid): i for i, (pid, tid) in enumerate((p, t) for p in ranks for t in (0, 1))}
    marks = []
    for t in tasks:
        kind = _pass(t["label"], t["tid"])
        parts = ", ".join(f"{c} {d / 1e3:.3g} ms" for c, d in t["parts"])
        marks.append(f'<rect x="{left + t["ts"] / end * plot:.2f}" y="{rows[(t["pid"], t["tid"])] * row}" '
                     f'width="{max(t["dur"] / end * plot, 0.3):.2f}" height="{row - 2}" '
                     f'fill="{colour(kind, PASSES)}"><title>{_t(t["label"])}: {t["dur"] / 1e3:.3f} ms at '
                     f'{t["ts"] / 1e3:.3f} ms ({_t(parts)})</title></rect>')
    labels = [f'<text x="{left - 6}" y="{rows[(p, t)] * row + 10}" text-anchor="end">'
              f'{_t(names.get(p, f"rank {p}") if t == 0 else "exposed comm")}</text>' for p in ranks for t in (0, 1)]
    height = len(rows) * row + 24
    ticks = [f'<text x="{left + k / 5 * plot:.1f}" y="{height - 6}" text-anchor="middle">'
             f'{end * k / 5 / 1e6:.3g} s</text>' for k in range(6)]
    legend = "".join(f'<g transform="translate({left + 100 * i},{height + 4})"><rect width="10" height="10" '
                     f'fill="{colour(k, PASSES)}"/><text x="14" y="9">{_t(k)}</text></g>' for i, k in enumerate(PASSES))
    return Markup(f'<svg class="gantt" role="img" aria-label="one step per pipeline rank" width="{width}" '
                  f'height="{height + 20}" viewBox="0 0 {width} {height + 20}">{"".join(labels)}{"".join(marks)}'
                  f'{"".join(ticks)}{legend}</svg>')


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    x: float
    y: float
    size: float
    """Drawn as the marker's radius class (the GPU count)."""
    label: str
    """Tooltip text."""
    front: bool
    """On the Pareto front."""
    action: str
    """Value submitted when the point is clicked (the layout's overrides)."""


def scatter(points: Sequence[Point], *, x_label: str, y_label: str, width: int = 720, height: int = 420,
            log_x: bool = False) -> Markup:
    """A clickable scatter: each point a button (``data-layout``) the page's script submits."""
    if not points:
        return Markup('<p class="note">nothing to plot</p>')
    left, bottom, top, right = 70, 40, 12, 20

    def span(values: list[float], log: bool) -> tuple[float, float]:
        vs = [math.log2(v) if log else v for v in values]
        lo, hi = min(vs), max(vs)
        pad = (hi - lo) * 0.08 or (abs(hi) * 0.1 or 1.0)
        return lo - pad, hi + pad

    x0, x1 = span([p.x for p in points], log_x)
    y0, y1 = span([p.y for p in points], False)
    sizes = sorted({p.size for p in points})

    def px(v: float) -> float:
        v = math.log2(v) if log_x else v
        return left + (v - x0) / (x1 - x0) * (width - left - right)

    def py(v: float) -> float:
        return height - bottom - (v - y0) / (y1 - y0) * (height - top - bottom)

    marks = []
    for p in sorted(points, key=lambda q: q.front):
        r = 4 + 3 * sizes.index(p.size)
        cls = "point front" if p.front else "point"
        marks.append(f'<circle class="{cls}" cx="{px(p.x):.1f}" cy="{py(p.y):.1f}" r="{r}" tabindex="0" '
                     f'data-layout="{_t(p.action)}" fill="{PALETTE[sizes.index(p.size) % len(PALETTE)]}">'
                     f"<title>{_t(p.label)}</title></circle>")
    axes = [f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" class="axis"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" class="axis"/>',
            f'<text x="{(left + width) / 2:.0f}" y="{height - 6}" text-anchor="middle">{_t(x_label)}</text>',
            f'<text transform="translate(14,{(top + height - bottom) / 2:.0f}) rotate(-90)" '
            f'text-anchor="middle">{_t(y_label)}</text>']
    for k in range(5):
        vx = x0 + (x1 - x0) * k / 4
        vy = y0 + (y1 - y0) * k / 4
        xv = 2 ** vx if log_x else vx
        axes.append(f'<text x="{left + (width - left - right) * k / 4:.1f}" y="{height - bottom + 14}" '
                    f'text-anchor="middle">{xv:.3g}</text>')
        axes.append(f'<text x="{left - 6}" y="{py(vy):.1f}" text-anchor="end">{vy:.3g}</text>')
    legend = [f'<g transform="translate({left + 10 + 110 * i},{top + 4})"><circle r="{4 + 3 * i}" cx="6" cy="6" '
              f'fill="{PALETTE[i % len(PALETTE)]}"/><text x="{20 + 3 * i}" y="10">{s:g} GPUs</text></g>'
              for i, s in enumerate(sizes)]
    return Markup(f'<svg class="scatter" role="img" aria-label="{_t(y_label)} against {_t(x_label)}" '
                  f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">{"".join(axes)}'
                  f'{"".join(legend)}{"".join(marks)}</svg>')


def curve(xs: Sequence[float], ys: Sequence[tuple[float, float, float]], *, title: str, chosen: float | None = None,
          limit: float | None = None, width: int = 340, height: int = 220) -> Markup:
    """A line of (point, low, high) against ``xs`` (log2 axis) with its band shaded, the chosen x
    marked and a horizontal ``limit`` (a deadline) drawn."""
    if not xs:
        return Markup("")
    left, bottom, top, right = 56, 34, 24, 10
    lx = [math.log2(x) for x in xs]
    x0, x1 = min(lx) - 0.3, max(lx) + 0.3
    values = [v for y in ys for v in y] + ([limit] if limit is not None else [])
    y0, y1 = 0.0, max(values) * 1.08 or 1.0

    def px(x: float) -> float:
        return left + (math.log2(x) - x0) / (x1 - x0) * (width - left - right)

    def py(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    band = " ".join(f"{px(x):.1f},{py(y[2]):.1f}" for x, y in zip(xs, ys)) + " " + " ".join(
        f"{px(x):.1f},{py(y[1]):.1f}" for x, y in reversed(list(zip(xs, ys))))
    line = " ".join(f"{px(x):.1f},{py(y[0]):.1f}" for x, y in zip(xs, ys))
    dots = "".join(f'<circle cx="{px(x):.1f}" cy="{py(y[0]):.1f}" r="{5 if x == chosen else 3}" '
                   f'class="{"chosen" if x == chosen else "dot"}"><title>{x:g} GPUs: {y[0]:.4g} '
                   f"[{y[1]:.4g}, {y[2]:.4g}]</title></circle>" for x, y in zip(xs, ys))
    deadline = "" if limit is None else (f'<line x1="{left}" x2="{width - right}" y1="{py(limit):.1f}" '
                                         f'y2="{py(limit):.1f}" class="limit"><title>deadline</title></line>')
    ticks = "".join(f'<text x="{px(x):.1f}" y="{height - bottom + 14}" text-anchor="middle">{x:g}</text>'
                    for x in xs)
    yt = "".join(f'<text x="{left - 4}" y="{py(y1 * k / 4):.1f}" text-anchor="end">{format_count(y1 * k / 4)}</text>'
                 for k in range(5))
    return Markup(f'<svg class="curve" role="img" aria-label="{_t(title)}" width="{width}" height="{height}" '
                  f'viewBox="0 0 {width} {height}"><text x="{left}" y="14" class="title">{_t(title)}</text>'
                  f'<polygon points="{band}" class="band"/><polyline points="{line}" class="line"/>{deadline}{dots}'
                  f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
                  f'class="axis"/>{ticks}{yt}<text x="{(left + width) / 2:.0f}" y="{height - 4}" '
                  f'text-anchor="middle">GPUs</text></svg>')
