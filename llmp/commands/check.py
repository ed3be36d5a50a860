"""``llmp check SPEC [--set ...] [--json]``: resolve a spec and show it with derived quantities.

The table groups fields by section with units formatted (``80 GiB``, ``3.35 TB/s``); the
derived block shows what is computed, never typed in: world size, microbatches per step,
tokens per step, parameters (and active parameters for MoE), layers per pipeline stage (each
stage's own count when the split is uneven) and the cluster's peak. ``--json`` prints the same
as one object: the spec's fields plus ``derived``.
"""

from __future__ import annotations

import argparse
import json
from enum import Enum
from fractions import Fraction
from typing import Any

import sympy as sp

from llmp import stacks
from llmp.analytic.derived import derived
from llmp.dsl import add_set_argument, load_args
from llmp.dsl.overrides import SET_FILE
from llmp.hardware.spec import Cluster, Derivation, Device
from llmp.spec import schema
from llmp.spec.schema import Kind, Section
from llmp.spec.serialize import plain, spec_to_dict
from llmp.spec.spec import Spec
from llmp.spec.symbols import symbol_name
from llmp.units import BANDWIDTH, COUNT, TIME, format_count, format_flops, format_quantity


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    spec = load_args(args)
    if args.json:
        print(json.dumps(to_json(spec), indent=2))
    else:
        print(render(spec))
    return 0


def to_json(spec: Spec) -> dict[str, Any]:
    """``llmp check --json``: the spec as a dict plus ``derived``."""
    data = spec_to_dict(spec)
    data["derived"] = {k: _json_number(v) for k, v in derived(spec).items()}
    data["stack_profile"] = stacks.in_effect(spec)
    return data


def _json_number(value: Any) -> Any:
    if isinstance(value, Fraction):
        return float(value)
    return plain(value)


# ---- the table ------------------------------------------------------------------------

_WIDTH = 24


def _show(value: Any, path: str) -> str:
    fdef = schema.field_at(path)
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, str):
        return f'"{value}"'
    if fdef is not None and fdef.kind is Kind.REAL and fdef.dim != COUNT:
        return format_quantity(value, fdef.dim)
    return str(value)


def _rows(title: str, obj: Any, section: Section, prefix: str) -> list[str]:
    derivation = obj.derivation if isinstance(obj, Device) else None
    lines = [title]
    for name, fdef in section.fields.items():
        if fdef.kind in (Kind.REF, Kind.LINK):
            continue
        shown = _show(getattr(obj, name), f'{prefix}.{name}')
        if derivation is not None:
            shown = _with_origin(shown, derivation, obj.id, name)
        lines.append(f"  {name:<{_WIDTH}}{shown}")
    return lines


def _with_origin(shown: str, derivation: Derivation | None, device: str, *names: str) -> str:
    """A derived device's value tagged with where it came from: written in the derived block
    (``overridden``), taken from a base (``from h100_sxm5_80gb``), ``--set`` or the default.
    ``names`` are looked up in order (``flops.bf16`` for an override, then ``flops``)."""
    if derivation is None:
        return shown
    source = next((derivation.origin[n] for n in names if n in derivation.origin), None)
    tag = ("default" if source is None else "overridden" if source == device
           else "--set" if source == SET_FILE else f"from {source}")
    return f"{shown:<{_WIDTH - 1}} ({tag})"


def render(spec: Spec) -> str:
    """The resolved spec as a plain-text table grouped by section."""
    m = spec.model
    out = [f"spec {spec.source}", ""]
    out += _rows(f"model {m.name}", m, schema.MODEL, "model")
    if m.moe is not None:
        out += _rows("  moe", m.moe, schema.MOE, "model.moe")
    if m.mla is not None:
        out += _rows("  mla", m.mla, schema.MLA, "model.mla")
    out += ["", *_rows("train", spec.train, schema.TRAIN, "train")]
    if spec.train.finetune is not None:
        out += _rows("  finetune", spec.train.finetune, schema.FINETUNE, "train.finetune")
    out += ["", *_rows("parallel", spec.parallel, schema.PARALLEL, "parallel")]
    out += ["", *_cluster_lines(spec.cluster)]
    out += ["", *_gpu_lines(spec.cluster.gpu)]
    out += ["", *_stack_lines(spec)]
    out += ["", "derived"]
    for name, value in derived(spec).items():
        out.append(f"  {name:<{_WIDTH}}{_derived_text(name, value)}")
    if spec.sweeps:
        out += ["", "sweeps"]
        for sweep in spec.sweeps:
            values = ", ".join(_show(v, sweep.path) for v in sweep.values)
            out.append(f"  {sweep.path:<{_WIDTH}}[{values}]")
    if spec.symbols:
        out += ["", "free symbols"]
        for path in spec.symbols:
            out.append(f"  {path:<{_WIDTH}}{symbol_name(path)}")
    return "\n".join(out)


def _cluster_lines(cl: Cluster) -> list[str]:
    """The cluster's shape, then each of its links with what was measured of it."""
    domain = "" if cl.node.domain == cl.node.gpus_per_node else f", NVLink domains of {cl.node.domain}"
    out = [f"cluster {cl.id}: {cl.nodes} x node {cl.node.id} = {cl.world_size} devices{domain}"]
    for label, link in (("node.intra", cl.node.intra), ("node.inter", cl.node.inter),
                        ("cluster.inter", cl.inter)):
        bandwidth = format_quantity(link.bandwidth, BANDWIDTH)
        latency = format_quantity(link.latency, TIME)
        measured = ""
        if link.efficiency != 1 or link.peer_bandwidth is not None:
            measured = f", efficiency {_show(link.efficiency, f'{label}.efficiency')}"
        if link.peer_bandwidth is not None:
            measured += f", {format_quantity(link.peer_bandwidth, BANDWIDTH)} per pair"
        if link.nvls:
            measured += ", NVLS" + (f" at {_show(link.nvls_efficiency, f'{label}.nvls_efficiency')}"
                                    if link.nvls_efficiency is not None else "")
        if link.transport is not None:
            measured += f", {link.transport.value}"
        out.append(f"  {label:<{_WIDTH}}{link.id}: {bandwidth}, latency {latency}{measured}")
    return out


def _gpu_lines(gpu: Device) -> list[str]:
    """The device's fields, its peak rates and its measured ones, each with the device it came from."""
    derivation = gpu.derivation
    title = f"gpu {gpu.id}" + "".join(f" from {base}" for base in (derivation.chain if derivation else ()))
    out = _rows(title, gpu, schema.GPU, "gpu")
    for dtype, rate in gpu.peak_flops.items():
        path = f"flops.{dtype.value}"
        out.append(f"  {path:<{_WIDTH}}{_with_origin(format_flops(rate), derivation, gpu.id, path, 'flops')}")
    for block in ("achievable", "flash_attention"):
        facts = getattr(gpu, block)
        for dtype, rate in (facts.rates.items() if facts is not None else ()):
            path = f"{block}.{dtype.value}"
            shown = _with_origin(f"{format_flops(rate)} (measured)", derivation, gpu.id, path, block)
            out.append(f"  {path:<{_WIDTH}}{shown}")
    return out


def _stack_lines(spec: Spec) -> list[str]:
    """The training stack and what it decides for this spec, each with where it comes from."""
    prof = stacks.profile(spec.train.stack)
    out = [f"stack {prof.stack.value}: {prof.title} ({prof.versions})"]
    for row in stacks.in_effect(spec):
        value = row["value"]
        if isinstance(value, list):
            shown = ", ".join(map(str, value))
        elif isinstance(value, str):
            shown = value
        else:
            shown = _show(value, row["field"] or "")
        origin = "set in the spec" if row["source"] == "spec" else row["source"]
        out.append(f"  {row['item']:<{_WIDTH}}{shown}  [{origin}]")
    return out


def _derived_text(name: str, value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, sp.Basic) and value.free_symbols:
        return str(value)
    if name == "cluster_peak_flops":
        return format_flops(value)
    if isinstance(value, Fraction):
        return f"{value} (= {float(value):.4g}, not whole)"
    number = int(value) if float(value).is_integer() else float(value)
    if isinstance(number, int) and number >= 10_000:
        return f"{format_count(number)} ({number})"
    return str(number)

