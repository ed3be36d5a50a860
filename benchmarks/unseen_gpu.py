"""Unseen GPU and unseen source: how the shipped residual models transfer (issues 10 and 24).

    python benchmarks/unseen_gpu.py --data ../shared/data [--out out/public] [--seeds 3] [--sources]
                                    [--record]

Data: the public operator measurements, imported exactly as benchmarks/fit_public.py imports them
(llmp's own FLOP and byte counts; each source's faults handled by llmp.residuals.importers).

1. Leave one GPU out. For each GPU with kernel measurements: the cross-GPU model
   (llmp.residuals.transfer) is fitted on every OTHER GPU, as the shipped cross-GPU store is. For
   each of ``--seeds`` seeds the held-out GPU's rows are split 50/50 by shape
   (``llmp.residuals.split``, seeded: never by row) into a pool and a test half. k = 0: the
   cross-GPU model alone (spec sheet only). k = 3, 10, 30, 100: k samples per (operator, pass)
   stratum from the pool, picked at random (seeded) and actively (llmp.residuals.adapt.adapt, what
   `llmp fit --base cross_gpu --budget K [--seed S]` runs). MAPE of |predicted / measured - 1| on
   the test half, pooled and per (operator, pass), beside the bare roofline on the same rows; the
   spread is the min-max over the seeds. The issue's targets are checked on these numbers.
2. ``--sources``: leave one source out: per device measured by several sources, a per-device
   model fitted on the other sources and scored on the held-out one.

Everything here is operator data (training data for the shipped stores); no published
end-to-end step time is read.
"""

from __future__ import annotations

import argparse
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
from llmp.residuals import adapt, dataset, features, split
from llmp.residuals.model import Observation, ResidualModel, stratum_of
from llmp.residuals.store import Residuals
from llmp.residuals.transfer import CrossGpuModel

KS = (3, 10, 30, 100)
CHOICES = ("random", "active")
HELD_OUT = ("a100_sxm4_80gb", "h100_sxm5_80gb", "a40", "b200", "gb200", "gb300", "h200_sxm_141gb", "mi300x",
            "mi355x")
"""GPUs with kernel measurements of more than one family or shape set (the small ones are kept as
training GPUs only: a100_pcie_80gb, h800_sxm5_80gb)."""
TARGETS = {"k0_pooled": 0.15, "k0_over_roofline": 0.02, "k30_per_op": 0.08, "k100_pooled": 0.05}
"""Issue 24's targets: k = 0 <= 15 % pooled and no (operator, pass) worse than the roofline by
more than 2 points; k = 3 never worse than k = 0; k = 30 <= 8 % on every (operator, pass);
k = 100 <= 5 % pooled."""


def _op_pass(o: Observation) -> str:
    family, variant, pass_, _ = stratum_of(o.item)
    return f"{family}{'/' + variant if variant else ''} {pass_ or '-'}"


def _errors(res: Residuals | None, obs: list[Observation]) -> tuple[np.ndarray, list[str]]:
    """|predicted / measured - 1| per row (``res`` None: the roofline) and each row's (operator, pass)."""
    device = obs[0].device
    items = [o.item for o in obs]
    blocks, _ = features.blocks(items, device)
    pred = res.predict(items, device, blocks=blocks) if res is not None else None
    err = np.full(len(obs), np.nan)
    for block in blocks.values():
        lf = pred.log_factor[block.index] if pred is not None else 0.0
        err[block.index] = np.abs(block.base_s * np.exp(lf) / np.asarray([obs[i].seconds for i in block.index]) - 1)
    return err, [_op_pass(o) for o in obs]


def _by_op(err: np.ndarray, ops: list[str]) -> dict[str, tuple[float, int]]:
    """(operator, pass) -> (MAPE, rows); "all" pooled."""
    ok = np.isfinite(err)
    out = {"all": (float(err[ok].mean()), int(ok.sum()))}
    for op in sorted(set(ops)):
        sel = ok & np.asarray([o == op for o in ops])
        if sel.any():
            out[op] = (float(err[sel].mean()), int(sel.sum()))
    return out


def leave_one_gpu_out(per_device: dict[str, list[Observation]], seeds: int) -> list[dict]:
    rows = []
    for gpu in HELD_OUT:
        obs = [o for o in per_device.get(gpu, []) if isinstance(o.item, Kernel)]
        if not obs:
            continue
        t0 = time.monotonic()
        others = [o for g, v in per_device.items() if g != gpu for o in v]
        cross = Residuals(path=Path("cross_gpu"), manifest={"serves": "any"},
                          model=CrossGpuModel(random_state=0).fit(others))
        result: dict = {"gpu": gpu, "seeds": []}
        for seed in range(seeds):
            held = [split.in_test(split.shape_key(o.item), 0.5, seed) for o in obs]
            pool = [o for o, h in zip(obs, held) if not h]
            test = [o for o, h in zip(obs, held) if h]
            cell = {"pool": len(pool), "test": len(test), "k": {}}
            err, ops = _errors(None, test)
            cell["k"]["roofline"] = _by_op(err, ops)
            err, _ = _errors(cross, test)
            cell["k"]["0"] = _by_op(err, ops)
            for k in KS:
                for choice in CHOICES:
                    adapted = adapt.adapt(cross, pool, budget=k, choice=choice, seed=seed)
                    res = Residuals(path=Path("adapted"), manifest={"serves": "any"}, model=cross.model,
                                    adjustments=adapted.adjustments)
                    err, _ = _errors(res, test)
                    cell["k"][f"{k} {choice}"] = _by_op(err, ops)
            result["seeds"].append(cell)
        result["seconds"] = time.monotonic() - t0
        rows.append(result)
        print(f"  {gpu}: {result['seconds']:.0f} s", flush=True)
    return rows


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


def _columns() -> list[str]:
    return ["roofline", "0", *(f"{k} {c}" for k in KS for c in CHOICES)]


def _cell(r: dict, col: str, op: str) -> str:
    """Mean over the seeds, with the min-max spread when the seeds differ by 0.1 point or more."""
    vals = [c["k"][col][op][0] for c in r["seeds"] if op in c["k"][col]]
    if not vals:
        return "–"
    lo, hi = min(vals), max(vals)
    mean = _pct(float(np.mean(vals)))
    return mean if hi - lo < 0.001 else f"{mean} ({100 * lo:.1f}–{100 * hi:.1f})"


def _gpu_table(rows: list[dict]) -> list[str]:
    cols = _columns()
    lines = ["| held-out GPU | operator, pass | test rows | " + " | ".join(
        "roofline" if c == "roofline" else f"k = {c}" for c in cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    for r in rows:
        ops = sorted({op for c in r["seeds"] for op in c["k"]["0"]}, key=lambda o: (o != "all", o))
        for op in ops:
            n = int(np.mean([c["k"]["0"][op][1] for c in r["seeds"] if op in c["k"]["0"]]))
            name = "**pooled**" if op == "all" else op
            lines.append(f"| {r['gpu']} | {name} | {n} | " + " | ".join(_cell(r, c, op) for c in cols) + " |")
    return lines


def _mean(r: dict, col: str, op: str) -> float | None:
    vals = [c["k"][col][op][0] for c in r["seeds"] if op in c["k"][col]]
    return float(np.mean(vals)) if vals else None


def _targets(rows: list[dict]) -> list[str]:
    """Issue 24's targets on the leave-one-GPU-out numbers (means over seeds; k = 3 per seed)."""
    lines = ["| held-out GPU | k=0 pooled (<=15%) | op/pass >2 pts worse than roofline at k=0 | "
             "k=3 worse than k=0 (seed, choice) | op/pass above 8% at k=30 (active) | k=100 pooled (<=5%) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        ops = [op for op in r["seeds"][0]["k"]["0"] if op != "all"]
        worse = [op for op in ops if (_mean(r, "0", op) or 0) > (_mean(r, "roofline", op) or 0) + 0.02]
        k3 = [f"{i}/{c}" for i, cell in enumerate(r["seeds"]) for c in CHOICES
              if cell["k"][f"3 {c}"]["all"][0] > cell["k"]["0"]["all"][0]]
        k30 = [op for op in ops if (_mean(r, "30 active", op) or 0) > TARGETS["k30_per_op"]]
        k0, k100 = _mean(r, "0", "all") or 0, _mean(r, "100 active", "all") or 0
        lines.append(f"| {r['gpu']} | {_pct(k0)} {'✓' if k0 <= TARGETS['k0_pooled'] else '✗'} | "
                     f"{len(worse)}: {', '.join(worse) or '–'} | {', '.join(k3) or 'none ✓'} | "
                     f"{len(k30)} of {len(ops)} | {_pct(k100)} {'✓' if k100 <= TARGETS['k100_pooled'] else '✗'} |")
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
    parser.add_argument("--seeds", type=int, default=3, help="splits and random picks (default 3)")
    parser.add_argument("--sources", action="store_true", help="also leave one source out")
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    args = parser.parse_args()
    t0 = time.monotonic()
    manifests = fit_public.import_all(data_folder(args.data), args.out / "samples")
    per_device = fit_public.load_observations(args.out / "samples", manifests)
    print("leave one GPU out:")
    gpu_rows = leave_one_gpu_out(per_device, args.seeds)
    print("\n".join(_gpu_table(gpu_rows)))
    print("\n".join(_targets(gpu_rows)))
    source_rows = []
    if args.sources:
        print("leave one source out:")
        source_rows = leave_one_source_out(args.out / "samples", manifests, 0)
        print("\n".join(_source_table(source_rows)))
    if args.record:
        record("\n".join([
            f"## Unseen GPU per (operator, pass), random and active picks (issue 24) — {time.strftime('%Y-%m-%d')}",
            "", f"- command: `python benchmarks/unseen_gpu.py --data {args.data} --seeds {args.seeds}"
            f"{' --sources' if args.sources else ''}`",
            f"- machine: {machine()}", f"- llmp commit: {commit()}", f"- took {time.monotonic() - t0:.0f} s",
            "- data: the public operator measurements (training data of the shipped stores), imported as "
            "benchmarks/fit_public.py does; no published step time is read",
            "- split: leave one GPU out (cross-GPU model fitted on the other GPUs); the held-out GPU's rows split "
            f"50/50 by shape (llmp.residuals.split, seeds 0..{args.seeds - 1}) into a pool (k samples per "
            "(operator, pass), random or active) and a test half (scored); cells: mean MAPE over the seeds "
            "(min–max)", "", "### Against the issue's targets", "", *_targets(gpu_rows), "",
            "### Per held-out GPU and (operator, pass)", "", *_gpu_table(gpu_rows), "",
            *(["### Leave one source out (per-device model, other sources of the same device)", "",
               *_source_table(source_rows), ""] if args.sources else [])]))


if __name__ == "__main__":
    main()
