"""``llmp import-hf``: Hugging Face configs (typed from the public files) → .llmp model blocks.

Each imported model is resolved through the real DSL inside a small spec and its parameter
count compared with the published one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmp.analytic import params
from llmp.cli import main
from llmp.dsl import load
from llmp.dsl.hf import FAMILIES, to_llmp

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "attention_bias": False,
             "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
             "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32,
             "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
             "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
             "vocab_size": 128256}
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "hidden_act": "silu",
                "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
                "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
                "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
                "rms_norm_eps": 1e-05, "rope_theta": 1e6, "sliding_window": None,
                "tie_word_embeddings": False, "vocab_size": 32000,
                "_name_or_path": "mistralai/Mixtral-8x7B-v0.1"}
GPT2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "embd_pdrop": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "gpt2",
        "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": None, "n_layer": 12,
        "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257}
QWEN2_7B = {"architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 3584,
            "intermediate_size": 18944, "max_position_embeddings": 131072, "model_type": "qwen2",
            "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
            "rms_norm_eps": 1e-06, "rope_theta": 1e6, "sliding_window": 131072,
            "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 152064}
NEOX_20B = {"architectures": ["GPTNeoXForCausalLM"], "hidden_act": "gelu_fast",
            "hidden_size": 6144, "intermediate_size": 24576, "max_position_embeddings": 2048,
            "model_type": "gpt_neox", "num_attention_heads": 64, "num_hidden_layers": 44,
            "rotary_pct": 0.25, "tie_word_embeddings": False, "use_parallel_residual": True,
            "vocab_size": 50432}
QWEN15_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
              "max_position_embeddings": 8192, "moe_intermediate_size": 1408,
              "num_attention_heads": 16, "num_experts": 60, "num_experts_per_tok": 4,
              "num_hidden_layers": 24, "num_key_value_heads": 16,
              "shared_expert_intermediate_size": 5632, "tie_word_embeddings": False,
              "vocab_size": 151936, "decoder_sparse_step": 1, "mlp_only_layers": []}
QWEN3_8B = {"model_type": "qwen3", "hidden_size": 4096, "head_dim": 128,
            "intermediate_size": 12288, "max_position_embeddings": 40960,
            "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
            "tie_word_embeddings": False, "vocab_size": 151936}

WRAPPER = """use "model.llmp"
use "dgx_h100"
cluster c {{ node = dgx_h100 }}
train {{ global_batch = {batch} }}
"""


def resolve(tmp_path: Path, config: dict[str, Any], *extra: str) -> Any:
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["import-hf", str(tmp_path / "config.json"), "-o", str(tmp_path / "model.llmp"),
                 *extra]) == 0
    (tmp_path / "spec.llmp").write_text(WRAPPER.format(batch=8))
    return load(tmp_path / "spec.llmp")


@pytest.mark.parametrize("config,total,active", [
    (LLAMA3_8B, 8_030_261_248, None),
    (MIXTRAL_8X7B, 46_702_792_704, 12_879_925_248),
    (GPT2, 124_439_808, None),
    (NEOX_20B, 20_554_567_680, None),
    # published 7,615,616,512 includes 28 x 4608 QKV bias weights llmp does not model
    (QWEN2_7B, 7_615_616_512 - 28 * (3584 + 2 * 512), None),
], ids=["llama3-8b", "mixtral-8x7b", "gpt2", "gpt-neox-20b", "qwen2-7b"])
def test_imported_models_have_the_published_size(tmp_path: Path, config: dict[str, Any],
                                                  total: int, active: int | None) -> None:
    model = resolve(tmp_path, config).model
    assert params.count(model) == total
    if active is not None:
        assert params.active(model) == active


def test_llama_fields(tmp_path: Path) -> None:
    m = resolve(tmp_path, LLAMA3_8B, "--seq-len", "4096", "--name", "llama3_8b").model
    assert (m.name, m.arch.value, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim,
            m.ffn_hidden, m.vocab, m.seq_len, m.tied_embeddings, m.bias) == (
        "llama3_8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 4096, False, False)


def test_gpt2_fields(tmp_path: Path) -> None:
    m = resolve(tmp_path, GPT2).model
    assert (m.arch.value, m.ffn_hidden, m.seq_len, m.tied_embeddings, m.dropout,
            m.position.value) == ("gpt", 3072, 1024, True, 0.1, "learned")


def test_neox_is_gpt_with_rotary_and_untied(tmp_path: Path) -> None:
    m = resolve(tmp_path, NEOX_20B).model
    assert (m.position.value, m.tied_embeddings, m.bias) == ("rotary", False, True)
    assert "rotary_pct = 0.25" in (tmp_path / "model.llmp").read_text()


def test_explicit_head_dim_is_kept(tmp_path: Path) -> None:
    m = resolve(tmp_path, {**QWEN3_8B, "hidden_size": 1024, "num_attention_heads": 16,
                           "num_key_value_heads": 8}).model
    assert (m.hidden, m.heads, m.head_dim) == (1024, 16, 128)  # Qwen3-0.6B: not hidden/heads


def test_shared_expert_becomes_shared_experts(tmp_path: Path) -> None:
    m = resolve(tmp_path, QWEN15_MOE).model
    assert m.moe is not None
    assert (m.moe.experts, m.moe.top_k, m.moe.expert_ffn_hidden, m.moe.shared_experts) == (
        60, 4, 1408, 4)
    text = (tmp_path / "model.llmp").read_text()
    assert "shared expert of width 5632 is written as 4 shared experts" in text


def test_names_come_from_the_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL_8X7B))
    assert main(["import-hf", str(path)]) == 0
    out = capsys.readouterr().out
    assert "model mixtral_8x7b_v0_1 {" in out
    assert "  moe { experts = 8  top_k = 2  expert_ffn_hidden = 14336 }" in out
    assert to_llmp({**GPT2}, name="gpt2").startswith("# Imported by `llmp import-hf`")


@pytest.mark.parametrize("content,fragment", [
    ('{"model_type": "bert", "hidden_size": 768}', "unsupported model type: 'bert'"),
    ("{}", "unsupported model type: no model_type"),
    ('{"model_type": "llama"}', "the config has no 'num_hidden_layers'"),
    ('{"model_type": "gpt2", "n_layer": "12"}', "'n_layer' = '12' is not a positive integer"),
    ("[1, 2]", "holds a JSON list, not a config object"),
    ('{"model_type": ', "is not valid JSON"),
])
def test_bad_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                     fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    assert main(["import-hf", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and fragment in err and "Traceback" not in err


def test_unknown_type_lists_the_supported_ones(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "t5"}')
    main(["import-hf", str(path)])
    err = capsys.readouterr().err
    assert all(name in err for name in FAMILIES)


def test_bad_name_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT2))
    assert main(["import-hf", str(path), "--name", "model"]) == 1
    assert "is not a usable .llmp id" in capsys.readouterr().err
    assert main(["import-hf", str(tmp_path / "nope.json")]) == 1
    assert "no such file" in capsys.readouterr().err


# ---- mixture-of-experts, MLA and window configs (typed from the public config.json files) ------------

DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
               "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
               "num_nextn_predict_layers": 1, "num_attention_heads": 128, "num_key_value_heads": 128,
               "n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512,
               "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128,
               "topk_method": "noaux_tc", "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8,
               "moe_layer_freq": 1, "first_k_dense_replace": 3, "norm_topk_prob": True, "scoring_func": "sigmoid",
               "aux_loss_alpha": 0.001, "seq_aux": True, "max_position_embeddings": 163840, "vocab_size": 129280,
               "tie_word_embeddings": False, "_name_or_path": "deepseek-ai/DeepSeek-V3"}
KIMI_K2 = {**DEEPSEEK_V3, "model_type": "kimi_k2", "num_attention_heads": 64, "num_key_value_heads": 64,
           "n_routed_experts": 384, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1,
           "num_nextn_predict_layers": 0, "vocab_size": 163840, "aux_loss_alpha": 0.001,
           "_name_or_path": "moonshotai/Kimi-K2-Base"}
QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
                 "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
                 "max_position_embeddings": 40960, "num_attention_heads": 32, "num_experts": 128,
                 "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
                 "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
                 "router_aux_loss_coef": 0.001, "tie_word_embeddings": False, "use_sliding_window": False,
                 "sliding_window": None, "vocab_size": 151936}
GPT_OSS_120B = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 36,
                "num_local_experts": 128, "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
                "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128,
                "tie_word_embeddings": False, "max_position_embeddings": 131072, "num_experts_per_tok": 4,
                "router_aux_loss_coef": 0.9, "attention_bias": True,
                "layer_types": ["sliding_attention", "full_attention"] * 18}
LLAMA4_MAVERICK = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
                   "text_config": {"model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48,
                                   "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
                                   "intermediate_size": 8192, "intermediate_size_mlp": 16384,
                                   "num_local_experts": 128, "num_experts_per_tok": 1,
                                   "interleave_moe_layer_step": 2, "vocab_size": 202048,
                                   "max_position_embeddings": 1048576, "attention_chunk_size": 8192,
                                   "tie_word_embeddings": False},
                   "vision_config": {"model_type": "llama4_vision_model"}}
MISTRAL_7B = {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
              "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
              "num_key_value_heads": 8, "sliding_window": 4096, "tie_word_embeddings": False, "vocab_size": 32000}


@pytest.mark.parametrize("config,total,active,rel", [
    (DEEPSEEK_V3, 671e9, 37e9, 0.015),    # DeepSeek-V3 technical report §1: 671B total, 37B activated
    (KIMI_K2, 1.03e12, 32e9, 0.03),       # Kimi K2 model card: 1 trillion total, 32B activated
    (QWEN3_30B_A3B, 30.5e9, 3.3e9, 0.02),  # Qwen3-30B-A3B model card: 30.5B total, 3.3B activated (rounded)
    (GPT_OSS_120B, 116.83e9, None, 0.001),  # gpt-oss model card Table 1: 116.83B total
    (LLAMA4_MAVERICK, 400e9, 17e9, 0.015),  # Meta: Maverick 400B total, 17B active
    (MISTRAL_7B, 7.24e9, None, 0.005),      # Mistral 7B: 7.24B
], ids=["deepseek-v3", "kimi-k2", "qwen3-30b-a3b", "gpt-oss-120b", "llama4-maverick", "mistral-7b"])
def test_imported_moe_models_have_the_published_size(tmp_path: Path, config: dict[str, Any], total: float,
                                                     active: float | None, rel: float) -> None:
    model = resolve(tmp_path, config, "--seq-len", "4096").model
    assert params.count(model) == pytest.approx(total, rel=rel)
    if active is not None:
        assert params.active(model) == pytest.approx(active, rel=rel)


def test_deepseek_fields(tmp_path: Path) -> None:
    m = resolve(tmp_path, DEEPSEEK_V3, "--seq-len", "4096").model
    assert m.moe is not None and m.mla is not None
    assert (m.moe.experts, m.moe.top_k, m.moe.expert_ffn_hidden, m.moe.shared_experts, m.moe.first_dense_layers,
            m.moe.router.value, m.moe.expert_bias, m.moe.aux_loss) == (256, 8, 2048, 1, 3, "sigmoid", True, True)
    assert (m.mla.q_lora_rank, m.mla.kv_lora_rank, m.mla.qk_nope_head_dim, m.mla.qk_rope_head_dim,
            m.mla.v_head_dim) == (1536, 512, 128, 64, 128)
    assert (m.ffn_hidden, m.mtp_layers, m.heads) == (18432, 1, 128)
    text = (tmp_path / "model.llmp").read_text()
    assert "group-limited routing (n_group = 8, topk_group = 4)" in text


def test_gpt_oss_fields(tmp_path: Path) -> None:
    m = resolve(tmp_path, GPT_OSS_120B, "--seq-len", "4096").model
    assert (m.window, m.full_attention_every, m.bias, m.head_dim) == (128, 2, True, 64)
    assert m.moe is not None and (m.moe.experts, m.moe.top_k, m.moe.expert_ffn_hidden, m.moe.aux_loss) == (
        128, 4, 2880, True)
    without_types = {k: v for k, v in GPT_OSS_120B.items() if k != "layer_types"}  # GptOssConfig's default
    assert resolve(tmp_path, without_types, "--seq-len", "4096").model.full_attention_every == 2


def test_llama4_reads_its_text_config(tmp_path: Path) -> None:
    m = resolve(tmp_path, LLAMA4_MAVERICK, "--seq-len", "8192").model
    assert m.moe is not None and (m.moe.every, m.moe.shared_experts, m.moe.router.value, m.ffn_hidden,
                                  m.moe.expert_ffn_hidden) == (2, 1, "sigmoid", 16384, 8192)
    text = (tmp_path / "model.llmp").read_text()
    assert '(model_type = "llama4_text")' in text and "chunked attention (8192 tokens)" in text


def test_qwen3_moe_and_mistral_windows(tmp_path: Path) -> None:
    assert resolve(tmp_path, QWEN3_30B_A3B).model.window == 0  # use_sliding_window false
    assert resolve(tmp_path, MISTRAL_7B).model.window == 4096
    dense_first = {**QWEN3_30B_A3B, "mlp_only_layers": [0, 1], "decoder_sparse_step": 2}
    moe = resolve(tmp_path, dense_first).model.moe
    assert moe is not None and (moe.first_dense_layers, moe.every) == (2, 2)


@pytest.mark.parametrize("config,fragment", [
    ({**QWEN3_30B_A3B, "mlp_only_layers": [3, 7]}, "mlp_only_layers [3, 7] are not the leading layers"),
    ({**GPT_OSS_120B, "layer_types": ["full_attention", "sliding_attention"] * 17 + ["sliding_attention"] * 2},
     "llmp supports every n-th layer"),
    ({**GPT_OSS_120B, "layer_types": ["sliding_attention"] * 3}, "layer_types must list 36 entries"),
    ({**DEEPSEEK_V3, "scoring_func": "sparsemax"}, "scoring_func 'sparsemax' is neither softmax nor sigmoid"),
    ({**DEEPSEEK_V3, "kv_lora_rank": None}, "the config has no 'kv_lora_rank'"),
    ({"model_type": "llama4"}, "needs a 'text_config' object"),
])
def test_bad_moe_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any],
                         fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["import-hf", str(path)]) == 1
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err
