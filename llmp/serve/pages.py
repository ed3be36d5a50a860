"""What each tab shows: the template context built from the library's results.

Each function takes a :class:`~llmp.serve.view.View`, calls :mod:`llmp.serve.compute` (the CLI's
functions) and returns plain values and SVG for a template. The formats are the CLI's own
(``llmp.units``), so the page and the terminal print the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from markupsafe import Markup

from llmp.analytic.derived import derived
from llmp.compose.overlap import categories
from llmp.dsl.catalog import gpus, nodes_with
from llmp.errors import InputError, LlmpError
from llmp.hardware.catalog import catalog_ids
from llmp.planning import curve_counts
from llmp.planning.checkpoint import Mode
from llmp.planning.facility import Facility
from llmp.planning.inputs import parse_bandwidth, parse_duration, parse_mttf, parse_tokens
from llmp.planning.power import power
from llmp.search.report import set_text
from llmp.serve import charts, compute, controls
from llmp.serve.edit import write_sets
from llmp.serve.view import PLAN_FIELDS, SEARCH_FIELDS, Tab, View
from llmp.spec.spec import Spec
from llmp.units import format_bytes, format_count, format_time

MEMORY_PARTS = ("weights", "grads", "optimizer", "activations", "logits", "overhead")
KEYS = (*categories(), "overhead")
"""Breakdown categories in the CLI's order (colours follow it)."""


def _gib(v: float) -> str:
    return format_bytes(v, binary=True)


GLOBALS: dict[str, Any] = {"fmt_time": format_time, "fmt_bytes": _gib, "fmt_count": format_count,
                           "tabs": [t.value for t in Tab], "plan_fields": PLAN_FIELDS, "search_fields": SEARCH_FIELDS}


def _located(err: LlmpError, view: View) -> dict[str, Any]:
    """The diagnostic and, when it points into the editor's text or at a what-if control, where."""
    out: dict[str, Any] = {"message": compute.message(err, view), "line": None, "column": None, "field": None}
    span = err.span
    if span is not None and span.file == view.filename:
        out.update(line=span.line, column=span.column, end_line=span.end_line, end_column=span.end_column)
    elif span is not None and span.file == "--set":
        out["field"] = controls.field_of(view.sets, span.line)
    return out


# ---- Editor -----------------------------------------------------------------------------


def diagnostics(view: View) -> dict[str, Any]:
    """``llmp check``: the derived quantities of a spec that resolves, or its located diagnostic."""
    try:
        spec = compute.check(view)
    except LlmpError as err:
        return {"ok": False, **_located(err, view)}
    with compute.LOCK:
        rows = [(k, _derived(v)) for k, v in derived(spec).items()]
    return {"ok": True, "rows": rows, "gpu": spec.cluster.gpu.id, "node": spec.cluster.node.id}


def _derived(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return format_count(f) if f >= 10_000 else f"{f:g}"


def page(view: View, specs: Sequence[tuple[str, str]], note: str) -> dict[str, Any]:
    """The whole page: the form with every tab's inputs, the editor's diagnostics already shown."""
    diag = diagnostics(view)
    spec: Spec | None = None
    try:
        spec = compute.check(view)
    except LlmpError:
        try:
            spec = compute.check(View(text=view.text, filename=view.filename))
        except LlmpError:
            spec = None
    ids = catalog_ids()
    return {"view": view, "diag": diag, "specs": [name for name, _ in specs], "note": note,
            "controls": [(c, c.value(spec) if spec is not None else "", c.choices()) for c in controls.CONTROLS],
            "kept_sets": [s for s in view.sets if s.partition("=")[0].strip() not in controls.BY_PATH],
            "gpus": ids["gpu"], "nodes": _nodes_by_gpu(), "all_nodes": ids["node"], "link": "/?" + view.to_query(),
            "prefix": controls.PREFIX}


def _nodes_by_gpu() -> dict[str, list[str]]:
    """Catalog GPU id → the catalog nodes built from it (for the picker)."""
    with compute.LOCK:
        return {g: [n.id for n in nodes_with(g)] for g in gpus()}


# ---- Prediction -------------------------------------------------------------------------


def prediction(view: View) -> dict[str, Any]:
    """``llmp predict`` laid out: headline numbers, the breakdown bar, memory against capacity,
    the step's timeline per pipeline rank (from ``--trace``'s own events)."""
    pred = compute.prediction(view)
    trace = compute.trace(view)
    m = pred.memory
    parts = [(k, float(pred.breakdown.get(k, 0.0))) for k in KEYS]
    memory = [(k, float(getattr(m, k))) for k in MEMORY_PARTS]
    d = pred.derived
    return {
        "pred": pred, "band": pred.band, "level": pred.uncertainty.level, "derived": d,
        "breakdown": charts.stacked_bar(parts, pred.step_time_s, KEYS, unit="s", fmt=format_time,
                                        label="where the step's time goes"),
        "memory": charts.stacked_bar(memory, m.total, MEMORY_PARTS, unit="B", fmt=_gib, capacity=m.capacity,
                                     label="memory per GPU against capacity"),
        "gantt": charts.gantt(trace),
        "trace_link": "/trace?" + view.to_query(), "provenance": pred.provenance,
        "per_gpu": pred.tokens_per_s / d["world_size"],
    }


# ---- What-if ----------------------------------------------------------------------------

WHATIF_ROWS: tuple[tuple[str, str], ...] = (
    ("step time", "step_time_s"), ("band low", "band_low"), ("band high", "band_high"),
    ("tokens/s", "tokens_per_s"), ("MFU", "mfu"), ("memory per GPU", "memory"), ("GPUs", "gpus"))


def _numbers(view: View) -> dict[str, float]:
    pred = compute.prediction(view)
    return {"step_time_s": pred.step_time_s, "band_low": pred.band[0], "band_high": pred.band[1],
            "tokens_per_s": pred.tokens_per_s, "mfu": pred.mfu, "memory": pred.memory.total,
            "capacity": pred.memory.capacity, "oom": float(pred.memory.oom), "gpus": float(pred.derived["world_size"])}


def _show(key: str, v: float) -> str:
    if key in ("step_time_s", "band_low", "band_high"):
        return format_time(v)
    if key == "memory":
        return _gib(v)
    if key == "mfu":
        return f"{v:.1%}"
    return format_count(v) if key == "tokens_per_s" else f"{v:g}"


def without_controls(view: View) -> View:
    """The view's spec with only the overrides no what-if control owns (what the What-if tab
    compares against)."""
    return View(text=view.text, filename=view.filename,
                sets=tuple(s for s in view.sets if s.partition("=")[0].strip() not in controls.BY_PATH))


def merge_controls(view: View, fields: Mapping[str, str]) -> View:
    """The view with the what-if controls' values as its overrides: a control the form sets away
    from the spec's value adds its ``--set``; the rest of the view's overrides stay. Without
    controls in the form (a link, the editor) the view is as given."""
    if not any(k.startswith(controls.PREFIX) for k in fields):
        return view
    base = without_controls(view)
    try:
        spec = compute.check(base)
    except LlmpError:
        return view  # the editor shows what is wrong with the spec itself
    return View(text=view.text, filename=view.filename, sets=(*base.sets, *controls.overrides(fields, spec)),
                tab=view.tab, plan=view.plan, search=view.search)


def whatif(view: View) -> dict[str, Any]:
    """The spec against the spec with the controls' values: each number, and the change."""
    base_view = without_controls(view)
    try:
        base = _numbers(base_view)
    except LlmpError as err:
        return {"error": _located(err, base_view), "fields": {}, "rows": [], "sets": []}
    try:
        new = _numbers(view)
    except LlmpError as err:
        where = _located(err, view)
        return {"error": where, "fields": {where["field"]: where["message"]} if where["field"] else {}, "rows": [],
                "sets": list(view.sets)}
    rows = []
    for label, key in WHATIF_ROWS:
        a, b = base[key], new[key]
        change = (b / a - 1.0) if a else math.nan
        rows.append({"label": label, "base": _show(key, a), "new": _show(key, b),
                     "change": "" if a == b else f"{change:+.1%}", "better": _better(key, a, b)})
    return {"error": None, "fields": {}, "rows": rows, "sets": list(view.sets), "oom": bool(new["oom"]),
            "capacity": _gib(new["capacity"])}


def ahead(view: View) -> list[list[str]]:
    """The overrides one control step from the view's (:func:`llmp.serve.controls.neighbours`), or
    none when its spec does not resolve."""
    try:
        spec = compute.check(view)
    except LlmpError:
        return []
    return controls.neighbours(spec, view.sets)


def _better(key: str, a: float, b: float) -> str:
    if a == b or key in ("gpus", "band_low", "band_high"):
        return ""
    higher_is_better = key in ("tokens_per_s", "mfu")
    return "better" if (b > a) == higher_is_better else "worse"


# ---- Search -----------------------------------------------------------------------------


def _counts(text: str, spec: Spec) -> list[int]:
    if not text:
        per = int(spec.cluster.node.gpus_per_node)
        world = int(spec.world_size)
        return sorted({max(per, world // 2 // per * per), world, world * 2})
    try:
        counts = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise InputError(f"GPU counts must be whole numbers separated by commas, got {text!r}",
                         hint="e.g. 32,64,128") from None
    if not counts or any(c < 1 for c in counts) or len(counts) > 8:
        raise InputError(f"give one to eight positive GPU counts, got {text!r}", hint="e.g. 32,64,128")
    return list(dict.fromkeys(counts))


def _top(text: str) -> int:
    if not text:
        return 10  # llmp search's --top default
    try:
        top = int(text)
    except ValueError:
        top = 0
    if not 1 <= top <= 200:
        raise InputError(f"top needs a whole number from 1 to 200, got {text!r}", hint="e.g. 10")
    return top


def non_dominated(rows: Sequence[tuple[float, ...]]) -> list[bool]:
    """Which rows no other row beats in every coordinate (all minimised) and strictly in one: the
    Pareto front of (step time, memory per GPU, GPUs) over the layouts the search returned."""
    return [not any(all(o <= r for o, r in zip(other, row)) and other != row for other in rows) for row in rows]


def search(view: View) -> dict[str, Any]:
    """``llmp search SPEC --gpus N,... --top K``: the best layouts per count, drawn as step time
    against memory per GPU (a marker per GPU count), the Pareto front ringed; a click loads one."""
    spec = compute.check(view)
    counts = _counts(view.search.get("search_gpus", ""), spec)
    top = _top(view.search.get("top", ""))
    result = compute.search(view, counts, top)
    seen: dict[tuple[str, ...], Any] = {}
    for c in (*result.ranked, *result.pareto):
        seen.setdefault(tuple(c.overrides()), c)
    cands = list(seen.values())
    front = non_dominated([(c.step_time_s, c.memory_per_gpu_bytes, float(c.gpus)) for c in cands])
    points = [charts.Point(x=c.memory_per_gpu_bytes / 2**30, y=c.step_time_s, size=float(c.gpus), front=f,
                           label=_layout_label(c), action=_json(c.overrides())) for c, f in zip(cands, front)]
    table = sorted(zip(cands, front), key=lambda cf: cf[0].step_time_s)
    return {"plot": charts.scatter(points, x_label="memory per GPU (GiB)", y_label="step time (s)"),
            "table": [{"c": c, "front": f, "label": _layout_label(c), "action": _json(c.overrides())}
                      for c, f in table],
            "result": result, "counts": counts, "top": top}


def _layout_label(c: Any) -> str:
    keys = ("parallel.tp", "parallel.pp", "parallel.dp", "parallel.vp", "train.micro_batch", "train.recompute",
            "parallel.zero")
    parts = [f"{k.split('.')[-1]}={c.config[k]}" for k in keys if k in c.config]
    return (f"{c.gpus} GPUs  {' '.join(parts)}: {format_time(c.step_time_s)}, "
            f"{_gib(c.memory_per_gpu_bytes)} per GPU, MFU {c.mfu:.1%}")


def _json(sets: Sequence[str]) -> str:
    import json

    return json.dumps(list(sets))


def changed(sets: Sequence[str], spec: Spec) -> list[str]:
    """The overrides of a chosen layout that change ``spec`` (a layout repeats every field it sets,
    most of them the spec's own values)."""
    out = []
    for item in sets:
        path, _, value = item.partition("=")
        own = _value(spec, path.strip())
        if own is None or set_text(path.strip(), own) != f"{path.strip()}={value.strip()}":
            out.append(item)
    return out


def _value(spec: Spec, path: str) -> Any:
    section, _, name = path.partition(".")
    objs: dict[str, Any] = {"parallel": spec.parallel, "train": spec.train, "cluster": spec.cluster,
                            "model": spec.model, "node": spec.cluster.node, "gpu": spec.cluster.gpu}
    obj = objs.get(section)
    value = getattr(obj, name, None) if obj is not None and "." not in name else None
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ---- Plan -------------------------------------------------------------------------------


def _float(fields: Mapping[str, str], key: str, what: str) -> float | None:
    text = fields.get(key, "")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{what} needs a number, got {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{what} needs a finite number, got {text!r}")
    return value


def _int(fields: Mapping[str, str], key: str, what: str) -> int | None:
    text = fields.get(key, "")
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{what} needs a whole number, got {text!r}") from None


def plan_arguments(view: View) -> dict[str, Any]:
    """The plan tab's fields as ``llmp.plan`` keyword arguments (blank: the CLI's default)."""
    f = view.plan
    args: dict[str, Any] = {"tokens": f.get("tokens") or "1T"}
    if f.get("deadline"):
        args["deadline"] = f["deadline"]
    args["gpus"] = _int(f, "gpus", "GPUs")
    args["price_per_gpu_hour"] = _float(f, "price", "the price per GPU-hour")
    for key, name in (("mttf", "mttf"), ("restart", "restart"), ("checkpoint", "checkpoint"),
                      ("storage", "storage_bandwidth"), ("power", "power_model")):
        if f.get(key):
            args[name] = f[key]
    for key, name, what in (("pue", "pue", "the PUE"), ("node_overhead", "node_overhead", "the node overhead"),
                            ("grid", "grid_intensity", "the grid intensity"),
                            ("idle", "idle_fraction", "the idle fraction")):
        args[name] = _float(f, key, what)
    return args


def plan_field_errors(view: View) -> dict[str, str]:
    """Each plan input the plan's own parsers refuse, with their message (shown at the field)."""
    f = view.plan
    checks: dict[str, Any] = {
        "tokens": lambda v: parse_tokens(v), "deadline": lambda v: parse_duration(v),
        "mttf": lambda v: parse_mttf(v, None if f.get("deadline") else 1),
        "restart": lambda v: parse_duration(v, allow_zero=True), "storage": lambda v: parse_bandwidth(v),
        "checkpoint": lambda v: Mode(v), "gpus": lambda v: _int(f, "gpus", "GPUs"),
        "price": lambda v: _float(f, "price", "the price per GPU-hour"),
        "idle": lambda v: _float(f, "idle", "the idle fraction"),
        "pue": lambda v: Facility(pue=_float(f, "pue", "the PUE") or 1.0),
        "node_overhead": lambda v: Facility(node_overhead=_float(f, "node_overhead", "the node overhead") or 0.0),
        "grid": lambda v: Facility(grid_g_per_kwh=_float(f, "grid", "the grid intensity") or 0.0)}
    errors = {}
    for key, check in checks.items():
        if f.get(key):
            try:
                check(f[key])
            except LlmpError as err:
                errors[key] = err.render()
            except ValueError:
                errors[key] = f"error: {f[key]!r} is not one of the choices"
    return errors


def run_plan(view: View) -> Any:
    """``llmp plan`` with the tab's inputs; on a GPU count, also evaluated where ``--plot`` would
    draw it (:func:`llmp.planning.curve_counts`; a deadline plan draws its scan)."""
    args = plan_arguments(view)
    if "deadline" not in args:
        args["curve"] = curve_counts(compute.check(view), args.get("gpus"))
    return compute.plan(view, **args)


def plan_rows(result: Any) -> list[dict[str, Any]]:
    """One row per GPU count the plan evaluated: its best layout's days, GPU-hours, energy, cost,
    each with its band (the CSV export and the charts read these)."""
    rows = []
    price = result.price_per_gpu_hour
    run = result.run
    for e in sorted(result.scanned, key=lambda e: e.gpus):
        wall = e.wall_s(result.tokens)
        g = run.goodput(e, result.tokens)
        watts = run.facility.watts_per_gpu(result.power.watts if e is result.chosen else _watts(result, e),
                                           result.power.tdp_watts)
        row: dict[str, Any] = {"gpus": e.gpus, "chosen": e is result.chosen, "step_time_s": e.step_time_s}
        for name, values in (("days", [w / 86400 for w in wall]),
                             ("days_with_failures", [w / 86400 for w in g.wall_s]),
                             ("gpu_hours", [e.gpus * w / 3600 for w in g.wall_s]),
                             ("facility_kwh", [e.gpus * watts * w / 3.6e6 for w in g.wall_s]),
                             ("effective_training_time_ratio", list(g.ettr))):
            row[name], row[f"{name}_low"], row[f"{name}_high"] = values
        if price is not None:
            row["cost"], row["cost_low"], row["cost_high"] = (h * price for h in
                                                              (row["gpu_hours"], row["gpu_hours_low"],
                                                               row["gpu_hours_high"]))
        row["layout"] = " ".join(e.overrides)
        rows.append(row)
    return rows


def _watts(result: Any, e: Any) -> float:
    """Average GPU power of another count's layout under the plan's power model."""
    p = result.power
    return power(p.model, p.tdp_watts, e.busy, p.idle_fraction).watts


def plan(view: View) -> dict[str, Any]:
    """``llmp plan``: the totals with their bands and the run as it goes, and days, GPU-hours,
    kWh and cost against the GPU count."""
    result = run_plan(view)
    rows = plan_rows(result)
    xs = [float(r["gpus"]) for r in rows]

    def series(key: str) -> list[tuple[float, float, float]]:
        return [(r[key], r[f"{key}_low"], r[f"{key}_high"]) for r in rows]

    chosen = float(result.gpus)
    deadline = None if result.deadline_s is None else result.deadline_s / 86400
    charts_ = [charts.curve(xs, series("days_with_failures"), title="days (with failures)", chosen=chosen,
                            limit=deadline),
               charts.curve(xs, series("gpu_hours"), title="GPU-hours", chosen=chosen),
               charts.curve(xs, series("facility_kwh"), title="kWh at the facility", chosen=chosen)]
    if result.price_per_gpu_hour is not None:
        charts_.append(charts.curve(xs, series("cost"), title="cost", chosen=chosen))
    return {"p": result, "d": result.to_dict(), "charts": Markup("".join(charts_)), "rows": rows}


# ---- Export -----------------------------------------------------------------------------


def exported_text(view: View) -> str:
    """The edited spec with its overrides written in; any that could not be (a catalog node's
    field) listed in a closing comment with the ``--set`` that applies them."""
    edited = write_sets(compute.evaluated_text(view), view.sets, view.filename)
    if not edited.left:
        return edited.text
    sets = " ".join(f"--set {s}" for s in edited.left)
    return edited.text.rstrip("\n") + f"\n# not written above (catalog fields); apply with: llmp predict FILE {sets}\n"
