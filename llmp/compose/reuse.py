"""What a prediction reuses from the last ones: each stage kept on exactly what it reads.

A what-if (``--set``, a search, a plan) changes a few numbers of a spec and predicts again, and a
warm ``predict`` of an unchanged spec should cost only what changed. Each stage below is a pure
function of its key, so a hit returns what a fresh computation would, bit for bit:

* the pipeline plan and its compiled timeline (:func:`~llmp.compose.schedule.plan`,
  :func:`~llmp.compose.timeline.waves`): on the schedule, ``pp``, ``vp``, microbatches and group,
  the structure alone; any other number may change;
* the structure and the operator graph (:func:`graph`): on the model, train and parallel
  sections and the cluster's shape (nodes, GPUs per node, NVLink domain). The graph reads no
  device or link number (those enter through the prices), so a hardware what-if reuses it;
* the prices and the residual correction (:func:`priced`): on the graph's key, the whole
  cluster (device and links) and the residual store. Only llmp's own read-only stores
  (``llmp.residuals.store``) are kept; any other ``Residuals`` may read more of the spec, so its
  correction is computed afresh each time.

Keys are the ``repr`` of what is read, so ``4096`` and ``4096.0`` (equal, but not the same
arithmetic) never share an entry. Each cache keeps the most recent :data:`SIZE` entries.
"""

from __future__ import annotations

from llmp.analytic import lowp
from llmp.recent import Recent
from llmp.spec.spec import Spec

SIZE = 32
"""Entries kept per cache (a search or plan revisits a few structures; a graph is small)."""

GRAPHS = Recent(SIZE)
PRICED = Recent(SIZE)
KEYS = Recent(SIZE)


def graph_key(spec: Spec) -> str:
    """What :func:`~llmp.analytic.structure.structure_of` and
    :func:`~llmp.analytic.graph.decompose` read of ``spec``."""
    return _keys(spec)[0]


def hardware_key(spec: Spec) -> str:
    """What the prices and a store's correction read besides the graph: the device and links."""
    return _keys(spec)[1]


def _make_keys(spec: Spec) -> tuple[str, str]:
    c = spec.cluster
    # The one device fact the graph reads: whether low-precision casts serve both GEMM layouts
    # from one copy (Blackwell), which decides the quantize kernels (llmp.analytic.lowp).
    return repr((spec.model, spec.train, spec.parallel, c.nodes, c.node.gpus_per_node, c.node.nvlink_domain,
                 lowp.any_layout(c.gpu))), repr(c)


def _keys(spec: Spec) -> tuple[str, str]:
    """The keys of a spec object, kept by its identity: a loop predicting one loaded spec again
    does not write out its sections each time."""
    return KEYS.of(spec, lambda: _make_keys(spec))


def clear() -> None:
    """Forget every kept graph, price and correction (the plan caches are not numbers-dependent)."""
    GRAPHS.clear()
    PRICED.clear()
    KEYS.clear()
