"""Time Calculon (calculon-ai/calculon) on one training configuration given by speed.py.

Runs inside the peers' venv (benchmarks/peers/setup.sh), never inside llmp's environment:

    .peers-venv/bin/python benchmarks/peers/calculon_driver.py '<config json>' [--repeat N]

The config is the layout speed.py read from an example ``.llmp`` file. The driver builds the same
run with Calculon's own API, the way its ``calculon llm`` command does (calculon/llm/runner.py):
``Llm.Application`` (model shape), ``Llm.Execution.from_json`` (layout), ``System`` from the
system file Calculon ships for that GPU (``systems/h100_80g_nvl8.json``, ``systems/a100_80g.json``,
as in ../shared/data/peers/README.md), then ``Llm(app, log).compile(system, exe)``, ``run(system)``
and ``get_total_time()``. It prints one JSON line: the predicted step time, the median wall time
of ``--repeat`` warm calls after one warm-up call (``--repeat 0``: one call, for the cold-start
measurement), every way Calculon's configuration differs from the spec (``deviations``), or why
it cannot express it (``unsupported``: grouped-query attention, gated MLPs, MoE, weight sharding).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from pathlib import Path

import calculon
from calculon.llm import Llm

VERSION = "Calculon caa4b11"
# llmp catalog device id -> the system file Calculon ships (repository root, systems/).
SYSTEMS = {"h100_sxm5_80gb": "h100_80g_nvl8.json", "a100_sxm4_80gb": "a100_80g.json"}
# The system files list float16 and float8 rates; bf16 is the same 2-byte type at the same rate.
DATATYPES = {"fp16": "float16", "bf16": "float16", "fp8": "float8"}
RECOMPUTE = {"none": "none", "selective": "attn_only", "full": "full"}


def system_file(name: str) -> Path:
    """The shipped system file: setup.sh installs Calculon editable, so its checkout is beside the package."""
    path = Path(calculon.__file__).resolve().parents[1] / "systems" / name
    if not path.exists():
        raise ValueError(f"system file {path} not found (install Calculon from a checkout: benchmarks/peers/setup.sh)")
    return path


def tiers(sizes: list[int], dims: list[int]) -> list[int]:
    """Network tier of each parallel dimension, innermost first (tp, pp, dp as Megatron orders ranks):
    the fastest tier whose size holds every rank up to and including that dimension's span."""
    out, span = [], 1
    for d in dims:
        span *= d
        out.append(next((i for i, s in enumerate(sizes) if span <= s), len(sizes) - 1))
    return out


def build(cfg: dict) -> tuple[dict, list[str]]:
    """Calculon's application, execution and system JSON for ``cfg`` and how they differ from it."""
    if cfg["moe"]:
        raise ValueError("mixture-of-experts layers are not modelled")
    if cfg["kv_heads"] not in (cfg["heads"], 1):
        raise ValueError(f"grouped-query attention ({cfg['heads']} heads, {cfg['kv_heads']} KV heads): "
                         "attention_type is multihead or multiquery only")
    if cfg["gated_mlp"]:
        raise ValueError("gated (SwiGLU) MLP: Calculon's MLP has two matrices")
    if cfg["zero"] not in ("none", "1"):
        raise ValueError(f"ZeRO/FSDP mode {cfg['zero']}: only optimizer sharding is modelled")
    if cfg["gpu"] not in SYSTEMS:
        raise ValueError(f"no shipped system file for {cfg['gpu']}")
    deviations = []
    dp = cfg["dp"]
    if cfg["cp"] > 1:
        # No context parallelism: keep the GPU count and the tokens per GPU by folding cp into dp.
        dp *= cfg["cp"]
        deviations.append(f"no context parallelism: cp {cfg['cp']} folded into dp ({dp})")
    if cfg["flash_attention"]:
        deviations.append("no FlashAttention: attention scores go through memory")
    if cfg["precision"] == "bf16":
        deviations.append("bf16 run as float16 (same size and rate)")
    deviations.append("embedding and output layer not modelled")
    system = json.loads(system_file(SYSTEMS[cfg["gpu"]]).read_text())
    tp_net, pp_net, dp_net = tiers([n["size"] for n in system["networks"]], [cfg["tp"], cfg["pp"], dp])
    app = {"hidden": cfg["hidden"], "feedforward": cfg["ffn_hidden"], "seq_size": cfg["seq_len"],
           "attn_heads": cfg["heads"], "attn_size": cfg["head_dim"], "num_blocks": cfg["layers"]}
    exe = {
        "num_procs": cfg["tp"] * cfg["pp"] * dp, "tensor_par": cfg["tp"], "pipeline_par": cfg["pp"], "data_par": dp,
        "tensor_par_net": tp_net, "pipeline_par_net": pp_net, "data_par_net": dp_net,
        "batch_size": cfg["global_batch"], "microbatch_size": cfg["micro_batch"],
        "datatype": DATATYPES[cfg["precision"]], "fused_activation": True,
        "attention_type": "multiquery" if cfg["kv_heads"] == 1 < cfg["heads"] else "multihead",
        "activation_recompute": RECOMPUTE[cfg["recompute"]], "pipeline_interleaving": cfg["vp"],
        "optimizer_sharding": cfg["zero"] == "1",
        "tensor_par_comm_type": "rs_ag" if cfg["sequence_parallel"] else "ar",
        "tensor_par_overlap": "none", "seq_par_ag_redo": False,
        "data_par_overlap": cfg["dp_overlap"] and dp > 1,
        "weight_offload": False, "activations_offload": False, "optimizer_offload": False, "training": True,
    }
    return {"app": app, "exe": exe, "system": system}, deviations


def predict(inputs: dict, log: logging.Logger) -> float:
    """One warm call, as ``calculon llm`` makes it: the step time in seconds."""
    system = calculon.System(inputs["system"])
    model = Llm(Llm.Application(inputs["app"]), log)
    model.compile(system, Llm.Execution.from_json(inputs["exe"]))
    model.run(system)
    return model.get_total_time()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="JSON layout written by benchmarks/speed.py")
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    log = logging.getLogger("calculon")
    log.setLevel(logging.WARNING)
    cfg = json.loads(args.config)
    out = {"peer": VERSION, "config": cfg["name"]}
    try:
        inputs, out["deviations"] = build(cfg)
        out["step_s"] = predict(inputs, log)
    except (ValueError, Llm.Error) as exc:
        print(json.dumps({**out, "unsupported": str(exc)}))
        return
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        predict(inputs, log)
        times.append(time.perf_counter() - t)
    out["warm_s"] = statistics.median(times) if times else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
