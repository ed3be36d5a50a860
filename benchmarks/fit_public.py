"""Rebuild every shipped GPU residual store from the public measurements, and score them (L0).

    python benchmarks/fit_public.py --data ../shared/data [--out out/public] [--ship] [--record]

1. Import (``llmp import-samples``'s library function, ``llmp.residuals.importers.run``): each
   public source in ``JOBS`` becomes an llmp sample directory under OUT/samples/<job>/, with
   llmp's own FLOP and byte counts and each source's documented faults handled (see the
   importers and each source's README in the shared folder).
2. L0 on held-out *shapes*: per device, the rows are split 80/20 by a hash of the kernel's shape
   (its sorted dims: the forward, dgrad and wgrad of one layer share a shape, and so does one
   shape measured by two sources), fitted on the 80 and scored on the 20 (MAPE and p90 of
   |predicted / measured - 1| per family, beside the bare roofline's error on the same rows).
3. Ship (with ``--ship``): per device with measurements, a store fitted on all of its rows
   in ``llmp/hardware/defaults/<device>/``; and the cross-GPU store in
   ``llmp/hardware/defaults/cross_gpu/`` (``llmp.residuals.transfer``), which serves every other
   device. Each manifest names every source (``owner/repo@commit:path``), licence and rows used,
   and records ``roofline_error``: per family, how far the bare analytic time is from the measured
   rows (the width a prediction's band gives a family no store serves).
   Everything is seeded and single-threaded, so a rerun writes byte-identical stores.

Measurements are training data here; published end-to-end step times are never read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recording import commit, data_folder, machine, record

from llmp.analytic import kernels, roofline
from llmp.analytic.kernels import Kernel
from llmp.residuals import dataset, features, importers, saving, store
from llmp.residuals.model import Observation, ResidualModel, row_key
from llmp.residuals.transfer import CrossGpuModel, machine_of


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """One import: a source format, its paths under the data folder, and the catalog device."""

    name: str
    format: str
    paths: tuple[str, ...]
    device: str
    gpu_id: str | None = None


JOBS: tuple[Job, ...] = (
    Job(name="seed-a100", format="seed", device="a100_sxm4_80gb",
        paths=("seed-estimate-train-time/perlmutter-a100/operator", "seed-estimate-train-time/perlmutter-a100/nccl")),
    Job(name="vidur-a100", format="vidur", device="a100_sxm4_80gb",
        paths=("vidur/compute/a100", "vidur/network/a100_dgx")),
    Job(name="vidur-h100", format="vidur", device="h100_sxm5_80gb",
        paths=("vidur/compute/h100", "vidur/network/h100_dgx")),
    Job(name="vidur-a40", format="vidur", device="a40", paths=("vidur/compute/a40",)),
    *(Job(name=f"kernels-{gpu}", format="kernels", device=device, gpu_id=gpu, paths=("kernels/kernels.csv",))
      for gpu, device in (("h100_sxm5_80gb", "h100_sxm5_80gb"), ("h200_sxm_141gb", "h200_sxm_141gb"),
                          ("b200", "b200"), ("gb200", "gb200"), ("gb300", "gb300"), ("mi300x", "mi300x"),
                          ("mi355x", "mi355x"), ("a100_pcie_80gb", "a100_pcie_80gb"),
                          ("h800_sxm5_80gb", "h800_sxm5_80gb"), ("a100_unstated", "a100_sxm4_80gb"),
                          ("a100_sxm4_40gb", "a100_sxm4_40gb"), ("a100_sxm4_mem_unstated", "a100_sxm4_40gb"))),
)
"""Every public source the shipped stores are fitted on. Left out: kernels.csv's ``v100_unstated``
(vTrain does not say SXM2 or SXM3) and ``mi210`` (not in the catalog)."""

SHIP_XGB: dict[str, object] = {"n_estimators": 120, "max_depth": 4, "n_jobs": 1}
"""Smaller trees than the default so the shipped files stay small; one thread so a rerun is
byte-identical."""
CAP = 4000
"""At most this many rows per (device, source, family): the seed's 40k GEMM rows would otherwise
outweigh every other shape and slow the fit without adding information."""
TEST_SHARE = 0.2
ROOFLINE_LEVEL = 0.9
"""Level of the roofline error recorded in each manifest: the stores' own bands are at 1 - alpha = 0.9."""


def shape_key(obs: Observation) -> str:
    """The shape a row measured, independent of pass and source: its sorted dims."""
    item = obs.item
    dims = sorted(int(v) for _, v in item.dims) if isinstance(item, Kernel) else \
        [int(item.bytes), int(item.group), int(item.ranks_per_node)]
    return f"{features.family_of(item)}:{dims}"


def held_out(obs: Observation) -> bool:
    digest = hashlib.sha256(shape_key(obs).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < TEST_SHARE


def import_all(data: Path, out: Path) -> dict[str, dict]:
    """Run every job; return each job's import manifest (``import.json``)."""
    manifests = {}
    out.mkdir(parents=True, exist_ok=True)
    for job in JOBS:
        paths = [data / p for p in job.paths if (data / p).exists()]
        if not paths:
            print(f"  {job.name}: no data under {data} ({', '.join(job.paths)}), skipped")
            continue
        report = importers.run(job.format, paths, out / job.name, device=job.device, gpu_id=job.gpu_id)
        manifests[job.name] = report.manifest
        print(f"  {job.name:<28} -> {job.device:<16} {report.bytes / 1e6:6.2f} MB")
    return manifests


def _cap(obs: list[Observation], seed: int) -> list[Observation]:
    """At most ``CAP`` rows per family, chosen at random (seeded), in their original order."""
    by_family: dict[str, list[int]] = defaultdict(list)
    for i, o in enumerate(obs):
        by_family[features.family_of(o.item)].append(i)
    rng = np.random.default_rng(seed)
    keep = sorted(i for idx in by_family.values()
                  for i in (idx if len(idx) <= CAP else rng.choice(idx, CAP, replace=False)))
    return [obs[i] for i in keep]


def load_observations(out: Path, manifests: dict[str, dict]) -> dict[str, list[Observation]]:
    """Device -> observations of every job (capped per source and family)."""
    per_device: dict[str, list[Observation]] = defaultdict(list)
    for n, job in enumerate(j for j in JOBS if j.name in manifests):
        loaded = dataset.load([out / job.name])
        per_device[job.device].extend(_cap(list(loaded.observations), seed=n))
    return dict(per_device)


SMALL = 2**21
"""The small-work slice: kernels whose largest tensor holds at most this many elements (2 M), where
issue 21 finds published runs far too fast (micro_batch x seq x hidden / tp below 2 M elements)."""


def work_elements(item: Kernel) -> int:
    """Tokens x width per GPU of a kernel: the elements of its largest tensor (a GEMM's biggest
    operand or output, attention's Q or O, a norm's or an elementwise kernel's activation)."""
    d = {n: int(v) for n, v in item.dims}
    if "m" in d:
        return d["batch"] * max(d["m"] * d["n"], d["m"] * d["k"], d["k"] * d["n"])
    if "seq_q" in d:
        return d["batch"] * d["heads"] * d["seq_q"] * max(d["head_dim"], d["head_dim_v"])
    if "rows" in d:
        return d["rows"] * d["cols"]
    if "tokens" in d:
        return d["tokens"] * d.get("hidden", d.get("vocab", 1))
    return d.get("elements", d.get("params", 0))


def small(item: Kernel | object) -> bool:
    """In the small-work slice (``SMALL``); collectives never are."""
    return isinstance(item, Kernel) and work_elements(item) <= SMALL


def plain_seconds(item: Kernel, device) -> float:
    """The roofline without tile and wave quantization (as before issue 21): what the quantized
    roofline is compared with."""
    c = kernels.cost(item)
    return float(roofline.roofline(item, c, peak=features.peak_for(item, c, device),
                                   mem_bandwidth=float(device.mem_bandwidth),
                                   launch_overhead=float(device.launch_overhead)))


def _errors(model, obs: list[Observation], *, by_pass: bool = False, only_small: bool = False
            ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per family (and pass, with ``by_pass``): (|llmp/measured - 1|, |roofline/measured - 1|,
    |unquantized roofline/measured - 1|) on ``obs`` (one device); ``only_small``: the rows of the
    small-work slice only."""
    if only_small:
        obs = [o for o in obs if small(o.item)]
        if not obs:
            return {}
    device = obs[0].device
    links = next((o.links for o in obs if o.links is not None), None)
    items = [o.item for o in obs]
    pred = model.predict(items, device, links=links) if model is not None else None
    out: dict[str, tuple[list[float], list[float], list[float]]] = defaultdict(lambda: ([], [], []))
    blocks, _ = features.blocks(items, device, links=links)
    for family, block in blocks.items():
        for j, i in enumerate(block.index):
            key = f"{family} {items[i].pass_}" if by_pass and isinstance(items[i], Kernel) else family
            factor = math.exp(pred.log_factor[i]) if pred is not None else 1.0
            plain = plain_seconds(items[i], device) if isinstance(items[i], Kernel) else block.base_s[j]
            out[key][0].append(abs(block.base_s[j] * factor / obs[i].seconds - 1))
            out[key][1].append(abs(block.base_s[j] / obs[i].seconds - 1))
            out[key][2].append(abs(plain / obs[i].seconds - 1))
    return {f: (np.asarray(a), np.asarray(b), np.asarray(c)) for f, (a, b, c) in out.items()}


def l0(per_device: dict[str, list[Observation]], seed: int) -> list[dict]:
    """Fit on 80% of each device's shapes, score the other 20% (per family)."""
    rows = []
    for device, obs in sorted(per_device.items()):
        train = [o for o in obs if not held_out(o)]
        test = [o for o in obs if held_out(o)]
        if not train or not test:
            continue
        try:
            model = ResidualModel(xgb_params=SHIP_XGB, random_state=seed).fit(train)
        except Exception as err:  # a device whose groups are all below min_samples
            print(f"  {device}: no model ({err})")
            continue
        for only_small in (False, True):
            scored = _errors(model, test, by_pass=True, only_small=only_small)
            for family, (err, roof, plain) in sorted(scored.items()):
                name = family.split()[0]
                rows.append({"device": device, "family": family, "small": only_small, "n_test": len(err),
                             "n_train": sum(features.family_of(o.item) == name and (small(o.item) or not only_small)
                                            for o in train),
                             "mape": float(err.mean()), "p90": float(np.quantile(err, 0.9)),
                             "roofline_mape": float(roof.mean()), "plain_mape": float(plain.mean())})
    return rows


LARGE = 4 * SMALL
"""The shapes a store is fitted on in the extrapolation test: largest tensor above 8 M elements."""


def small_from_large(per_device: dict[str, list[Observation]], seed: int) -> list[dict]:
    """Per device and family: a store fitted on the large shapes only (``LARGE``), scored on the
    small-work slice, none of which it measured: the share its domain check flags, its error as
    served (its model out of domain only where the group's extrapolation test allows,
    ``ResidualModel.extrapolates``), its model's own answer everywhere, and the bare quantized
    roofline. The test of what a store should do beyond the shapes it measured."""
    rows = []
    for device, obs in sorted(per_device.items()):
        obs = [o for o in obs if isinstance(o.item, Kernel)]
        train = [o for o in obs if work_elements(o.item) > LARGE]
        test = [o for o in obs if small(o.item)]
        if len(train) < 50 or len(test) < 20:
            continue
        try:
            model = ResidualModel(xgb_params=SHIP_XGB, random_state=seed).fit(train)
        except Exception as err:
            print(f"  {device}: no model ({err})")
            continue
        items = [o.item for o in test]
        pred = model.predict(items, test[0].device)
        blocks, _ = features.blocks(items, test[0].device)
        for family, block in sorted(blocks.items()):
            keys = [row_key(model.group_by, items[i], test[0].device) for i in block.index]
            forced = np.asarray([model.models_[k].predict(block.X[j:j + 1])[0] if k in model.models_ else 0.0
                                 for j, k in enumerate(keys)])
            has = pred.has_model[block.index]
            if not has.any():
                continue
            sec = np.asarray([test[i].seconds for i in block.index])
            served = np.abs(block.base_s * np.exp(pred.log_factor[block.index]) / sec - 1)
            rows.append({"device": device, "family": family, "n": len(sec),
                         "in_domain": float(pred.in_domain[block.index].mean()), "served": float(served.mean()),
                         "model": float(np.mean(np.abs(block.base_s * np.exp(forced) / sec - 1))),
                         "roofline": float(np.mean(np.abs(block.base_s / sec - 1)))})
    return rows


def _md_extrapolation(rows: list[dict]) -> list[str]:
    lines = ["| device | family | small rows | flagged out of domain | store as served | its model everywhere | "
             "quantized roofline |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['device']} | {r['family']} | {r['n']} | {1 - r['in_domain']:.0%} | "
                     f"{100 * r['served']:.1f}% | {100 * r['model']:.1f}% | {100 * r['roofline']:.1f}% |")
    return lines


def roofline_error(obs: list[Observation]) -> dict[str, dict]:
    """Per family, how far the bare analytic time (roofline; alpha-beta for collectives) is from the
    measured time on ``obs``: the ``ROOFLINE_LEVEL`` quantile of |log(measured / analytic)| with equal
    weight per machine (the GPU; for collectives the GPU and its links, ``transfer.machine_of``), the
    MAPE of analytic / measured - 1 (machines weighted equally too), the rows and the machines.

    Recorded in each manifest as ``roofline_error``: where no store serves a family, a prediction's
    band is as wide as the roofline's measured error for it (``llmp/compose/band.py``). Nothing is
    fitted to these numbers, so every row counts as held out.
    """
    per: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for o in obs:
        if isinstance(o.item, Kernel):
            _, base = features.kernel_row(o.item, o.device)
        elif o.links is not None:
            _, base = features.collective_row(o.item, o.links)
        else:
            continue
        per[features.family_of(o.item)].append((machine_of(o), math.log(o.seconds / base)))
    out = {}
    for family, rows in sorted(per.items()):
        machines = np.asarray([m for m, _ in rows])
        log_err = np.asarray([e for _, e in rows])
        names, inverse, counts = np.unique(machines, return_inverse=True, return_counts=True)
        weight = 1.0 / counts[inverse]
        err = np.abs(log_err)
        order = np.argsort(err)
        cum = np.cumsum(weight[order]) / weight.sum()
        q = float(err[order][min(int(np.searchsorted(cum, ROOFLINE_LEVEL)), len(err) - 1)])
        ape = np.abs(np.exp(-log_err) - 1.0)  # |analytic / measured - 1|
        out[family] = {"level": ROOFLINE_LEVEL, "q": q, "mape": float(np.sum(weight * ape) / weight.sum()),
                       "n": len(rows), "machines": [str(n) for n in names]}
    return out


def _sources(manifests: dict[str, dict], jobs: list[Job]) -> list[dict]:
    out = []
    for job in jobs:
        m = manifests.get(job.name)
        if m is not None:
            out.append({"job": job.name, "format": job.format, "device": job.device, "import": m})
    return out


def ship(per_device: dict[str, list[Observation]], manifests: dict[str, dict], seed: int) -> dict[str, int]:
    """Fit and write every store; returns bytes written per store."""
    sizes = {}
    for device, every in sorted(per_device.items()):
        # A device's store holds its kernels only: a collective's correction belongs to the network
        # it was measured on (Vidur's two DGX A100s, the seed's Perlmutter node), not to every
        # cluster built of that GPU. Collectives go to the cross-GPU store, where leave-one-machine-
        # out decides whether they transfer at all.
        obs = [o for o in every if isinstance(o.item, Kernel)]
        if not obs:  # collectives only (the A100 40GB's NCCL logs): served by the cross-GPU store
            shutil.rmtree(store.default_path(device), ignore_errors=True)
            continue
        try:
            model = ResidualModel(xgb_params=SHIP_XGB, random_state=seed).fit(obs)
        except Exception as err:
            print(f"  {device}: no store ({err})")
            continue
        target = store.default_path(device)
        shutil.rmtree(target, ignore_errors=True)
        jobs = [j for j in JOBS if j.device == device]
        saving.save(model, target, devices=[obs[0].device], serves=[device],
                   samples=[j.name for j in jobs if j.name in manifests],
                   extra={"produced_by": "benchmarks/fit_public.py", "sources": _sources(manifests, jobs),
                          "roofline_error": roofline_error(obs)})
        sizes[device] = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    everything = [o for obs in per_device.values() for o in obs]
    cross = CrossGpuModel(random_state=seed).fit(everything)
    target = store.default_path(store.CROSS_GPU)
    shutil.rmtree(target, ignore_errors=True)
    devices = {o.device.id: o.device for o in everything}
    saving.save_cross_gpu(cross, target, devices=[devices[k] for k in sorted(devices)],
                         samples=[j.name for j in JOBS if j.name in manifests],
                         extra={"produced_by": "benchmarks/fit_public.py", "sources": _sources(manifests, list(JOBS)),
                                "roofline_error": roofline_error(everything)})
    sizes["cross_gpu"] = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return sizes


def _md(rows: list[dict], *, only_small: bool = False) -> list[str]:
    lines = ["| device | family | train rows | test rows | L0 MAPE | L0 p90 | roofline-only MAPE | "
             "unquantized roofline |", "|---|---|---|---|---|---|---|---|"]
    for r in (r for r in rows if r["small"] == only_small):
        lines.append(f"| {r['device']} | {r['family']} | {r['n_train']} | {r['n_test']} | {100 * r['mape']:.1f}% | "
                     f"{100 * r['p90']:.1f}% | {100 * r['roofline_mape']:.1f}% | {100 * r['plain_mape']:.1f}% |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "public")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ship", action="store_true",
                        help="write the stores to llmp/hardware/defaults (default: score only)")
    parser.add_argument("--record", action="store_true", help="append the section to benchmarks/RESULTS.md")
    parser.add_argument("--heading", default="Public GPU residual stores, L0 on held-out shapes",
                        help="the RESULTS.md section's title (the date is appended)")
    args = parser.parse_args()
    t0 = time.monotonic()
    print("import:")
    manifests = import_all(data_folder(args.data), args.out / "samples")
    per_device = load_observations(args.out / "samples", manifests)
    print("L0 on held-out shapes:")
    rows = l0(per_device, args.seed)
    print("\n".join(_md(rows)))
    print(f"small-work slice (largest tensor <= {SMALL} elements):")
    print("\n".join(_md(rows, only_small=True)))
    print(f"extrapolation: fitted on shapes above {LARGE} elements, scored on the small-work slice:")
    beyond = small_from_large(per_device, args.seed)
    print("\n".join(_md_extrapolation(beyond)))
    sizes = ship(per_device, manifests, args.seed) if args.ship else {}
    for name, size in sizes.items():
        print(f"shipped {name}: {size / 1e6:.2f} MB")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "l0.json").write_text(json.dumps(rows, indent=1))
    if args.record:
        record("\n".join([
            f"## {args.heading} — {time.strftime('%Y-%m-%d')}", "",
            f"- command: `python benchmarks/fit_public.py --data {args.data}{' --ship' if args.ship else ''} --record`",
            f"- machine: {machine()}", f"- llmp commit: {commit()}",
            "- data: the public operator measurements in ../shared/data (training data); split: per device, 20% of "
            "shapes held out by a hash of the sorted kernel dims (passes and sources of one shape stay together)",
            f"- took {time.monotonic() - t0:.0f} s", "", *_md(rows), "",
            f"Small-work slice of the same held-out rows (largest tensor of the kernel <= {SMALL} elements: "
            "tokens x width per GPU; train rows: of that slice):", "", *_md(rows, only_small=True), "",
            f"Beyond the measured shapes: per device a store fitted on the shapes above {LARGE} elements only, "
            "scored on the small-work slice (split by shape size; none of these shapes was fitted):", "",
            *_md_extrapolation(beyond), "",
            *(f"- shipped `{n}`: {s / 1e6:.2f} MB" for n, s in sizes.items()), ""]))


if __name__ == "__main__":
    main()
