"""Time llm-analysis (PyPI ``llm-analysis``) on one training configuration given by speed.py.

Runs inside the peers' venv (benchmarks/peers/setup.sh), never inside llmp's environment:

    .peers-venv/bin/python benchmarks/peers/llm_analysis_driver.py '<config json>' [--repeat N]

The config is the layout speed.py read from an example ``.llmp`` file (model shape, GPU,
tp/pp/cp/dp/vp, batch sizes, precision, recompute, ZeRO). The driver builds the same thing with
llm-analysis's own API (``ModelConfig``, ``GPUConfig`` from its shipped ``gpu_configs``,
``ParallelismConfig``, ``LLMAnalysis.training``) with its shipped defaults
(``flops_efficiency = hbm_memory_efficiency = 1``, as in ../shared/data/peers/README.md), and
prints one JSON line: the predicted step time, the median wall time of ``--repeat`` warm calls
after one warm-up call (``--repeat 0``: one call, for the cold-start measurement), and every way
the peer's configuration differs from the spec (``deviations``) or why it cannot express it at
all (``unsupported``).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time

from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
from llm_analysis.config import (
    ModelConfig,
    ParallelismConfig,
    get_dtype_config_by_name,
    get_gpu_config_by_name,
)
from llm_analysis.logger import logger

VERSION = "llm-analysis 0.2.2"
# llmp catalog device id -> llm-analysis's shipped gpu_configs/*.json name.
GPUS = {"h100_sxm5_80gb": "h100-sxm-80gb", "a100_sxm4_80gb": "a100-sxm-80gb"}
# llmp's parallel.zero -> DeepSpeed ZeRO stage (llmp models FSDP FULL_SHARD as ZeRO-3's traffic and memory).
ZERO = {"none": DSZeRO.NONE, "1": DSZeRO.STAGE_1, "2": DSZeRO.STAGE_2, "3": DSZeRO.STAGE_3, "fsdp": DSZeRO.STAGE_3}
RECOMPUTE = {"none": ActivationRecomputation.NONE, "selective": ActivationRecomputation.SELECTIVE,
             "full": ActivationRecomputation.FULL}


def build(cfg: dict) -> tuple[dict, list[str]]:
    """The llm-analysis inputs for ``cfg`` and the ways they differ from it; ValueError if it cannot."""
    if cfg["gpu"] not in GPUS:
        raise ValueError(f"no shipped gpu_config for {cfg['gpu']}")
    if cfg["precision"] not in ("bf16", "fp16"):
        raise ValueError(f"{cfg['precision']} training is not modelled (16-bit dtype configs only)")
    if cfg["moe"]:
        raise ValueError("mixture-of-experts layouts are not expressible here")
    deviations = []
    dp = cfg["dp"]
    if cfg["cp"] > 1:
        # No context parallelism: keep the GPU count and the tokens per GPU by folding cp into dp.
        dp *= cfg["cp"]
        deviations.append(f"no context parallelism: cp {cfg['cp']} folded into dp ({dp})")
    if cfg["vp"] > 1:
        deviations.append(f"no interleaved schedule: vp {cfg['vp']} ignored (and no pipeline bubble at all)")
    model = ModelConfig(
        name=cfg["name"], num_layers=cfg["layers"], n_head=cfg["heads"], hidden_dim=cfg["hidden"],
        vocab_size=cfg["vocab"], max_seq_len=cfg["seq_len"], num_key_value_heads=cfg["kv_heads"],
        # Both given: with ffn_embed_dim alone it asserts ffn % hidden == 0 (Llama 3's 14336 / 4096 is 3.5).
        ffn_embed_dim=cfg["ffn_hidden"], expansion_ratio=cfg["ffn_hidden"] / cfg["hidden"])
    analysis_args = {
        "model_config": model,
        "gpu_config": get_gpu_config_by_name(GPUS[cfg["gpu"]]),
        "dtype_config": get_dtype_config_by_name("w16a16e16"),  # 16-bit weights, activations, embeddings
        "parallelism_config": ParallelismConfig(tp_size=cfg["tp"], pp_size=cfg["pp"], dp_size=dp,
                                                sp_size=cfg["tp"] if cfg["sequence_parallel"] else 1),
    }
    training_args = {
        "batch_size_per_gpu": cfg["micro_batch"], "global_batch_size": cfg["global_batch"],
        "seq_len": cfg["seq_len"], "activation_recomputation": RECOMPUTE[cfg["recompute"]],
        "ds_zero": ZERO[cfg["zero"]], "flash_attn": cfg["flash_attention"],
        "mlp_gated_linear_units": cfg["gated_mlp"],
    }
    return {"analysis": analysis_args, "training": training_args}, deviations


def predict(args: dict) -> float:
    """One warm call: construct the analysis and run its training estimate; the step time in seconds."""
    summary = LLMAnalysis(**args["analysis"]).training(**args["training"])
    return summary["latency_per_iter"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="JSON layout written by benchmarks/speed.py")
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    logger.setLevel(logging.ERROR)  # its INFO log prints the whole analysis on every call
    cfg = json.loads(args.config)
    out = {"peer": VERSION, "config": cfg["name"]}
    try:
        inputs, out["deviations"] = build(cfg)
    except ValueError as exc:
        print(json.dumps({**out, "unsupported": str(exc)}))
        return
    out["step_s"] = predict(inputs)
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        predict(inputs)
        times.append(time.perf_counter() - t)
    out["warm_s"] = statistics.median(times) if times else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
