"""``llmp fit DIR... -o MODELDIR``: fit residual models from sample directories and store them.

One XGBoost model per family (``--group-by`` adds device, dtype or pass), each with its
cross-validated error and a conformal band. A new device with a few samples: fit them together
with the other devices' samples and ``--upweight NEW_ID`` (best), or, with only a fitted store at
hand, ``--base MODELDIR`` fits a per-family line on top of it (``residuals/adapt.py``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from llmp.errors import InputError


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("samples", nargs="+", type=Path, help="sample directories or files from llmp sample")
    parser.add_argument("-o", "--out", type=Path, required=True, help="model directory to write")
    parser.add_argument("--device-id", help="catalog id of the sampled device (overrides the files' record)")
    parser.add_argument("--node-id", help="catalog node the collectives ran on (default cpu_host for cpu)")
    parser.add_argument("--families", help="comma-separated subset of families/collective kinds to fit")
    parser.add_argument("--group-by", default="family", help="comma-separated: family[,device][,dtype][,pass]")
    parser.add_argument("--alpha", type=float, default=0.1, help="miscoverage of the conformal band (default 0.1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--members", type=int, default=0, help="bootstrap members per group (for active sampling)")
    parser.add_argument("--base", type=Path, help="adapt this fitted store to the samples' device instead of fitting")
    parser.add_argument("--upweight", metavar="DEVICE_ID",
                        help="a new device with few samples among many of others: weight its samples to 25%% of "
                             "each family (the best adaptation in benchmarks/unseen_gpu.py)")
    parser.add_argument("--json", action="store_true", help="print the manifest summary as JSON")


def run(args: argparse.Namespace) -> int:
    from llmp.residuals import adapt, dataset, store
    from llmp.residuals.model import ResidualModel

    families = [f.strip() for f in args.families.split(",")] if args.families else None
    data = dataset.load(args.samples, device_id=args.device_id, node_id=args.node_id, families=families)
    if not data.observations:
        raise InputError("the sample files hold no usable rows", hint="; ".join(f"{k}: {v}" for k, v in
                                                                              data.skipped.items()) or None)
    if args.out.exists() and (args.out / "manifest.json").exists():
        print(f"overwriting the store in {args.out}")
    if args.base is not None:
        base = store.load(args.base)
        adjustments = adapt.fit_adjustments(base, list(data.observations))
        store.save(base.model, args.out, devices=data.devices, samples=data.files, adjustments=adjustments,
                   extra={"adapted_from": {"path": str(args.base), "id": base.id}})
    else:
        model = ResidualModel(group_by=tuple(g.strip() for g in args.group_by.split(",")), alpha=args.alpha,
                              random_state=args.seed, n_members=args.members)
        observations = list(data.observations)
        if args.upweight:
            new = [o for o in observations if o.device.id == args.upweight]
            if not new:
                raise InputError(f"--upweight {args.upweight}: no samples of that device",
                                 hint=f"devices in the samples: {', '.join(d.id for d in data.devices)}")
            observations = adapt.weighted([o for o in observations if o.device.id != args.upweight], new)
        model.fit(observations)
        store.save(model, args.out, devices=data.devices, samples=data.files)
    fitted = store.load(args.out)
    _report(fitted, data.skipped, as_json=args.json)
    return 0


def _report(fitted, skipped: dict[str, int], *, as_json: bool) -> None:
    manifest = fitted.manifest
    rows = [{"group": g["key"], "n": g["n_samples"], "cv_mape": g["cv"]["mape"], "cv_p90": g["cv"]["p90"],
             "band_factor": math.exp(g["conformal_q"])} for g in manifest["groups"]]
    if as_json:
        print(json.dumps({"path": str(fitted.path), "id": fitted.id, "groups": rows, "skipped": skipped,
                          "adjustments": manifest.get("adjustments", {})}, indent=1))
        return
    print(f"wrote {fitted.path} (id {fitted.id})")
    print(f"{'group':<34} {'n':>5} {'CV MAPE':>8} {'CV p90':>8} {'band x/':>8}")
    for r in rows:
        key = ",".join(f"{v}" for v in r["group"].values())
        print(f"{key:<34} {r['n']:>5} {100 * r['cv_mape']:>7.1f}% {100 * r['cv_p90']:>7.1f}% {r['band_factor']:>8.3f}")
    for fam, adj in manifest.get("adjustments", {}).items():
        print(f"adapted {fam}: offset {adj['offset']:+.3f}, slope {adj['slope']:+.3f} on {adj['feature']} (n={adj['n']})")
    for group in manifest.get("skipped_groups", []):
        print(f"no model for {group['key']}: only {group['n_samples']} samples (factor 1, flagged uncovered)")
    for reason, n in skipped.items():
        print(f"skipped {n} rows: {reason}")
