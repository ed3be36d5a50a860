"""``llmp measure``: from a resolved Spec to a reference-model measurement and a CSV row.

This half needs the DSL (a ``Spec``); the torch half (``step``) does not, so a bare GPU
node can run ``python -m llmp.measure.step --config cfg.json`` on a config exported
here with ``llmp measure SPEC --export cfg.json``.

The reference model runs one device, or data parallelism over local processes: a spec with
tensor, pipeline, context or expert parallelism, MoE, FP8 or free symbols is refused with a
message that says which field and why.
"""

from __future__ import annotations

from typing import Any

from llmp.analytic import params
from llmp.errors import SpecError
from llmp.measure.reference import ModelConfig
from llmp.measure.step import MeasureConfig
from llmp.spec.model import Position
from llmp.spec.spec import Precision, Spec


def _int(value: Any, path: str) -> int:
    """A concrete integer field, or a SpecError naming the field."""
    try:
        number = float(value)  # a SymPy expression with free symbols raises TypeError here
    except (TypeError, ValueError):
        raise SpecError(f"{path} = {value} is not a number; llmp measure needs every field concrete",
                        hint=f"give it a value with --set {path}=...") from None
    if number != int(number):
        raise SpecError(f"{path} = {value} must be a whole number for llmp measure")
    return int(number)


def _check(spec: Spec, nproc: int) -> None:
    p, m = spec.parallel, spec.model
    for axis in ("tp", "pp", "cp", "ep", "vp"):
        degree = _int(getattr(p, axis), f"parallel.{axis}")
        if degree != 1:
            raise SpecError(f"parallel.{axis} = {degree}: llmp measure runs one device or data parallelism only",
                            hint=f"use --set parallel.{axis}=1 for a single-device or DP measurement")
    dp = _int(p.dp, "parallel.dp")
    if dp != nproc:
        raise SpecError(f"parallel.dp = {dp} but --nproc {nproc}: the data-parallel degree is the number of local "
                        f"processes llmp measure starts",
                        hint=f"run with --nproc {dp}, or --set parallel.dp={nproc}")
    if m.moe is not None:
        raise SpecError("the reference model has no MoE layers; llmp measure supports dense models only")
    if m.mla is not None or m.window != 0 or m.mtp_layers != 0:
        raise SpecError("the reference model has standard full attention and no multi-token prediction; "
                        "llmp measure does not run mla, window or mtp_layers",
                        hint="remove the mla block and set window = 0, mtp_layers = 0")
    if spec.train.precision is Precision.FP8:
        raise SpecError("precision = fp8 is not supported by the reference model", hint="use bf16, fp16 or fp32")
    if m.position is Position.ALIBI:
        raise SpecError("position = alibi is not supported by the reference model",
                        hint="use learned, rotary or none")
    if spec.train.finetune is not None:
        raise SpecError("the reference step trains every weight on whole sequences; llmp measure does not run a "
                        "train.finetune step (LoRA adapters, packed samples)",
                        hint="remove the finetune block to measure the pre-training step")


def config_from_spec(spec: Spec, *, device: str = "cpu", steps: int = 5, warmup: int = 2, nproc: int = 1,
                     threads: int = 1, seed: int = 0) -> MeasureConfig:
    """The measurement a spec describes (checked: see the module docstring)."""
    _check(spec, nproc)
    m, t, p = spec.model, spec.train, spec.parallel
    micro = _int(t.micro_batch, "train.micro_batch")
    global_batch = _int(t.global_batch, "train.global_batch")
    if global_batch % (micro * nproc):
        raise SpecError(f"train.global_batch ({global_batch}) is not divisible by micro_batch ({micro}) x dp ({nproc})")
    model = ModelConfig(
        name=m.name, layers=_int(m.layers, "model.layers"), hidden=_int(m.hidden, "model.hidden"),
        heads=_int(m.heads, "model.heads"), kv_heads=_int(m.kv_heads, "model.kv_heads"),
        head_dim=_int(m.head_dim, "model.head_dim"), ffn_hidden=_int(m.ffn_hidden, "model.ffn_hidden"),
        vocab=_int(m.vocab, "model.vocab"), seq_len=_int(m.seq_len, "model.seq_len"), norm=str(m.norm),
        activation=str(m.activation), position=str(m.position), tied_embeddings=bool(m.tied_embeddings),
        bias=bool(m.bias), dropout=float(m.dropout), precision=str(t.precision), optimizer=str(t.optimizer),
        micro_batch=micro, microbatches=global_batch // (micro * nproc), recompute=str(t.recompute), dp=nproc,
        dp_bucket_bytes=float(p.dp_bucket_size))
    precision = str(t.precision)
    row = {"source": "llmp measure", "source_ref": spec.source, "model_name": m.name,
           "params_b": f"{float(params.count(m)) / 1e9:.6g}", "layers": model.layers, "hidden": model.hidden,
           "heads": model.heads, "kv_heads": model.kv_heads, "ffn_hidden": model.ffn_hidden, "vocab": model.vocab,
           "seq_len": model.seq_len, "gpu_id": spec.cluster.gpu.id, "num_gpus": nproc, "gpus_per_node": nproc,
           "tp": 1, "pp": 1, "dp": nproc, "cp": 1, "ep": 1, "vp": 1, "micro_batch": micro,
           "global_batch": global_batch, "sequence_parallel": "false", "recompute": str(t.recompute),
           "zero_stage_or_fsdp": str(p.zero), "precision": precision,
           "dtype": precision if precision in ("bf16", "fp16") else ""}
    return MeasureConfig(model=model, device=device, steps=steps, warmup=warmup, threads=threads, seed=seed, row=row)
