"""``llmp fit DIR... -o OUT`` and ``llmp fit DIR... --base STORE [--budget K] -o OUT``.

Without ``--base``: fit residual models from sample directories and store them (one XGBoost
model per family; ``--group-by`` adds device, dtype or pass), each with its cross-validated
error and a conformal band. The store serves the sampled devices, or any device with
``--serves any`` (a cross-GPU store). A new device with a few samples among many of others:
``--upweight NEW_ID``.

With ``--base STORE``: adapt a fitted store (per-device or cross-GPU) to the device of the
samples. ``--budget K`` uses K samples per (operator, pass) stratum, chosen actively (``--seed S``:
at random), or ``--picks FILE`` names the samples; the rest are left unused and score the
adaptation (before and after). Library: ``llmp.residuals.fitting``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from llmp.commands.flags import add_quiet, nonnegative_int, open_unit_interval, positive_int
from llmp.errors import InputError
from llmp.progress import bar
from llmp.residuals import fitting


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("samples", nargs="+", type=Path,
                        help="sample directories or files (llmp sample, llmp import-samples)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="model directory to write")
    parser.add_argument("--device-id", help="catalog id of the sampled device (overrides the files' record)")
    parser.add_argument("--node-id", help="catalog node the collectives ran on (default cpu_host for cpu)")
    parser.add_argument("--families", help="comma-separated subset of families/collective kinds to fit")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_quiet(parser)
    new = parser.add_argument_group("fitting a new store")
    new.add_argument("--group-by", default="family", help="comma-separated: family[,device][,dtype][,pass]")
    new.add_argument("--alpha", type=open_unit_interval, default=0.1,
                     help="miscoverage of the conformal band (default 0.1)")
    new.add_argument("--seed", type=int,
                     help="random seed of the fit (default 0); with --base --budget K: pick the K samples per "
                          "stratum at random with this seed instead of actively")
    new.add_argument("--members", type=nonnegative_int, default=0,
                     help="bootstrap members per group (for active sampling)")
    new.add_argument("--serves", metavar="any|ID,...",
                     help="devices the store serves: 'any' for a cross-GPU store (default: the sampled devices)")
    new.add_argument("--upweight", metavar="DEVICE_ID",
                     help="a new device with few samples among many of others: weight its samples to 25%% of "
                          "each family (the best adaptation in benchmarks/unseen_gpu.py)")
    adapting = parser.add_argument_group("adapting a store to a new device")
    adapting.add_argument("--base", type=Path, metavar="STORE", help="adapt this fitted store to the samples' device")
    adapting.add_argument("--budget", type=positive_int, metavar="K",
                          help="samples per (operator, pass) stratum to adapt with, chosen actively, or at random "
                               "with --seed (default: all)")
    adapting.add_argument("--picks", type=Path, metavar="FILE",
                          help="adapt with exactly these samples: their keys, one a line, or a CSV with a key "
                               "column (llmp score --rows), or a sample file")


def run(args: argparse.Namespace) -> int:
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    if args.base is None:
        if args.budget is not None or args.picks is not None:
            raise InputError("--budget and --picks choose samples to adapt a store with: each needs --base STORE")
        serves = None if args.serves is None else ("any" if args.serves == "any" else args.serves.split(","))
        with bar("fitting", quiet=args.quiet) as advance:
            result = fitting.fit(args.samples, args.out, device_id=args.device_id, node_id=args.node_id,
                                 families=families, group_by=[g.strip() for g in args.group_by.split(",")],
                                 alpha=args.alpha, seed=0 if args.seed is None else args.seed, members=args.members,
                                 upweight=args.upweight, serves=serves, progress=advance)
    else:
        if args.upweight or args.serves:
            raise InputError("--upweight and --serves apply to fitting a new store, not to --base",
                             hint="an adapted store serves the device of its samples")
        if args.seed is not None and args.budget is None:
            raise InputError("--seed with --base picks --budget K samples at random; give --budget K")
        picks = fitting.read_picks(args.picks) if args.picks is not None else None
        result = fitting.adapt_store(args.samples, args.out, args.base, budget=args.budget, device_id=args.device_id,
                                     node_id=args.node_id, families=families,
                                     choice="active" if args.seed is None else "random",
                                     seed=0 if args.seed is None else args.seed, picks=picks)
    if args.json:
        print(json.dumps(_summary(result), indent=1))
    else:
        print(_table(result))
    return 0


def _groups(fitted) -> list[dict]:
    return [{"group": g["key"], "n": g["n_samples"], "cv_mape": g["cv"]["mape"], "cv_p90": g["cv"]["p90"],
             "band_factor": math.exp(g["conformal_q"])} for g in fitted.manifest["groups"]]


def _summary(result) -> dict:
    fitted, a = result.store, result.adaptation
    out = {"path": str(fitted.path), "id": fitted.id, "scope": fitted.scope,
           "serves": fitted.serves if isinstance(fitted.serves, str) else list(fitted.serves),
           "groups": _groups(fitted), "skipped": result.data.skipped, "adjustments": fitted.manifest["adjustments"]}
    if a is not None:
        out["adaptation"] = {"device": a.device.id, "chosen": len(a.chosen), "unused": len(a.unused),
                             "strata": [{"family": s[0], "variant": s[1], "pass": s[2], "chosen": c, "available": n}
                                        for s, (c, n) in a.strata.items()]}
        if result.held_out is not None:
            out["held_out"] = {"after": result.held_out.to_dict(), "before": result.held_out_before.to_dict()}
    return out


def _table(result) -> str:
    fitted, a = result.store, result.adaptation
    serves = fitted.serves if isinstance(fitted.serves, str) else ", ".join(fitted.serves)
    lines = [f"wrote {fitted.path} (id {fitted.id}; {fitted.scope} store serving {serves})"]
    if a is None:
        lines.append(f"{'group':<34} {'n':>5} {'CV MAPE':>8} {'CV p90':>8} {'band x/':>8}")
        for r in _groups(fitted):
            key = ",".join(f"{v}" for v in r["group"].values())
            lines.append(f"{key:<34} {r['n']:>5} {100 * r['cv_mape']:>7.1f}% {100 * r['cv_p90']:>7.1f}% "
                         f"{r['band_factor']:>8.3f}")
        for group in fitted.manifest["skipped_groups"]:
            lines.append(f"no model for {group['key']}: only {group['n_samples']} samples "
                         "(factor 1, flagged uncovered)")
    else:
        lines.append(f"adapted to {a.device.id} with {len(a.chosen)} samples; {len(a.unused)} left unused")
        lines.append(f"{'operator / pass':<34} {'used':>5} {'of':>6} {'offset':>8} {'slope':>8}")
        for s, (used, available) in a.strata.items():
            adj = a.adjustments.get(s)
            fit = f"{adj.offset:>+8.3f} {adj.slope:>+8.3f}" if adj else f"{'(no model: uncovered)':>17}"
            name = f"{s[0]}{'/' + s[1] if s[1] else ''} {s[2] or '-'}"
            lines.append(f"{name:<34} {used:>5} {available:>6} {fit}")
        if result.held_out is not None:
            after, before = result.held_out.overall(), result.held_out_before.overall()
            lines.append(f"on the {after.n} unused samples: MAPE {after.store.mape:.1%} (p90 {after.store.p90:.1%}) "
                         f"adapted, {before.store.mape:.1%} before, {after.roofline.mape:.1%} roofline alone")
    for reason, n in result.data.skipped.items():
        lines.append(f"skipped {n} rows: {reason}")
    return "\n".join(lines)
