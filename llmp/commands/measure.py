"""``llmp measure SPEC``: time real training steps of the spec's model with our reference torch
GPT/Llama (random weights and tokens, no downloads) and report the median step time.

``--csv OUT`` appends a row in the published-measurement schema so ``llmp validate`` can score
it; ``--export cfg.json`` writes the resolved measurement for a bare GPU node, which runs it with
``python -m llmp.measure.step --config cfg.json --csv OUT`` (torch only).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llmp import dsl, files
from llmp.dsl import add_set_argument
from llmp.errors import InputError


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="the .llmp spec to measure")
    add_set_argument(parser)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to run (default cpu)")
    parser.add_argument("--steps", type=int, default=5, help="timed steps (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    parser.add_argument("--nproc", type=int, default=1, help="local data-parallel processes; must equal parallel.dp")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per process (default 1, as llmp sample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, help="append the measurement as a published-CSV row")
    parser.add_argument("--export", type=Path, help="write the measurement config JSON and exit (no torch needed)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


LIMITS = {"steps": 10_000, "warmup": 10_000, "nproc": 1024, "threads": 1024}
"""Most of each count one run of ``llmp measure`` takes: 10,000 steps of the tiny CPU model is
about an hour of timing (far more repeats than a median needs); 1,024 local processes or threads is
8x the cores of the largest two-socket servers (2 x 64-core EPYC with SMT: 256 threads)."""


def run(args: argparse.Namespace) -> int:
    for name, most in LIMITS.items():
        least = 0 if name == "warmup" else 1
        value = getattr(args, name)
        if not least <= value <= most:
            raise InputError(f"--{name} must be from {least} to {most:,}, got {value}")
    if args.export is not None:
        files.output_file(args.export, "--export")
    if args.csv is not None:
        files.output_file(args.csv, "--csv")
    from llmp.measure.from_spec import config_from_spec

    spec = dsl.load_args(args)
    cfg = config_from_spec(spec, device=args.device, steps=args.steps, warmup=args.warmup, nproc=args.nproc,
                           threads=args.threads, seed=args.seed)
    if args.export is not None:
        try:
            args.export.write_text(cfg.to_json() + "\n")
        except OSError as err:
            raise InputError(f"cannot write {args.export}: {err.strerror or err}") from None
        print(f"wrote {args.export}; run it with: python -m llmp.measure.step --config {args.export}")
        return 0
    from llmp.measure import step

    try:
        result = step.measure(cfg)
    except RuntimeError as err:  # torch: out of memory, no CUDA device, a failed rank
        raise InputError(f"the measurement failed: {str(err).splitlines()[0]}") from None
    if args.csv is not None:
        step.append_csv(args.csv, step.csv_row(cfg, result))
    if args.json:
        print(json.dumps({"step_time_s": result.median_s, "step_times_s": list(result.step_times_s),
                          "params": result.params, "tokens_per_step": result.tokens_per_step, "env": result.env,
                          "config": json.loads(cfg.to_json())}, indent=1))
    else:
        m = cfg.model
        print(f"{m.name}: median step {result.median_s * 1e3:.3f} ms over {len(result.step_times_s)} steps "
              f"after {cfg.warmup} warm-up ({result.params / 1e6:.3f} M params, {result.tokens_per_step} tokens/step, "
              f"dp={m.dp}, {m.microbatches} microbatch(es), {m.precision}, recompute={m.recompute}, "
              f"{result.env['threads']} thread(s), {result.env['device_name']})")
        if args.csv is not None:
            print(f"appended to {args.csv}")
    return 0
