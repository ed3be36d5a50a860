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
from llmp.commands.import_hf import FAMILIES, to_llmp
from llmp.dsl import load

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
