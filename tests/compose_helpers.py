"""Helpers that the unit tests of ``llmp.compose`` (``tests/unit/compose/``) and their properties
(``tests/property/compose/``) both use: one home, imported under the name each test module reads.

Import with ``from compose_helpers import predict`` (pytest puts tests/ on ``sys.path``). Sections
follow the test modules they serve.
"""

from __future__ import annotations

import dataclasses
import itertools

from analytic_helpers import context
from strategies_analytic import llama

import llmp
from llmp.analytic.activations import layer_activation_bytes
from llmp.analytic.schedules import entry
from llmp.compose import predict as _predict
from llmp.compose.schedule import plan
from llmp.compose.timeline import simulate, uniform_durations
from llmp.spec import specpath
from llmp.spec.spec import Schedule

# ---- several modules (band, prediction, sweep, uneven) ---------------------------------------


def predict(spec, residuals=None, **kw):
    """The analytic composition unless a test names a residual store (most tests are about the
    composition, not about a shipped store)."""
    return _predict(spec, residuals, **kw)


# ---- low-precision activations (test_lowp_activations.py) ------------------------------------

ACTIVATIONS_H100_EXAMPLE = "examples/llama3_8b_dgx_h100.llmp"          # tp 1, cp 2, no stack line (generic: TE)
ACTIVATIONS_B200_EXAMPLE = "examples/llama3_70b_nvfp4_dgx_b200.llmp"   # megatron_core, tp > 1 with sequence parallelism
# bytes per element of one saved view, written out from the TE formats (not from llmp.analytic.lowp)
VIEW_BYTES = {("fp8", "delayed"): 1, ("fp8", "current"): 1, ("fp8", "blockwise"): 1 + 4 / 128,
              ("mxfp8", None): 1 + 1 / 32, ("nvfp4", None): 0.5 + 1 / 16}


def load_in_precision(path: str, precision: str, scaling: str | None, *extra: str):
    """The example at ``path`` in ``precision``, its own ``fp8_scaling`` line dropped (DeepSeek-V3's),
    moved to DGX B200 nodes for the microscaling formats (Blackwell's)."""
    with open(path) as f:
        text = "".join(line for line in f if not line.lstrip().startswith("fp8_scaling"))
    if precision in ("mxfp8", "nvfp4"):
        for node in ("dgx_h100", "hgx_h800"):
            text = text.replace(node, "dgx_b200")
    sets = [f"train.precision={precision}", *extra] + ([f"train.fp8_scaling={scaling}"] if scaling else [])
    return llmp.loads(text, filename=path, overrides=sets)


def layer_activations(spec, index: int = 0) -> float:
    ctx = context(spec)
    return float(layer_activation_bytes(ctx, ctx.st.kinds[index]))


# ---- schedules (test_schedules.py) -----------------------------------------------------------

SCHEDULE_LAYOUTS = list(itertools.product((1, 2, 3, 4, 6, 8), (1, 2, 3), (1, 2, 3, 4, 6, 8, 12, 16, 24)))
VALID_LAYOUTS = {s: [(pp, vp, m) for pp, vp, m in SCHEDULE_LAYOUTS
                     if entry(s).requires(pp, vp, m) is None and not (vp > 1 and pp == 1)]
                 for s in Schedule}
"""Layouts each schedule accepts (its entry's requirements; vp > 1 needs pp > 1)."""


def uniform_timeline(schedule, pp, vp, m, f, b, w):
    p = plan(schedule, pp, vp, m)
    return p, simulate(p, uniform_durations(p, f, b, w))


def chunk_timeline(schedule, pp, vp, m, f, b, w=None):
    """Timeline of per-chunk times (lists, or one number for every chunk)."""
    p = plan(schedule, pp, vp, m)
    chunks = pp * vp

    def per_chunk(x):
        return x if isinstance(x, list) else [x] * chunks

    return simulate(p, uniform_durations(p, per_chunk(f), per_chunk(b), None if w is None else per_chunk(w)))


# ---- sweeps (test_sweep.py) ------------------------------------------------------------------

def sweep_point(spec, grid, i):
    numeric = {p: v[i].item() for p, v in grid.items() if p in specpath.paths(spec)}
    s = specpath.replace(spec, {p: int(v) if float(v).is_integer() else v for p, v in numeric.items()})
    for path, values in grid.items():
        if path not in numeric:
            section, name = path.split(".")
            block = getattr(s, section)
            current = getattr(block, name)
            value = bool(values[i]) if isinstance(current, bool) else type(current)(values[i])
            s = dataclasses.replace(s, **{section: dataclasses.replace(block, **{name: value})})
    return s


# ---- uneven stages (test_uneven.py) ----------------------------------------------------------

def uneven_model(layers: int = 12):
    return llama(layers=layers, hidden=1024, heads=8, kv_heads=8, ffn=2816, vocab=32000, seq_len=1024)
