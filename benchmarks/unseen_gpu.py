"""Unseen GPU and unseen source: how the shipped residual models transfer (issue 10's report).

    python benchmarks/unseen_gpu.py --data ../shared/data [--out out/public] [--record]

Data: the public operator measurements, imported exactly as benchmarks/fit_public.py imports them
(llmp's own FLOP and byte counts; each source's faults handled by llmp.residuals.importers).

1. Leave one GPU out. For each GPU with kernel measurements: the cross-GPU model
   (llmp.residuals.transfer) is fitted on every OTHER GPU, as the shipped cross-GPU store is; the
   held-out GPU's rows are split 50/50 by a hash of the shape into a pool and a test half. k = 0:
   the cross-GPU model alone (spec sheet only). k = 5, 10, 30: k samples per (operator, pass)
   stratum chosen actively from the pool (llmp.residuals.adapt.adapt, what `llmp fit --base
   cross_gpu --budget K` runs). "own": a per-device model fitted on the whole pool (what a full
   sampling campaign gives). MAPE of |predicted / measured - 1| on the test half, per family,
   beside the bare roofline on the same rows.
2. Leave one source out: per device measured by several sources, a per-device model fitted on
   the other sources and scored on the held-out one (a different harness, shapes and software).

Everything here is operator data (training data for the shipped stores); no published
end-to-end step time is read.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import fit_public
from recording import commit, data_folder, machine, record

from llmp.analytic.kernels import Kernel
from llmp.residuals import adapt, dataset, features
from llmp.residuals.model import Observation, ResidualModel
from llmp.residuals.store import Residuals
from llmp.residuals.transfer import CrossGpuModel

KS = (5, 10, 30)
HELD_OUT = ("a100_sxm4_80gb", "h100_sxm5_80gb", "a40", "b200", "gb200", "gb300", "h200_sxm_141gb", "mi300x",
            "mi355x")
"""GPUs with kernel measurements of more than one family or shape set (the small ones are kept as
training GPUs only: a100_pcie_80gb, h800_sxm5_80gb)."""


def _half(o: Observation) -> bool:
    return int.from_bytes(hashlib.sha256(fit_public.shape_key(o).encode()).digest()[:4], "big") % 2 == 0


def _mape_by_family(model, obs: list[Observation]) -> dict[str, tuple[float, float, int]]:
    """family -> (MAPE with ``model``, MAPE of the bare roofline, rows); ``model`` None: roofline."""
    out = {}
    for family, (err, roof, _) in sorted(fit_public._errors(model, obs).items()):
        out[family] = (float(err.mean()), float(roof.mean()), len(err))
    if obs:
        e = fit_public._errors(model, obs)
        allerr = np.concatenate([v[0] for v in e.values()])
        allroof = np.concatenate([v[1] for v in e.values()])
        out["all"] = (float(allerr.mean()), float(allroof.mean()), len(allerr))
    return out


def leave_one_gpu_out(per_device: dict[str, list[Observation]], seed: int) -> list[dict]:
    rows = []
    for gpu in HELD_OUT:
        obs = [o for o in per_device.get(gpu, []) if isinstance(o.item, Kernel)]
        if not obs:
            continue
        t0 = time.monotonic()
        others = [o for g, v in per_device.items() if g != gpu for o in v]
        cross = Residuals(path=Path("cross_gpu"), manifest={"serves": "any"},
                          model=CrossGpuModel(random_state=seed).fit(others))
        pool = [o for o in obs if _half(o)]
        test = [o for o in obs if not _half(o)]
        result = {"gpu": gpu, "pool": len(pool), "test": len(test), "k": {}}
        result["k"]["0"] = _mape_by_family(cross, test)
        for k in KS:
            adapted = adapt.adapt(cross, pool, budget=k)
            store = Residuals(path=Path("adapted"), manifest={"serves": "any"}, model=cross.model,
                              adjustments=adapted.adjustments)
            result["k"][str(k)] = _mape_by_family(store, test)
            result.setdefault("samples", {})[str(k)] = len(adapted.chosen)
        try:
            own = ResidualModel(xgb_params=fit_public.SHIP_XGB, random_state=seed).fit(pool)
            result["k"]["own"] = _mape_by_family(own, test)
        except Exception as err:  # a pool whose groups are all below min_samples
            result["own_error"] = str(err)
        result["seconds"] = time.monotonic() - t0
        rows.append(result)
        print(f"  {gpu}: {time.monotonic() - t0:.0f} s", flush=True)
    return rows


def leave_one_source_out(out: Path, manifests: dict[str, dict], seed: int) -> list[dict]:
    by_device: dict[str, list[str]] = defaultdict(list)
    for job in fit_public.JOBS:
        if job.name in manifests:
            by_device[job.device].append(job.name)
    rows = []
    for device, jobs in sorted(by_device.items()):
        if len(jobs) < 2:
            continue
        loaded = {j: [o for o in dataset.load([out / j]).observations if isinstance(o.item, Kernel)] for j in jobs}
        for held in jobs:
            train = [o for j in jobs if j != held for o in fit_public._cap(loaded[j], seed)]
            test = fit_public._cap(loaded[held], seed)
            if not train or not test:
                continue
            try:
                model = ResidualModel(xgb_params=fit_public.SHIP_XGB, random_state=seed).fit(train)
            except Exception:
                continue
            fams = {features.family_of(o.item) for o in train}
            test = [o for o in test if features.family_of(o.item) in fams]
            if test:
                rows.append({"device": device, "held_out": held, "train": [j for j in jobs if j != held],
                             "result": _mape_by_family(model, test)})
    return rows


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _gpu_table(rows: list[dict]) -> list[str]:
    lines = ["| held-out GPU | family | test rows | roofline | k = 0 (cross-GPU) | k = 5 | k = 10 | k = 30 | own "
             "model (pool) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for fam, (e0, roof, n) in r["k"]["0"].items():
            cells = [_pct(r["k"][str(k)][fam][0]) if fam in r["k"][str(k)] else "–" for k in KS]
            own = _pct(r["k"]["own"][fam][0]) if "own" in r["k"] and fam in r["k"]["own"] else "–"
            name = f"**{fam}**" if fam == "all" else fam
            lines.append(f"| {r['gpu']} | {name} | {n} | {_pct(roof)} | {_pct(e0)} | {' | '.join(cells)} | {own} |")
    return lines


def _source_table(rows: list[dict]) -> list[str]:
    lines = ["| device | held-out source | trained on | family | rows | MAPE | roofline |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        for fam, (e, roof, n) in r["result"].items():
            lines.append(f"| {r['device']} | {r['held_out']} | {', '.join(r['train'])} | {fam} | {n} | {_pct(e)} | "
                         f"{_pct(roof)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "public")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args()
    t0 = time.monotonic()
    manifests = fit_public.import_all(data_folder(args.data), args.out / "samples")
    per_device = fit_public.load_observations(args.out / "samples", manifests)
    print("leave one GPU out:")
    gpu_rows = leave_one_gpu_out(per_device, args.seed)
    print("\n".join(_gpu_table(gpu_rows)))
    print("leave one source out:")
    source_rows = leave_one_source_out(args.out / "samples", manifests, args.seed)
    print("\n".join(_source_table(source_rows)))
    if args.record:
        record("\n".join([
            f"## Unseen GPU and unseen source (issue 10) — {time.strftime('%Y-%m-%d')}", "",
            f"- command: `python benchmarks/unseen_gpu.py --data {args.data}`",
            f"- machine: {machine()}", f"- llmp commit: {commit()}", f"- took {time.monotonic() - t0:.0f} s",
            "- data: the public operator measurements (training data of the shipped stores), imported as "
            "benchmarks/fit_public.py does; no published step time is read",
            "- leave one GPU out: cross-GPU model fitted on the other GPUs; the held-out GPU's rows split 50/50 "
            "by shape into a pool (adaptation samples: k per (operator, pass), chosen actively) and a test half "
            "(scored); \"own\": a per-device model fitted on the whole pool", "",
            *_gpu_table(gpu_rows), "", "### Leave one source out (per-device model, other sources of the same "
            "device)", "", *_source_table(source_rows), ""]))


if __name__ == "__main__":
    main()
