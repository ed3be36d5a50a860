"""The predicted step as a Chrome-trace / Perfetto JSON (``chrome://tracing``, ui.perfetto.dev).

One process per pipeline rank, named with the transformer layers it holds (an uneven split
shows in the names and in the lengths of the tasks), two threads: the compute stream and the
exposed communication. Each task of the schedule (``F3``: forward of microbatch 3; ``B3``: its
backward, or its input gradient alone where the schedule runs the weight gradient apart; ``W3``:
that weight gradient; ``F3&B1``: DualPipe's overlapped pair) is laid out as consecutive events,
one per breakdown category (op family, recompute, exposed collective by axis), in a fixed
order, its args naming the task, the chunk and its layers; the rank's gradient sync and update
follow its last task. Times in microseconds, as the format wants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmp.compose.overlap import categories
from llmp.compose.prediction import COMM, Prediction
from llmp.compose.schedule import Kind

_COMM = frozenset(COMM)
_PASS = {Kind.F: "fwd", Kind.BW: "bwd", Kind.B: "bwd_act", Kind.W: "bwd_w", Kind.FB: "fwd&bwd"}
"""Each task's pass in the phase vocabulary: a whole backward is ``bwd``; its input-gradient and
weight-gradient halves are ``bwd_act`` and ``bwd_w``."""
_THREADS = {"compute": 0, "comm": 1}


def _events(pid: int, start: float, parts: dict[str, Any], label: str,
            args: dict[str, Any]) -> list[dict[str, Any]]:
    """Consecutive events for the categories of one task, starting at ``start`` seconds."""
    out = []
    t = start
    for cat in categories():
        dur = float(parts.get(cat, 0.0))
        if dur <= 0:
            continue
        thread = _THREADS["comm" if cat in _COMM else "compute"]
        out.append({"name": f"{label} {cat}", "cat": cat, "ph": "X", "pid": pid, "tid": thread,
                    "ts": t * 1e6, "dur": dur * 1e6, "args": args})
        t += dur
    return out


def _count(layers: Any) -> int | float:
    f = float(layers)
    return int(f) if f.is_integer() else f


def trace(pred: Prediction) -> dict[str, Any]:
    """Chrome-trace JSON object of ``pred``'s step."""
    step = pred.step
    tl = step.timeline
    p = tl.plan
    events: list[dict[str, Any]] = []
    for r in range(p.pp):
        layers = _count(sum(step.layers[g] for g in p.placement[r]))
        events.append({"name": "process_name", "ph": "M", "pid": r,
                       "args": {"name": f"pipeline rank {r} ({layers} layers)"}})
        for key, name in (("compute", "compute"), ("comm", "exposed communication")):
            events.append({"name": "thread_name", "ph": "M", "pid": r, "tid": _THREADS[key], "args": {"name": name}})
    for i in range(len(p.rank)):
        kind = p.kind[i]
        if kind is Kind.WAIT:
            continue
        g, j = p.chunk[i], p.microbatch[i]
        label = {Kind.F: f"F{j}", Kind.B: f"B{j}", Kind.BW: f"B{j}", Kind.W: f"W{j}"}.get(kind, "")
        args: dict[str, Any] = {"microbatch": j, "chunk": g, "layers": _count(step.layers[g]), "task": kind.value,
                                "pass": _PASS[kind]}
        pair = p.pair[i]
        if pair is not None:
            label = f"F{j}&B{pair[1]}"
            args.update(backward_microbatch=pair[1], backward_chunk=pair[0])
        events += _events(p.rank[i], float(tl.start[i]), dict(step.passes[p.duration[i]].by_category), label, args)
    for r, tail in enumerate(step.tails):
        events += _events(r, float(step.sync_start[r]), dict(tail.sync), "grad sync", {})
        events += _events(r, float(step.update_start), dict(tail.update), "update", {})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"step_time_s": pred.step_time_s, "spec": pred.provenance.source,
                          "residuals": pred.provenance.residuals}}


def write_trace(pred: Prediction, path: str | Path) -> None:
    Path(path).write_text(json.dumps(trace(pred)))
