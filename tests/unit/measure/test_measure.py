"""llmp measure's core: the reference GPT/Llama train for real, and specs map to them faithfully."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from llmp.analytic import params
from llmp.errors import SpecError
from llmp.measure import from_spec, reference, step
from llmp.spec.spec import FinetuneMethod, FinetuneSpec


def test_reference_parameter_count_matches_the_analytic_count(gpt_spec, llama_spec):
    for spec in (gpt_spec, llama_spec):
        cfg = from_spec.config_from_spec(spec)
        model = reference.Transformer(cfg.model)
        assert reference.parameter_count(model) == int(params.count(spec.model))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_one_step_updates_every_parameter(gpt_spec, precision):
    cfg = from_spec.config_from_spec(gpt_spec)
    m = dataclasses.replace(cfg.model, precision=precision, dropout=0.1, recompute="selective")
    run = step.trainer(dataclasses.replace(cfg, model=m), torch.device("cpu"))
    before = run.optimizer.master.clone()
    run.step(0)
    for p in run.model.parameters():  # gradients reached every tensor (through the flat buffer)
        assert p.grad is not None and torch.count_nonzero(p.grad) > 0
    moved = (run.optimizer.master != before).float().mean().item()
    assert moved > 0.95  # (FP32 master) weights moved; bf16 may flush a few tiny grads to zero
    if precision == "bf16":  # the bf16 model copy follows the master
        assert torch.equal(run.optimizer.params, run.optimizer.master.to(torch.bfloat16))
    assert all(p.dtype == run.optimizer.params.dtype for p in run.model.parameters())


@pytest.mark.parametrize("which", ["gpt_spec", "llama_spec"])
def test_measure_reports_a_median_step_and_a_csv_row(which, request, tmp_path):
    spec = request.getfixturevalue(which)
    cfg = from_spec.config_from_spec(spec, steps=2, warmup=1)
    result = step.measure(cfg)
    assert result.median_s > 0 and len(result.step_times_s) == 2
    out = tmp_path / "m.csv"
    step.append_csv(out, step.csv_row(cfg, result))
    import csv

    rows = list(csv.DictReader(out.open()))
    assert tuple(rows[0]) == step.CSV_COLUMNS
    row = rows[0]
    assert row["metric_name"] == "iteration_time_s" and float(row["metric_value"]) == pytest.approx(result.median_s,
                                                                                                 rel=1e-5)
    assert row["gpu_id"] == "cpu" and row["model_name"] == spec.model.name
    assert "threads 1" in row["notes"] and "torch" in row["notes"]


def test_config_round_trips_through_json(llama_spec):
    cfg = from_spec.config_from_spec(llama_spec)
    assert step.MeasureConfig.from_json(cfg.to_json()) == cfg
    m = cfg.model
    assert (m.norm, m.activation, m.position, m.tied_embeddings, m.bias) == ("rmsnorm", "swiglu", "rotary", False,
                                                                             False)
    assert m.kv_heads == 2 and m.microbatches == 2 and m.recompute == "full"


def test_specs_the_reference_cannot_run_are_refused(gpt_spec):
    with pytest.raises(SpecError, match=r"parallel\.dp = 1 but --nproc 2"):
        from_spec.config_from_spec(gpt_spec, nproc=2)
    tp = dataclasses.replace(gpt_spec, parallel=dataclasses.replace(gpt_spec.parallel, tp=2))
    with pytest.raises(SpecError, match=r"parallel\.tp = 2"):
        from_spec.config_from_spec(tp)
    windowed = dataclasses.replace(gpt_spec, model=dataclasses.replace(gpt_spec.model, window=16))
    with pytest.raises(SpecError, match="does not run mla, window or mtp_layers"):
        from_spec.config_from_spec(windowed)


def test_a_fine_tuning_spec_is_refused(gpt_spec):
    lora = dataclasses.replace(gpt_spec, train=dataclasses.replace(
        gpt_spec.train, finetune=FinetuneSpec(method=FinetuneMethod.LORA)))
    with pytest.raises(SpecError, match=r"does not run a train\.finetune step"):
        from_spec.config_from_spec(lora)
