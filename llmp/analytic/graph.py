"""The operator graph of one training step: what runs, where, when and how often.

:func:`decompose` lists the operators of one microbatch on one pipeline chunk (forward, backward,
recompute, the collectives between them) plus the once-per-step work of each pipeline rank
(gradient sync, optimizer). Each :class:`~llmp.analytic.op.Op` is a kernel or a collective with a *scope* that
says where it repeats:

* ``layer``: once per transformer layer of a chunk (``OpGraph.chunk_layers``: ``layers / (pp *
  vp)`` each, or the stack's uneven split, :mod:`~llmp.analytic.split`); a model whose layers
  differ (dense and MoE MLPs, full and windowed attention, :mod:`~llmp.analytic.kinds`) has one
  set of layer ops per kind (``Op.kind``), run as often as the chunk holds layers of that kind
  (``OpGraph.chunk_kinds``);
* ``first`` / ``last``: once per microbatch on the chunk holding the embedding / the head;
* ``boundary``: once per microbatch between consecutive chunks (pipeline send/recv);
* ``rank``: once per step on the pipeline ranks ``ranks`` (ranks of one kind, only, first,
  middle or last, that hold the same number of layers, so the same parameters).

Each per-microbatch op also belongs to a pipeline :class:`~llmp.analytic.op.Task`: ``F`` (forward), ``B`` (input
gradient) or ``W`` (weight gradient), which the schedules order (:mod:`llmp.analytic.schedules`).

``count`` is the multiplicity inside the scope (``cp - 1`` ring steps, gradient buckets, ...).
Dims are whatever the spec holds: numbers (one prediction), numpy arrays (a sweep) or SymPy
symbols (closed forms); the shape of the graph is fixed by the spec's :class:`Structure`.
"""

from __future__ import annotations

from llmp.analytic import layer, offload, stage
from llmp.analytic.block import Context
from llmp.analytic.op import OpGraph
from llmp.analytic.shape import Structure
from llmp.analytic.structure import chunk_kind_layers, chunk_layers, structure_of
from llmp.spec.spec import Spec


def decompose(spec: Spec, structure: Structure | None = None) -> OpGraph:
    """The operator graph of ``spec``.

    ``structure`` defaults to the spec's own (which needs numeric degrees); pass it explicitly
    when the spec holds symbols or arrays.
    """
    st = structure if structure is not None else structure_of(spec)
    ctx = Context.of(spec, st)
    per_chunk = chunk_layers(spec, st)
    per_kind = chunk_kind_layers(spec, st)
    layers = [op for k in range(len(st.kinds)) for op in (*layer.layer_ops(ctx, k), *offload.layer_ops(ctx, k))]
    ops = (*layers, *stage.embedding_ops(ctx), *stage.head_ops(ctx),
           *stage.boundary_ops(ctx), *stage.rank_ops(ctx, per_kind))
    return OpGraph.of(tuple(ops), st, per_chunk, per_kind)
