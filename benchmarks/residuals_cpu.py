"""Residual models on this CPU: sample, fit, score per operator (L0) and end to end (L1).

One reproducible command (it also writes the shipped CPU defaults with ``--ship``)::

    python benchmarks/residuals_cpu.py --out out/residuals_cpu --budget 110 --ship

1. ``llmp sample`` (all kernel families, fp32, 1 thread) into OUT/samples (resumable).
2. L0: fit on 75% of the samples (split by a hash of the case key), score the other 25%:
   MAPE and p90 of |predicted / measured - 1| per family, with and without the residual model,
   next to the noise floor: stored cases re-timed, |re-timed / stored - 1|.
3. Fit on all samples -> OUT/model (and ``llmp/hardware/defaults/cpu`` with ``--ship``), with
   small trees so the shipped files stay well under 2 MB.
4. L1: ``llmp measure`` (median of 5 steps after 2 warm-up, 1 thread; the minimum of 3 such
   medians taken in interleaved rounds) vs ``llmp predict`` with and without the residual model,
   on tiny-to-small GPT and Llama specs never sampled as a whole.

The dev VM is shared with other engineers' test runs: single-thread timings use the thread's CPU
time (``measure/timing.py``), the script can wait (``--max-wait`` s) for the 1-minute load
average to drop below ``--quiet-load``, and it records the load every phase ran under.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from llmp import dsl
from llmp.analytic.correction import Correction
from llmp.analytic.graph import decompose
from llmp.analytic.kernels import Family, Kernel
from llmp.compose import predict
from llmp.measure import bench, design, from_spec, sampling, step, timing
from llmp.residuals import dataset, features, samplefile, saving, store
from llmp.residuals.model import ResidualModel

SHIP_XGB = {"n_estimators": 120, "max_depth": 4}
"""Smaller trees for the shipped store (the L0 split below uses the same settings)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    name: str
    arch: str
    layers: int
    hidden: int
    heads: int
    seq: int
    micro: int
    global_batch: int
    recompute: str = "none"
    kv_heads: int | None = None
    vocab: int = 1024
    dropout: float = 0.0

    def text(self) -> str:
        extra = ""
        if self.arch == "llama":
            ffn = max(64, round(self.hidden * 8 / 3 / 64) * 64)
            extra = f"  kv_heads = {self.kv_heads or self.heads}  ffn_hidden = {ffn}"
        if self.dropout:
            extra += f"  dropout = {self.dropout}"
        return ('use "cpu_host"\ncluster local { node = cpu_host  nodes = 1 }\n'
                f"model {self.name} {{ arch = {self.arch}  layers = {self.layers}  hidden = {self.hidden}  "
                f"heads = {self.heads}  vocab = {self.vocab}  seq_len = {self.seq}{extra} }}\n"
                f"train {{ precision = fp32  global_batch = {self.global_batch}  micro_batch = {self.micro}  "
                f"recompute = {self.recompute} }}\n")


CASES = (
    Case(name="gpt_l1_h64", arch="gpt", layers=1, hidden=64, heads=4, seq=64, micro=1, global_batch=1, vocab=512),
    Case(name="gpt_l2_h128_acc2", arch="gpt", layers=2, hidden=128, heads=4, seq=128, micro=2, global_batch=4),
    Case(name="gpt_l4_h256_sel", arch="gpt", layers=4, hidden=256, heads=8, seq=128, micro=4, global_batch=4,
         recompute="selective"),
    Case(name="gpt_l8_h128_full", arch="gpt", layers=8, hidden=128, heads=4, seq=256, micro=2, global_batch=2,
         recompute="full"),
    Case(name="gpt_l2_h512_drop", arch="gpt", layers=2, hidden=512, heads=8, seq=64, micro=1, global_batch=2,
         vocab=2048, dropout=0.1),
    Case(name="gpt_l6_h192_s512", arch="gpt", layers=6, hidden=192, heads=6, seq=512, micro=1, global_batch=1,
         recompute="selective"),
    Case(name="llama_l1_h64_mb8", arch="llama", layers=1, hidden=64, heads=4, kv_heads=2, seq=64, micro=8,
         global_batch=8),
    Case(name="llama_l2_h128_sel", arch="llama", layers=2, hidden=128, heads=8, kv_heads=2, seq=256, micro=2,
         global_batch=2, recompute="selective"),
    Case(name="llama_l4_h256_full", arch="llama", layers=4, hidden=256, heads=8, kv_heads=4, seq=128, micro=2,
         global_batch=4, recompute="full"),
    Case(name="llama_l8_h64_s512", arch="llama", layers=8, hidden=64, heads=4, kv_heads=1, seq=512, micro=1,
         global_batch=2),
    Case(name="llama_l3_h384_mb4", arch="llama", layers=3, hidden=384, heads=6, kv_heads=2, seq=128, micro=4,
         global_batch=4, vocab=4096),
    Case(name="llama_l2_h512_sel", arch="llama", layers=2, hidden=512, heads=8, kv_heads=8, seq=256, micro=1,
         global_batch=1, recompute="selective"),
)


def wait_quiet(limit: float, max_wait: float) -> float:
    """Wait until the 1-minute load average is below ``limit`` (or ``max_wait`` passed); return it."""
    end = time.monotonic() + max_wait
    while os.getloadavg()[0] >= limit and time.monotonic() < end:
        time.sleep(5)
    return os.getloadavg()[0]


def _held_out(key: str) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 4 == 0


def l0(samples: Path, seed: int) -> dict:
    """Fit on 75% of the samples, score the held-out 25% per family."""
    data = dataset.load([samples])
    keys = [repr(o.item) for o in data.observations]
    train = [o for o, k in zip(data.observations, keys) if not _held_out(k)]
    test = [o for o, k in zip(data.observations, keys) if _held_out(k)]
    model = ResidualModel(xgb_params=SHIP_XGB, random_state=seed).fit(train)
    dev = data.devices[0]
    pred = model.predict([o.item for o in test], dev)
    roof = np.array([features.roofline_seconds(o.item, dev)[1] for o in test])
    meas = np.array([o.seconds for o in test])
    out: dict[str, dict[str, float]] = {}
    fams = np.array([features.family_of(o.item) for o in test])
    for fam in [*sorted(set(fams)), "all"]:
        sel = np.ones(len(test), bool) if fam == "all" else fams == fam
        ape = np.abs(roof[sel] * np.exp(pred.log_factor[sel]) / meas[sel] - 1)
        ape0 = np.abs(roof[sel] / meas[sel] - 1)
        inside = np.abs(np.log(meas[sel] / roof[sel]) - pred.log_factor[sel]) <= pred.q[sel]
        out[fam] = {"n_test": int(sel.sum()), "mape": float(ape.mean()), "p90": float(np.quantile(ape, 0.9)),
                    "roofline_mape": float(ape0.mean()), "band_coverage": float(inside.mean())}
    out["_train_rows"] = {"n": len(train)}
    return out


class OracleResiduals:
    """Times every kernel of a spec's graph on this CPU right now (the sampler's own harness) and
    returns measured / roofline as the factor: the prediction a perfect residual model would give.

    ``predicted - oracle`` is then the residual models' share of the L1 error and ``oracle -
    measured`` the share of what the operator graph leaves out (framework work between kernels).
    """

    id = "oracle (kernels timed in place)"

    def __init__(self, spec) -> None:
        self.roles = {}
        for op in decompose(spec).ops:
            if isinstance(op.work, Kernel) and op.work.family is Family.GEMM:
                self.roles[op.work] = op.name.rsplit(".", 1)[-1] if op.name.endswith(("dgrad", "wgrad")) else "fwd"
        self.tokens = int(spec.train.micro_batch * spec.model.seq_len)
        self.head_dim = int(spec.model.head_dim)

    def _case(self, k: Kernel) -> design.Case:
        dims = tuple((n, int(v)) for n, v in k.dims)
        width = 0
        if k.family is Family.ELEMENTWISE:
            elements = dict(dims)["elements"]
            width = self.head_dim if k.variant == "rotary" else elements // self.tokens
        variant = self.roles.get(k, "fwd") if k.family is Family.GEMM else k.variant
        return design.Case(family=k.family.value, pass_=k.pass_.value, variant=variant, dtype=k.dtype.value,
                           dims=dims, width=width)

    def correct(self, items, spec) -> Correction:
        dev, cpu = torch.device("cpu"), spec.cluster.gpu
        torch.set_num_threads(1)
        factors = {}
        for k in dict.fromkeys(items):
            fn = bench.build(self._case(k), dev, cache=timing.cache_bytes(dev), memory_cap=2**30)
            factors[k] = timing.time_calls(fn, dev).median_s / features.roofline_seconds(k, cpu)[1]
        f = np.array([factors[k] for k in items])
        return Correction(factor=f, low=f, high=f, covered=np.ones(len(items), dtype=bool))


def repeatability(samples: Path, per_family: int, seed: int) -> dict[str, dict[str, float]]:
    """The noise floor of L0: re-time ``per_family`` stored cases per family in this process and
    compare with the stored time (|re-timed / stored - 1|); no model can beat this on held-out rows."""
    import random

    torch.set_num_threads(1)
    dev, rng, out = torch.device("cpu"), random.Random(seed), {}
    for family in design.FAMILIES:
        table = samplefile.read(samples / f"{family}.csv")
        ratios = []
        for row in rng.sample(list(table.rows), min(per_family, len(table.rows))):
            case = design.Case(family=family, pass_=row["pass"], variant=row["variant"], dtype=row["dtype"],
                               dims=tuple((n, int(row[n])) for n in design.DIMS[family]), width=int(row["width"]))
            fn = bench.build(case, dev, cache=timing.cache_bytes(dev), memory_cap=2**30)
            ratios.append(timing.time_calls(fn, dev).median_s / float(row["time_s"]))
        dev_ = np.abs(np.array(ratios) - 1)
        out[family] = {"n": len(ratios), "mean": float(dev_.mean()), "p90": float(np.quantile(dev_, 0.9))}
        print(f"  {family:<14} re-timed vs stored: mean |r-1| {100 * dev_.mean():5.1f}%  p90 "
              f"{100 * np.quantile(dev_, 0.9):5.1f}%  (n={len(ratios)}, load {os.getloadavg()[0]:.2f})", flush=True)
    return out


def l1(model_dir: Path, steps: int, warmup: int, args: argparse.Namespace) -> list[dict]:
    """Measure each case (``--rounds`` interleaved rounds, min of the round medians) and predict it.

    Rounds go round-robin over the cases so each case is timed at several moments; on the shared
    VM a whole round can be slowed by other processes, and the least disturbed round is kept.
    """
    res = store.load(model_dir)
    specs = {case.name: dsl.loads(case.text(), filename=f"{case.name}.llmp") for case in CASES}
    medians: dict[str, list[float]] = defaultdict(list)
    loads: dict[str, list[float]] = defaultdict(list)
    for _ in range(args.rounds):
        for case in CASES:
            loads[case.name].append(wait_quiet(args.quiet_load, args.max_wait))
            cfg = from_spec.config_from_spec(specs[case.name], steps=steps, warmup=warmup)
            medians[case.name].append(step.measure(cfg).median_s)
    rows = []
    for case in CASES:
        spec = specs[case.name]
        measured = min(medians[case.name])
        with_res, without = predict(spec, residuals=res), predict(spec, residuals=None)
        oracle = predict(spec, residuals=OracleResiduals(spec)).step_time_s
        rows.append({"case": case.name, "measured_s": measured, "round_medians_s": medians[case.name],
                     "oracle_s": oracle, "error_oracle": oracle / measured - 1,
                     "predicted_s": with_res.step_time_s, "band": list(with_res.band),
                     "roofline_s": without.step_time_s, "error": with_res.step_time_s / measured - 1,
                     "error_roofline": without.step_time_s / measured - 1, "load": loads[case.name],
                     "uncorrected": list(with_res.provenance.uncorrected)})
        spread = max(medians[case.name]) / measured - 1
        print(f"  {case.name:<20} measured {1e3 * measured:8.2f} ms (rounds +{100 * spread:4.0f}%)  predicted "
              f"{1e3 * with_res.step_time_s:8.2f} ms ({100 * rows[-1]['error']:+6.1f}%)  roofline only "
              f"{1e3 * without.step_time_s:8.2f} ms ({100 * rows[-1]['error_roofline']:+6.1f}%)  oracle "
              f"{1e3 * oracle:8.2f} ms ({100 * rows[-1]['error_oracle']:+6.1f}%)  "
              f"load {min(loads[case.name]):.2f}-{max(loads[case.name]):.2f}", flush=True)
    return rows


def _l1_summary(report: dict) -> None:
    for key, label in (("error", "with residuals"), ("error_roofline", "roofline only"),
                       ("error_oracle", "oracle kernels (graph gap)")):
        err = np.array([r[key] for r in report["l1"]])
        report[f"l1_mape_{key}"] = float(np.abs(err).mean())
        print(f"L1 {label:<28} MAPE {100 * np.abs(err).mean():5.1f}%  max {100 * np.abs(err).max():5.1f}%  "
              f"bias {100 * err.mean():+5.1f}%")
    pred = np.array([r["predicted_s"] for r in report["l1"]])
    oracle = np.array([r["oracle_s"] for r in report["l1"]])
    report["l1_residual_vs_oracle_mape"] = float(np.mean(np.abs(pred / oracle - 1)))
    print(f"L1 residual models vs oracle kernels MAPE {100 * report['l1_residual_vs_oracle_mape']:.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "residuals_cpu")
    parser.add_argument("--budget", type=int, default=110, help="cases per family")
    parser.add_argument("--minutes", type=float, default=None, help="cap the sampling time (rerun to continue)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="L1 rounds per case (min of round medians)")
    parser.add_argument("--quiet-load", type=float, default=0.8, help="wait for a 1-min load average below this")
    parser.add_argument("--max-wait", type=float, default=120.0, help="seconds to wait for a quiet machine")
    parser.add_argument("--ship", action="store_true", help="write the model to llmp/hardware/defaults/cpu")
    parser.add_argument("--skip-l1", action="store_true")
    parser.add_argument("--l1-only", action="store_true", help="only L1, with the model already in OUT/model")
    parser.add_argument("--noise", type=int, default=20, help="cases per family re-timed for the L0 noise floor")
    parser.add_argument("--noise-only", action="store_true", help="only the noise floor of OUT/samples")
    args = parser.parse_args()
    samples, model_dir = args.out / "samples", args.out / "model"
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": platform.node(),
                    "cpu": dataset.catalog_device("cpu").name, "command": " ".join(sys.argv)}
    if args.noise_only:
        report["noise"] = repeatability(samples, args.noise, args.seed)
        (args.out / "report_noise.json").write_text(json.dumps(report, indent=1))
        return
    if args.l1_only:
        report["l1"] = l1(model_dir, args.steps, args.warmup, args)
        _l1_summary(report)
        (args.out / "report_l1.json").write_text(json.dumps(report, indent=1))
        return
    report["load_before_sampling"] = wait_quiet(args.quiet_load, args.max_wait)
    t0 = time.monotonic()
    sampled = sampling.run(sampling.SampleConfig(out=samples, per_family=args.budget, minutes=args.minutes,
                                                 seed=args.seed, progress=sys.stderr.isatty()))
    report["sampling"] = {"measured": sampled.measured, "existing": sampled.existing, "remaining": sampled.remaining,
                          "failed": len(sampled.failed), "seconds": time.monotonic() - t0,
                          "load_after": os.getloadavg()[0]}
    print(f"sampled {sampled.measured} new cases in {report['sampling']['seconds']:.0f} s "
          f"({sampled.existing} existing, {sampled.remaining} left, {len(sampled.failed)} failed)")
    report["l0"] = l0(samples, args.seed)
    print("L0 (held-out 25% of samples):")
    for fam, r in report["l0"].items():
        if not fam.startswith("_"):
            print(f"  {fam:<14} n={r['n_test']:>4}  MAPE {100 * r['mape']:5.1f}%  p90 {100 * r['p90']:5.1f}%  "
                  f"(roofline only {100 * r['roofline_mape']:6.1f}%)  band coverage {100 * r['band_coverage']:4.0f}%")
    if args.noise > 0:
        print("L0 noise floor (stored cases re-timed):")
        report["noise"] = repeatability(samples, args.noise, args.seed)
    data = dataset.load([samples])
    model = ResidualModel(xgb_params=SHIP_XGB, random_state=args.seed).fit(list(data.observations))
    saving.save(model, model_dir, devices=data.devices, samples=[str(p.relative_to(args.out)) for p in
                                                                  map(Path, data.files)],
               extra={"threads": 1, "produced_by": "benchmarks/residuals_cpu.py"})
    if args.ship:
        target = store.default_path("cpu")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(model_dir, target)
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"shipped {target} ({size / 1e6:.2f} MB)")
        report["shipped_bytes"] = size
    if not args.skip_l1:
        print("L1 (llmp measure vs llmp predict):")
        report["l1"] = l1(model_dir, args.steps, args.warmup, args)
        _l1_summary(report)
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out / 'report.json'}")


if __name__ == "__main__":
    main()
