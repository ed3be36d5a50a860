"""The layout fields: stage_layers lists, Megatron and DeepSpeed split options, nvlink_domain."""

from __future__ import annotations

import pytest
from test_resolve import debug, error

from llmp.spec.spec import PipeModule

PP = ("    pp = 2", "    pp = 2  ")


def test_stage_layers_is_a_list_value_not_a_sweep():
    spec = debug(("layers = 8", "layers = 7"), (PP[0], PP[1] + "stage_layers = [3, 4]"))
    assert spec.parallel.stage_layers == (3, 4) and spec.sweeps == ()
    assert debug(overrides=("parallel.stage_layers=[5, 3]",)).parallel.stage_layers == (5, 3)


def test_stage_layers_entries_may_be_expressions_and_zero():
    spec = debug(("layers = 8", "layers = 8"), (PP[0], PP[1] + "stage_layers = [0, 2 * 4]"))
    assert spec.parallel.stage_layers == (0, 8)


@pytest.mark.parametrize("value,label,message", [
    ("3", "wrong type", "parallel.stage_layers expects a list of whole numbers in brackets, e.g. [9, 12, 12, 11]"),
    ("[3, -5]", "bad value", "parallel.stage_layers must be zero or more, got -5"),
    ("[3.5, 4.5]", "not a whole number", "parallel.stage_layers must be a whole number, got 7/2 (= 3.5)"),
    ("[3 GB, 5]", "wrong unit", "parallel.stage_layers expects a plain number (e.g. 4096), got a size 3 GB"),
    ("symbol", "bad symbol", "parallel.stage_layers cannot be a symbol: only numeric fields can be left free"),
])
def test_bad_stage_layers_are_located_errors(value, label, message):
    err = error((PP[0], PP[1] + f"stage_layers = {value}"))
    assert (err.label, err.message) == (label, message)
    assert err.span is not None and err.span.line == 48


def test_a_list_cannot_be_used_in_an_expression():
    err = error((PP[0], PP[1] + "stage_layers = [4, 4]  first_stage_layers = stage_layers"))
    assert (err.label, err.message) == ("wrong type", "parallel.stage_layers is a list, not a value")


def test_split_options_parse_with_their_defaults():
    p = debug().parallel
    assert (p.first_stage_layers, p.last_stage_layers, p.account_for_embedding, p.account_for_loss,
            p.partition, p.pipe_module) == (None, None, False, False, "", PipeModule.GPT_NEOX)
    p = debug((PP[0], PP[1] + 'partition = "parameters"  pipe_module = megatron_deepspeed')).parallel
    assert (p.partition, p.pipe_module) == ("parameters", PipeModule.MEGATRON_DEEPSPEED)
    err = error((PP[0], PP[1] + "pipe_module = neox"))
    assert err.label == "unknown value" and "gpt_neox" in err.message


def test_nvlink_domain_defaults_to_the_node_and_may_span_nodes():
    assert debug().cluster.node.nvlink_domain == 4
    spec = debug(("  gpus_per_node = 4", "  gpus_per_node = 4  nvlink_domain = 8"),
                 ("    tp = 2", "    tp = 8"), (PP[0], "    pp = 1"))
    assert spec.cluster.node.domain == 8 and spec.parallel.tp == 8


def test_tensor_parallelism_across_nodes_resolves():
    spec = debug(("    tp = 2", "    tp = 8"), (PP[0], "    pp = 1"))
    assert spec.parallel.tp == 8 > spec.cluster.node.gpus_per_node
