"""Unseen GPU: leave one GPU out, fit on the others plus k of its samples, score on the rest.

Data (read from the shared folder, never copied into the project; MIT-licensed, see the READMEs):
  * Vidur FP16 forward operator profiles on A100, H100 and A40 with identical shapes
    (``vidur/compute/<gpu>/<org>/<model>/mlp.csv``; the six models profiled on all three GPUs;
    Llama-3 rows exist on A100 only and are left out so the sets stay matched).
  * The seed paper's (estimate-train-time) A100 operator data, forward and backward
    (``seed-estimate-train-time/perlmutter-a100/operator``), used as extra A100 training data and
    for the comparison with the seed's own per-operator regressors.

Every row becomes a ``kernels.Kernel`` (``Kernel.make``) on a catalog device, so the target is
the very log(t / t_roof) the shipped models learn. Per held-out GPU: its (deduplicated) rows are
split 50/50 by a hash of the kernel into a candidate pool and a test set; k in {0, 5, 10, 30, all}
pool samples per family are chosen actively (``adapt.select_active``) and used four ways:
ridge line (offset + slope, the default of ``llmp fit --base``), offset only, continued boosting,
and a refit with the k samples added. MAPE is |predicted / measured - 1| over the test set.

    python benchmarks/unseen_gpu.py [--data ../shared/data] [--cap 1500] [--json out.json]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from llmp.analytic.kernels import Elementwise, Family, Kernel, Pass
from llmp.hardware.spec import Device, Dtype
from llmp.residuals import adapt, dataset, features
from llmp.residuals.model import Observation, ResidualModel
from llmp.residuals.store import Residuals

CATALOG = {"a100": "a100_sxm4_80gb", "h100": "h100_sxm5_80gb", "a40": "a40"}
"""Vidur's GPUs as catalog devices. Vidur's "a100"/"h100" are taken to be the 80 GB SXM parts
(assumption: the profiles do not say); its A40 is the catalog's ``a40`` (numbers and sources in
llmp/hardware/catalog/a40.llmp)."""
MATCHED_MODELS = ("microsoft/phi-2", "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-70b-hf", "Qwen/Qwen-72B",
                  "internlm/internlm-20b", "codellama/CodeLlama-34b-Instruct-hf")
KS = (0, 5, 10, 30, "all")


def device(gpu: str) -> Device:
    return dataset.catalog_node(CATALOG[gpu]).gpu


def _gemm(m, n, k, batch=1, pass_=Pass.FWD):
    return Kernel.make(Family.GEMM, Dtype.FP16, pass_, m=int(m), n=int(n), k=int(k), batch=int(batch))


def _ew(variant: Elementwise, elements, pass_=Pass.FWD):
    return Kernel.make(Family.ELEMENTWISE, Dtype.FP16, pass_, variant.value, elements=int(elements))


def vidur(data: Path, gpu: str) -> list[Observation]:
    """Vidur's forward ops of one GPU as kernels (times: median of its repeats, ms -> s)."""
    dev, out = device(gpu), []
    for model in MATCHED_MODELS:
        with (data / "vidur" / "compute" / gpu / model / "mlp.csv").open(newline="") as f:
            for r in csv.DictReader(f):
                h, kv, e, ffn = (int(r[c]) for c in ("n_head", "n_kv_head", "n_embd", "n_expanded_embd"))
                t, tp, vocab = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"]), int(r["vocab_size"])
                hd, gated = e // h, r["use_gated_mlp"] == "True"
                kv_l = max(kv // tp, 1)
                rms = int(model != "microsoft/phi-2")  # phi-2: LayerNorm, partial rotary (32 of 80 dims)
                ops = {
                    "emb": Kernel.make(Family.EMBEDDING, Dtype.FP16, tokens=t, hidden=e, vocab=vocab // tp),
                    "input_layernorm": Kernel.make(Family.NORM, Dtype.FP16, tokens=t, hidden=e, rms=rms),
                    "post_attention_layernorm": Kernel.make(Family.NORM, Dtype.FP16, tokens=t, hidden=e, rms=rms),
                    "attn_pre_proj": _gemm(t, (h // tp + 2 * kv_l) * hd, e),
                    "attn_rope": _ew(Elementwise.ROTARY, t * (h // tp + kv_l) * hd),
                    "attn_post_proj": _gemm(t, e, h // tp * hd),
                    "mlp_up_proj": _gemm(t, (2 if gated else 1) * ffn // tp, e),
                    "mlp_act": _ew(Elementwise.SWIGLU if gated else Elementwise.GELU, t * ffn // tp),
                    "mlp_down_proj": _gemm(t, e, ffn // tp),
                    "add": _ew(Elementwise.ADD, t * e),
                }
                if not rms:
                    del ops["attn_rope"]
                for name, kernel in ops.items():
                    if f"time_stats.{name}.median" not in r:  # phi-2 has no post-attention norm
                        continue
                    out.append(Observation(item=kernel, device=dev, seconds=float(r[f"time_stats.{name}.median"]) * 1e-3))
    return out


def _seed_rows(data: Path, op: str) -> list[dict[str, float]]:
    path = data / "seed-estimate-train-time" / "perlmutter-a100" / "operator" / f"NVIDIAA100-SXM4-80GB_{op}_fp16.csv"
    with path.open(newline="") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def seed(data: Path) -> list[Observation]:
    """The seed's A100 ops that are one kernel family each (see the seed README for shapes).

    Left out: GEMM backward (dgrad and wgrad timed together as one span), the unfused
    multi-kernel RMSNorm, fillmask and the fused masked softmax (no matching family), res_add
    backward (a copy of the forward), the optimizer stages (FP16 states, no master weights).
    """
    dev, out = device("a100"), []

    def add(kernel: Kernel, us: float) -> None:
        out.append(Observation(item=kernel, device=dev, seconds=us * 1e-6))

    def vocab(mp: float) -> int:
        return math.ceil(50257 / (128 * mp)) * 128

    widths = {"linear1": lambda d, mp: (3 * d // mp, d), "linear2": lambda d, mp: (d, d // mp),
              "linear3": lambda d, mp: (4 * d // mp, d), "linear4": lambda d, mp: (d, 4 * d // mp),
              "linear_final": lambda d, mp: (vocab(mp), d)}
    for op, width in widths.items():
        for r in _seed_rows(data, op):
            n, k = width(int(r["dim"]), int(r.get("mp", 1)))
            add(_gemm(r["b"] * r["l"], n, k), r["F_dur(us)"])
    for r in _seed_rows(data, "layernorm"):
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(Kernel.make(Family.NORM, Dtype.FP16, pass_, tokens=int(r["b"] * r["l"]), hidden=int(r["dim"]), rms=0),
                r[col])
    for r in _seed_rows(data, "gelu"):
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(_ew(Elementwise.GELU, r["b"] * r["l"] * 4 * r["dim"] // r["mp"], pass_), r[col])
    for r in _seed_rows(data, "res_add"):
        add(_ew(Elementwise.ADD, r["b"] * r["l"] * r["dim"]), r["F_dur(us)"])
    for r in _seed_rows(data, "RoPE"):
        hp = int(r["h"] // r["mp"])
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(_ew(Elementwise.ROTARY, 2 * r["b"] * r["l"] * hp * (r["dim"] // r["h"]), pass_), r[col])
    for r in _seed_rows(data, "softmax"):
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(Kernel.make(Family.SOFTMAX, Dtype.FP16, pass_, rows=int(r["b"] * (r["h"] // r["mp"]) * r["l"]),
                            cols=int(r["l"])), r[col])
    seen = set()
    for r in _seed_rows(data, "flash_atten"):
        key = (r["mp"], r["b"], r["h"], r["l"], r["dim"])
        if key in seen or key == (1.0, 8.0, 40.0, 4096.0, 5120.0):  # duplicates; the one impossible row
            continue
        seen.add(key)
        hp = int(r["h"] // r["mp"])
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(Kernel.make(Family.ATTENTION, Dtype.FP16, pass_, batch=int(r["b"]), heads=hp, kv_heads=hp,
                            seq_q=int(r["l"]), seq_kv=int(r["l"]), head_dim=int(r["dim"] // r["h"]),
                            head_dim_v=int(r["dim"] // r["h"]), window=int(r["l"]), causal=0, flash=1), r[col])
    for r in _seed_rows(data, "embedding"):
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(Kernel.make(Family.EMBEDDING, Dtype.FP16, pass_, tokens=int(r["b"] * r["l"]), hidden=int(r["dim"]),
                            vocab=vocab(r["mp"])), r[col])
    for r in _seed_rows(data, "parallel_cross_entropy_128"):
        for pass_, col in ((Pass.FWD, "F_dur(us)"), (Pass.BWD, "B_dur(us)")):
            add(Kernel.make(Family.CROSS_ENTROPY, Dtype.FP16, pass_, tokens=int(r["b"] * r["l"]), vocab=vocab(r["mp"])),
                r[col])
    return out


def dedupe(obs: list[Observation]) -> list[Observation]:
    """One observation per (device, kernel): the median of the duplicates' times."""
    groups: dict[tuple, list[Observation]] = defaultdict(list)
    for o in obs:
        groups[(o.device.id, o.item)].append(o)
    return [Observation(item=g[0].item, device=g[0].device, seconds=float(np.median([o.seconds for o in g])))
            for g in groups.values()]


def _hash(item: Kernel) -> int:
    return int(hashlib.sha256(repr(item).encode()).hexdigest()[:8], 16)


def split(obs: list[Observation]) -> tuple[list[Observation], list[Observation]]:
    """Deterministic 50/50 split by kernel: (candidate pool, test set)."""
    pool = [o for o in obs if _hash(o.item) % 2 == 0]
    return pool, [o for o in obs if _hash(o.item) % 2 == 1]


def cap(obs: list[Observation], per_family: int, seed: int = 0) -> list[Observation]:
    """At most ``per_family`` observations per (device, family), chosen at random."""
    rng = np.random.default_rng(seed)
    groups: dict[tuple, list[Observation]] = defaultdict(list)
    for o in obs:
        groups[(o.device.id, features.family_of(o.item))].append(o)
    out = []
    for g in groups.values():
        idx = rng.permutation(len(g))[:per_family]
        out.extend(g[i] for i in sorted(idx))
    return out


class Scored:
    """A test set with its features and rooflines computed once (predictors are scored many times)."""

    def __init__(self, obs: list[Observation], dev: Device) -> None:
        self.obs, self.dev = obs, dev
        self.items = [o.item for o in obs]
        self.blocks, _ = features.blocks(self.items, dev)
        self.roof = np.array([features.roofline_seconds(it, dev)[1] for it in self.items])
        self.seconds = np.array([o.seconds for o in obs])
        self.family = [features.family_of(it) for it in self.items]

    def errors(self, predictor) -> dict[str, np.ndarray]:
        """|predicted / measured - 1| per family (``predictor`` None: the bare roofline)."""
        log_f = (np.zeros(len(self.items)) if predictor is None
                 else predictor.predict(self.items, self.dev, blocks=self.blocks).log_factor)
        ape = np.abs(self.roof * np.exp(log_f) / self.seconds - 1)
        out: dict[str, list[float]] = defaultdict(list)
        for fam, e in zip(self.family, ape):
            out[fam].append(float(e))
        out["all"] = list(ape)
        return {k: np.asarray(v) for k, v in out.items()}


def summary(errs: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    return {k: {"mape": float(v.mean()), "p90": float(np.quantile(v, 0.9)), "n": len(v)} for k, v in errs.items()}


def holdout(gpu: str, per_gpu: dict[str, list[Observation]], args: argparse.Namespace) -> dict:
    """Fit on the other GPUs, adapt with k samples of ``gpu``, score on its test half."""
    dev = device(gpu)
    train = cap([o for g, obs in per_gpu.items() if g != gpu for o in obs], args.cap)
    pool, test = split(per_gpu[gpu])
    test_fams = {features.family_of(o.item) for o in test}
    train_fams = {features.family_of(o.item) for o in train}
    test = [o for o in test if features.family_of(o.item) in train_fams]  # families seen on other GPUs
    pool = [o for o in pool if features.family_of(o.item) in train_fams]
    t0 = time.perf_counter()
    base = ResidualModel(n_members=args.members, random_state=args.seed).fit(train)
    shared = Residuals(path=Path("."), manifest={}, model=base)
    scored = Scored(test, dev)
    out = {"gpu": gpu, "device": dev.id, "train_rows": len(train), "pool_rows": len(pool), "test_rows": len(test),
           "families_not_on_other_gpus": sorted(test_fams - train_fams), "fit_s": time.perf_counter() - t0,
           "roofline_only": summary(scored.errors(None)), "k": {"0": {"shared": summary(scored.errors(shared))}}}
    pool_items = [o.item for o in pool]
    pool_blocks, _ = features.blocks(pool_items, dev)
    by_fam: dict[str, list[int]] = defaultdict(list)
    for i, o in enumerate(pool):
        by_fam[features.family_of(o.item)].append(i)
    for k in KS[1:]:
        if k == "all":
            picks = {"active": pool}
        else:
            rng = np.random.default_rng(args.seed + int(k))
            picks = {"active": [pool[i] for i in adapt.select_active(shared, pool_items, dev, int(k),
                                                                      blocks=pool_blocks)],
                     "random": [pool[i] for idx in by_fam.values() for i in rng.permutation(idx)[:int(k)]]}
        row: dict[str, object] = {"samples": len(picks["active"])}
        for how, chosen in picks.items():
            tag = "" if how == "active" else "_random"
            for name, slope in (("ridge_line", True), ("offset", False)):
                adj = adapt.fit_adjustments(shared, chosen, slope=slope)
                row[name + tag] = summary(scored.errors(Residuals(path=Path("."), manifest={}, model=base,
                                                                  adjustments=adj)))
            row["boost" + tag] = summary(scored.errors(adapt.continue_boosting(base, chosen, rounds=args.rounds)))
            refit = ResidualModel(random_state=args.seed, cv_folds=2).fit(train + cap(chosen, args.cap))
            row["refit" + tag] = summary(scored.errors(refit))
            refit_w = ResidualModel(random_state=args.seed, cv_folds=2).fit(adapt.weighted(train, cap(chosen, args.cap)))
            row["refit_weighted" + tag] = summary(scored.errors(refit_w))
        out["k"][str(k)] = row
    return out


def seed_comparison(obs: list[Observation], args: argparse.Namespace) -> dict:
    """Our model on the seed's A100 data alone: 5-fold CV error per family (roofline + residual)."""
    model = ResidualModel(random_state=args.seed).fit(cap(obs, args.cap))
    return {dict(k)["family"]: {"cv_mape": v["mape"], "cv_p90": v["p90"], "n": model.n_samples_per_group_[k]}
            for k, v in model.cv_error_.items()}


def _fmt(s: dict[str, float]) -> str:
    return f"{100 * s['mape']:5.1f}% (p90 {100 * s['p90']:5.1f}%)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--cap", type=int, default=1500, help="max training rows per (GPU, family)")
    parser.add_argument("--members", type=int, default=4, help="bootstrap members for active selection")
    parser.add_argument("--rounds", type=int, default=40, help="trees added by continued boosting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpus", default="a100,h100,a40")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    per_gpu = {g: dedupe(vidur(args.data, g)) for g in ("a100", "h100", "a40")}
    seed_obs = dedupe(seed(args.data))
    results = {"rows": {g: len(v) for g, v in per_gpu.items()}, "seed_rows": len(seed_obs), "holdout": [],
               "seed_a100_cv": seed_comparison(seed_obs, args)}
    per_gpu["a100"] = per_gpu["a100"] + seed_obs
    for gpu in args.gpus.split(","):
        res = holdout(gpu, per_gpu, args)
        results["holdout"].append(res)
        print(f"\n== held out {gpu} ({res['device']}): train {res['train_rows']} rows, pool {res['pool_rows']}, "
              f"test {res['test_rows']} (fit {res['fit_s']:.0f} s)")
        print(f"roofline only            all {_fmt(res['roofline_only']['all'])}")
        print(f"k=0 shared model         all {_fmt(res['k']['0']['shared']['all'])}")
        for k in KS[1:]:
            row = res["k"][str(k)]
            cells = "  ".join(f"{m} {_fmt(row[m]['all'])}" for m in row if m != "samples")
            print(f"k={k!s:<4} ({row['samples']:>5} samples) {cells}")
        fams = sorted(res["roofline_only"])
        print("per family at k=30 (ridge_line):",
              ", ".join(f"{f} {100 * res['k']['30']['ridge_line'][f]['mape']:.1f}%" for f in fams if f != "all"))
    print("\nseed A100 data, our 5-fold CV MAPE per family:",
          ", ".join(f"{f} {100 * v['cv_mape']:.1f}% (n={v['n']})" for f, v in results["seed_a100_cv"].items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
