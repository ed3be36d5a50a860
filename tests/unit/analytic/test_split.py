"""Pipeline splits: layers per stage and chunk as Megatron-LM and DeepSpeed compute them."""

from __future__ import annotations

import dataclasses
import re

import pytest
from analytic_helpers import split_spec as _spec
from strategies_analytic import gpt, llama

from llmp.analytic.deepspeed_partition import _bisection, uniform
from llmp.analytic.split import SplitError, megatron_layout, recipe_split, split
from llmp.spec.spec import PipeModule, Stack


def test_megatron_first_and_last_stage_layers():
    # Megatron-Core get_num_layers_to_build: the named stages get their counts, the rest share
    assert split(_spec(30, 4, first_stage_layers=6, last_stage_layers=8)).stages(4) == (6, 8, 8, 8)
    assert split(_spec(30, 4, last_stage_layers=6)).stages(4) == (8, 8, 8, 6)
    # each stage's count is split equally over its vp chunks (model order: chunk g on rank g % pp)
    assert split(_spec(28, 4, 2, first_stage_layers=4, last_stage_layers=8)).chunks == (2, 4, 4, 4, 2, 4, 4, 4)


def test_llama3_405b_on_pp16_vp8_sheds_a_layer_on_the_first_and_last_stage():
    # Megatron --account-for-embedding/loss-in-pipeline-split: (126 + 2) / 128 = 1 per chunk, the
    # first chunk keeps only the embedding and the last only the loss (Llama 3 paper §3.3.2).
    s = split(_spec(126, 16, 8, account_for_embedding=True, account_for_loss=True))
    assert s.chunks[0] == s.chunks[-1] == 0 and set(s.chunks[1:-1]) == {1}
    assert s.stages(16) == (7,) + (8,) * 14 + (7,)


def test_gpt_neox_default_split_is_the_one_the_seed_used():
    # GPT-NeoX pipe_partition_method "type:transformer|mlp" on DeeperSpeed also counts its
    # _pre/_post_transformer_block functions: Llemma 7B (32 layers) on pp 4 is 8, 9, 9, 6 layers,
    # the seed's pp_partitions (data/seed-estimate-train-time/README.md §7.1).
    spec = _spec(32, 4, partition="type:transformer|mlp", pipe_module=PipeModule.GPT_NEOX)
    assert split(spec).stages(4) == (8, 9, 9, 6)


def test_bloom_balances_its_two_tied_embeddings_as_layers():
    # bigscience tr11-176B-ml README: "pp rank 0: [embed | 5 transformer blocks]", 6 in between.
    bloom = gpt(layers=70, hidden=14336, heads=112, vocab=250880)
    spec = _spec(70, 12, model=bloom, partition="type:transformer|embedding",
                 pipe_module=PipeModule.MEGATRON_DEEPSPEED)
    assert split(spec).stages(12) == (5,) + (6,) * 10 + (5,)


def test_parameters_balance_counts_the_embedding_and_head_as_layers_with_parameters():
    # A vocabulary as large as a few layers pushes layers off the first and last stages.
    model = llama(layers=16, hidden=1024, heads=8, kv_heads=8, ffn=2816, vocab=256000, seq_len=1024)
    stages = split(_spec(16, 4, model=model, partition="parameters")).stages(4)
    assert sum(stages) == 16 and stages[0] < stages[1] and stages[-1] < stages[1]


@pytest.mark.parametrize("module,expected", [
    (PipeModule.GPT_NEOX, [0, 3, 6, 10]),            # DeeperSpeed: the remainder on the last part
    (PipeModule.MEGATRON_DEEPSPEED, [0, 4, 7, 10]),  # DeepSpeed: the first parts one extra each
])
def test_uniform_partition_of_each_deepspeed(module, expected):
    assert uniform(10, 3, module) == expected


def test_deeperspeed_leaves_the_first_part_empty_when_its_first_item_is_heavier_than_the_bottleneck():
    # _lprobe's bisect finds no end for part 1 below the first item and wraps to the last prefix:
    # a first item (say a huge embedding) heavier than total / parts ends up alone in part 2.
    assert _bisection((2, 0, 1), 2) == [0, 0, 3]


def test_layers_that_do_not_divide_name_the_ways_to_split_them():
    with pytest.raises(SplitError, match=r"model.layers\(44\) % \(pp\(8\) \* vp\(1\)\) = 4") as err:
        split(_spec(44, 8))
    assert "first_stage_layers" in err.value.hint and "partition" in err.value.hint
    assert "account_for_embedding" in err.value.hint and "stage_layers" in err.value.hint


# ---- Megatron-Core layout strings and each stack's own rule for layers that do not divide -----------

def _stacked(spec, stack):
    return dataclasses.replace(spec, train=dataclasses.replace(spec.train, stack=stack))


@pytest.mark.parametrize("text, layers, pp, vp, mtp, chunks", [
    # Megatron-Bridge's DeepSeek-V3 layouts (NVIDIA-NeMo/Megatron-Bridge recipes/deepseek/deepseek_v3.py and the
    # H100 performance config): 61 layers and one MTP module.
    ("Et|(tt|)*30mL", 61, 8, 4, 1, (1,) + (2,) * 30 + (0,)),
    ("Et*4|(t*4|)*14tmL", 61, 8, 2, 1, (4,) * 15 + (1,)),
    ("Et*8|(t*8|)*6t*5mL", 61, 8, 1, 1, (8,) * 7 + (5,)),
    ("Et*16|t*16|t*16|t*13mL", 61, 4, 1, 1, (16, 16, 16, 13)),
    ("Ettt|tt,tt|(t|)*2tL", 10, 5, 1, 0, (3, 4, 1, 1, 1)),  # commas are cosmetic
])
def test_megatron_layout_strings_unroll_as_megatron_parses_them(text, layers, pp, vp, mtp, chunks):
    assert megatron_layout(text, layers, pp, vp, mtp) == chunks


@pytest.mark.parametrize("text, mtp, message", [
    ("Et|tt|tt|tL", 0, "places 6 transformer layers, not model.layers(7)"),
    ("tE|tt|tt|ttL", 0, "the embedding E must open the first stage"),
    ("Et|tt|ttL|tt", 0, "the loss L must close the last stage"),
    ("Et|tt|tt|ttx", 0, "unknown layer character 'x'"),
    ("Et|tt|tt|tt|L", 0, "has 5 stages; pp(4) * vp(1) = 4"),
    ("Et|tt|ttm|ttL", 1, "llmp runs the MTP modules on the last stage"),
    ("Et|tt|tt|ttL", 1, "places 0 MTP modules; model.mtp_layers is 1"),
])
def test_a_layout_megatron_or_llmp_cannot_run_is_refused_at_its_field(text, mtp, message):
    with pytest.raises(SplitError, match=re.escape(message)) as err:
        megatron_layout(text, 7, 4, 1, mtp)
    assert err.value.path == "parallel.pipeline_layout"


def test_a_layout_is_the_split_and_excludes_the_other_ways():
    spec = _spec(7, 4, pipeline_layout="Et|tt|tt|ttL")
    assert split(spec).chunks == (1, 2, 2, 2)
    with pytest.raises(SplitError, match="pipeline_layout gives the split; drop account_for_loss"):
        split(_spec(7, 4, pipeline_layout="Et|tt|tt|ttL", account_for_loss=True))


@pytest.mark.parametrize("stack, layers, pp, vp, chunks", [
    # NeMo AutoModel: the first layers % chunks stages one more (generate_hf_model_fqn_per_model_part)
    (Stack.NEMO_AUTOMODEL, 30, 4, 1, (8, 8, 7, 7)),
    (Stack.NEMO_AUTOMODEL, 61, 4, 8, (2,) * 29 + (1,) * 3),
    # torchtitan: the first stage layers // stages, the middle ones one more while the remainder
    # lasts, the last the rest (generate_split_points)
    (Stack.TORCHTITAN, 30, 4, 1, (7, 8, 8, 7)),
    (Stack.TORCHTITAN, 11, 4, 1, (2, 3, 3, 3)),
    (Stack.TORCHTITAN, 32, 4, 1, (8, 8, 8, 8)),
])
def test_stacks_that_split_any_layer_count_do_so_by_their_own_rule(stack, layers, pp, vp, chunks):
    assert split(_stacked(_spec(layers, pp, vp), stack)).chunks == chunks


@pytest.mark.parametrize("stack", [Stack.MEGATRON_CORE, Stack.NEMO, Stack.MEGATRON_LM])
def test_megatron_stacks_refuse_layers_that_do_not_divide_citing_their_code(stack):
    with pytest.raises(SplitError, match=f"stack {stack} refuses them too: NVIDIA/Megatron-LM") as err:
        split(_stacked(_spec(44, 8), stack))
    assert "pipeline_layout" in err.value.hint


@pytest.mark.parametrize("layers, pp, vp, mtp, fields, chunks", [
    # 126 + 2 on pp 16: the Llama 3.1 405B recipe's accounting, 7 / 8 x 14 / 7
    (126, 16, 1, 0, (("account_for_embedding", True), ("account_for_loss", True)), (7,) + (8,) * 14 + (7,)),
    # 44 + 2 do not divide 8: the accounting spread, the spare layers after the first chunk
    (44, 8, 1, 0, (("pipeline_layout", "Et*4|t*6|t*6|t*6|t*6|t*6|t*6|t*4L"),), (4,) + (6,) * 6 + (4,)),
    # DeepSeek-V3 on pp 8 x vp 4: the spread accounting (the MTP module one layer) is the very layout
    # Megatron-Bridge's H100 recipe writes by hand, "Et|(tt|)*30mL"
    (61, 8, 4, 1, (("pipeline_layout", "Et|" + "tt|" * 30 + "mL"),), (1,) + (2,) * 30 + (0,)),
])
def test_what_a_megatron_recipe_does_with_layers_that_do_not_divide(layers, pp, vp, mtp, fields, chunks):
    recipe = recipe_split(layers, pp, vp, mtp)
    assert recipe is not None and recipe.fields == fields and "Megatron-Bridge" in recipe.why
    spec = _spec(layers, pp, vp, **dict(fields))
    spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, mtp_layers=mtp))
    assert split(spec).chunks == chunks
