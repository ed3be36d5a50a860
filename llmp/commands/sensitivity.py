"""``llmp sensitivity SPEC [--wrt NAME ...] [--at PATH=VALUE ...] [--json] [--latex [--phase P]]
[--plot OUT.png] [--top K] [--set ...]``.

For every numeric field (or those named by ``--wrt``: ``--set`` paths such as ``model.hidden``,
``parallel.tp``, ``gpu.flops.bf16``, or symbol names such as ``hidden``) prints dT/dx and the
elasticity ``(x/T) dT/dx`` of the step time at the spec's point, the regime of each op family per
phase and where it flips, the exposed communication, and the nearest kinks of the step time.

A spec with free fields (``hidden = symbol``) gets closed forms in them; elasticities need a
point: ``--at model.hidden=4096``. ``--latex`` prints the closed form (``--phase`` for one
phase's busy time; ``--wrt`` keeps only those fields symbolic).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from llmp import dsl
from llmp.commands.flags import add_quiet
from llmp.dsl import add_set_argument, load_args
from llmp.errors import InputError
from llmp.plotting import plot_path, pyplot
from llmp.progress import bar
from llmp.sensitivity import (
    analyze,
    closed_form,
    latex,
    operating_point,
    parse_at,
    symbolic_forms,
)
from llmp.sensitivity.closed import PHASES, pretty
from llmp.sensitivity.fields import Resolve, canonical, free_paths
from llmp.sensitivity.plot import plot
from llmp.spec.spec import Spec
from llmp.spec.symbols import symbol_for


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="SPEC", help="a .llmp file")
    parser.add_argument("--wrt", action="append", default=[], metavar="NAME",
                        help="a field to differentiate by (repeatable; default: every numeric field)")
    parser.add_argument("--at", action="append", default=[], metavar="PATH=VALUE",
                        help="a value for a free (`= symbol`) field, e.g. --at model.hidden=4096")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--latex", action="store_true", help="print the closed form of the step time in LaTeX")
    parser.add_argument("--phase", choices=PHASES, help="with --latex: one phase's busy time instead of the step")
    add_quiet(parser)
    parser.add_argument("--plot", metavar="OUT.png", help="write a tornado chart and T(x) curves (matplotlib)")
    parser.add_argument("--top", type=int, metavar="K", help="show the K most influential fields")
    add_set_argument(parser)


def _resolver(args: argparse.Namespace) -> Resolve:
    def resolve(extra: Sequence[str]) -> Spec:
        return dsl.load(args.spec, [*args.set, *extra])
    return resolve


def _latex(spec: Spec, args: argparse.Namespace, resolve: Resolve, at: dict[str, float]) -> int:
    expr = closed_form(spec, keep=args.wrt, phase=args.phase, at=at, resolve=resolve)
    name = "T" if args.phase is None else f"T_{{\\mathrm{{{args.phase.replace('_', ' ')}}}}}"
    text = latex(expr, name)
    if args.json:
        print(json.dumps({"phase": args.phase, "latex": text, "expression": pretty(expr),
                          "symbols": sorted(s.name for s in expr.free_symbols)}, indent=2))
    else:
        print(text)
    return 0


def _symbolic(spec: Spec, args: argparse.Namespace, resolve: Resolve) -> int:
    forms = symbolic_forms(spec, resolve)
    free = free_paths(spec)
    hint = f"elasticities need a point: pass --at {free[0]}=VALUE (or pin it with --set {free[0]}=VALUE)"
    if args.json:
        print(json.dumps({"free": list(free), "closed_forms": {k: pretty(v) for k, v in forms.items()},
                          "fields": None, "note": hint}, indent=2))
        return 0
    names = ", ".join(symbol_for(p).name for p in free)
    print(f"closed forms in the free fields ({names}); every other field at its value")
    for key, expr in forms.items():
        print(f"\n{key.replace('T', f'T({names})', 1) if key == 'T' else key} =\n  {pretty(expr)}")
    print("\nStep(u) is the unit step (1 where u > 0): a maximum's derivative follows its active branch")
    print(f"\n{hint}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.plot:
        plot_path(args.plot)
        pyplot()  # fail before the analysis when matplotlib is missing
    spec = load_args(args)
    resolve = _resolver(args)
    for name in args.wrt:
        canonical(spec, name)
    at = parse_at(spec, args.at)
    if args.phase and not args.latex:
        raise InputError("--phase selects the closed form that --latex prints", hint="add --latex, or drop --phase")
    if args.top is not None and args.top < 1:
        raise InputError(f"--top needs a positive count, got {args.top}")
    free = [p for p in free_paths(spec) if p not in at]
    if args.plot and (args.latex or free):
        raise InputError("--plot draws the step time at one operating point"
                         + (", and --latex prints a closed form instead" if args.latex else
                            f"; {', '.join(free)} {'is' if len(free) == 1 else 'are'} left free"),
                         hint="drop --latex" if args.latex else
                         f"give {'it' if len(free) == 1 else 'each'} a value: "
                         + " ".join(f"--at {p}=VALUE" for p in free))
    if args.latex:
        return _latex(spec, args, resolve, at)
    if free:
        return _symbolic(spec, args, resolve)
    with bar("sensitivity", quiet=args.quiet) as advance:
        op = operating_point(spec, at, resolve)
        result = analyze(op, args.wrt, progress=advance)
    if args.plot:
        plot(result, op, args.plot, top=args.top or 10)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.to_table(args.top))
        if args.plot:
            print(f"\nplot written to {args.plot}")
    return 0
