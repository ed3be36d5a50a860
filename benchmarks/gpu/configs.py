"""The single-GPU end-to-end configurations for GPU calibration (issue 6), as .llmp specs.

Writes one spec per configuration into OUT/specs/ and, next to it, the torch-only measurement
config that ``python -m llmp.measure.step --config`` runs on a bare GPU node (where
lark/sympy/xgboost may be missing). 33 configurations span what the issue asks for: GPT and
Llama variants of 125M-3B parameters, seq_len 1k-8k, micro-batch 1-16, MHA/GQA, GELU/SwiGLU,
recompute none/selective/full, BF16 (plus a few FP16).

    python benchmarks/gpu/configs.py --gpu h100_sxm5_80gb --out gpu_run/
    python benchmarks/gpu/configs.py --gpu cpu --out /tmp/dry --tiny     # CPU dry run sizes
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from pathlib import Path

# name: (arch, layers, hidden, heads, kv_heads, ffn_hidden) — shapes of public models.
MODELS = {
    "gpt_125m": ("gpt", 12, 768, 12, 12, 3072),        # GPT-3 Small (Brown et al. 2020, Table 2.1)
    "gpt_350m": ("gpt", 24, 1024, 16, 16, 4096),       # GPT-3 Medium
    "gpt_760m": ("gpt", 24, 1536, 16, 16, 6144),       # GPT-3 Large
    "gpt_1_3b": ("gpt", 24, 2048, 32, 32, 8192),       # GPT-3 XL
    "gpt_2_7b": ("gpt", 32, 2560, 32, 32, 10240),      # GPT-3 2.7B
    "llama_1b": ("llama", 16, 2048, 32, 8, 8192),      # Llama 3.2 1B shape
    "llama_3b": ("llama", 28, 3072, 24, 8, 8192),      # Llama 3.2 3B shape
    "llama_mha_1b": ("llama", 16, 2048, 16, 16, 5504), # MHA Llama-style (OpenLLaMA-like ratio)
}
TINY = {  # CPU dry-run stand-ins with the same variety
    "gpt_125m": ("gpt", 2, 128, 4, 4, 512), "gpt_350m": ("gpt", 2, 192, 4, 4, 768),
    "gpt_760m": ("gpt", 3, 128, 4, 4, 512), "gpt_1_3b": ("gpt", 2, 256, 8, 8, 1024),
    "gpt_2_7b": ("gpt", 3, 192, 6, 6, 768), "llama_1b": ("llama", 2, 128, 4, 2, 352),
    "llama_3b": ("llama", 2, 192, 6, 2, 512), "llama_mha_1b": ("llama", 2, 128, 4, 4, 352),
}

# (model, seq_len, micro_batch, recompute, precision): 33 configurations, chosen by hand to
# cover each axis at several sizes rather than a full product (which would not fit 10 minutes).
CONFIGS = [
    *[(m, 1024, mb, "none", "bf16") for m, mb in itertools.product(
        ("gpt_125m", "gpt_350m", "gpt_1_3b", "llama_1b"), (1, 4, 16))],
    *[(m, 2048, mb, rc, "bf16") for m, mb, rc in (
        ("gpt_760m", 4, "none"), ("gpt_760m", 8, "selective"), ("gpt_2_7b", 2, "none"),
        ("gpt_2_7b", 4, "full"), ("llama_3b", 2, "none"), ("llama_3b", 4, "selective"),
        ("llama_mha_1b", 4, "none"), ("llama_mha_1b", 8, "full"), ("gpt_1_3b", 8, "selective"))],
    *[(m, 4096, mb, rc, "bf16") for m, mb, rc in (
        ("gpt_350m", 4, "none"), ("gpt_1_3b", 2, "none"), ("llama_1b", 4, "none"),
        ("llama_3b", 1, "full"), ("llama_mha_1b", 2, "selective"))],
    *[(m, 8192, mb, rc, "bf16") for m, mb, rc in (
        ("gpt_125m", 2, "none"), ("llama_1b", 1, "none"), ("llama_1b", 2, "full"),
        ("gpt_760m", 1, "selective"))],
    *[(m, 2048, mb, "none", "fp16") for m, mb in (("gpt_350m", 8), ("llama_1b", 4), ("gpt_1_3b", 4))],
]

SPEC = """# {name}: single-GPU calibration run (benchmarks/gpu/configs.py)
use "{gpu_file}"
use "links"
node one_gpu {{ gpu = {gpu}  gpus_per_node = 1  intra = {intra}  inter = {intra} }}
cluster single {{ node = one_gpu  nodes = 1 }}
model {model} {{
  arch = {arch}  layers = {layers}  hidden = {hidden}  heads = {heads}  kv_heads = {kv_heads}
  ffn_hidden = {ffn}  vocab = {vocab}  seq_len = {seq}
}}
train {{
  precision = {precision}  optimizer = adamw  micro_batch = {mb}  global_batch = {gb}
  recompute = {recompute}
  parallel {{ tp = 1  pp = 1  dp = 1 }}
}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100_sxm5_80gb", help="catalog gpu id (cpu for a dry run)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tiny", action="store_true", help="CPU dry-run sizes (same variety, tiny shapes)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    models = TINY if args.tiny else MODELS
    device = "cpu" if args.gpu == "cpu" else "cuda"
    intra = "gloo_loopback" if device == "cpu" else "nvlink4"
    (args.out / "specs").mkdir(parents=True, exist_ok=True)
    (args.out / "configs").mkdir(parents=True, exist_ok=True)
    names = []
    for i, (model, seq, mb, recompute, precision) in enumerate(CONFIGS):
        arch, layers, hidden, heads, kv, ffn = models[model]
        if args.tiny:
            seq, mb = min(seq, 256) // 4, min(mb, 4)
            precision = "fp32"
        name = f"c{i:02d}_{model}_s{seq}_mb{mb}_{recompute}_{precision}"
        text = SPEC.format(name=name, gpu_file=args.gpu, gpu=args.gpu, intra=intra, model=model, arch=arch,
                           layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn,
                           vocab=50304 if not args.tiny else 1024, seq=seq, precision=precision, mb=mb,
                           gb=2 * mb, recompute=recompute)
        spec = args.out / "specs" / f"{name}.llmp"
        spec.write_text(text)
        cfg = args.out / "configs" / f"{name}.json"
        subprocess.run([sys.executable, "-m", "llmp.cli", "measure", str(spec), "--device", device,
                        "--steps", str(args.steps), "--warmup", str(args.warmup), "--export", str(cfg)],
                       check=True, stdout=subprocess.DEVNULL)
        names.append(name)
    (args.out / "configs.json").write_text(json.dumps(names, indent=1) + "\n")
    print(f"{len(names)} configurations in {args.out}/specs and {args.out}/configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
