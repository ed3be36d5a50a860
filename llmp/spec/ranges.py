"""The physical range of every count, size and rate a spec can hold.

A value outside its range is a slip (a unit off by 10^3, a stray exponent, a token count typed in
a sequence field), and accepting it would print a confident, absurd prediction: a 1e26-day step
from ``mem_bandwidth = 1e-30 TB/s``, a 1 Hz clock, an hour of launch overhead per kernel. Each
range runs from below the smallest real value to far above the largest, and says which real
devices or runs bound it, so a value just past today's record (a new GPU, a longer context) still
loads. ``0`` stays allowed where the field is zero-or-more and 0 means "none" (no scale-up link,
no window): the range bounds the values that are not 0.

The resolver applies :data:`RANGES` to every field it converts (written, defaulted, swept or given
with ``--set``), and a test checks that every numeric field of every section has an entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

KB, MB, GB, TB, PB = 1e3, 1e6, 1e9, 1e12, 1e15
KiB, MiB, GiB, TiB = 2.0**10, 2.0**20, 2.0**30, 2.0**40
US, MS = 1e-6, 1e-3


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive bounds in SI units, and the real values that set them."""

    low: float
    high: float
    why: str


def _r(low: float, high: float, why: str) -> Range:
    return Range(low=low, high=high, why=why)


_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4")

_RATE = _r(100e6, 1e18, "from one CPU core's scalar rate (~1 GFLOP/s) to 8x Cerebras WSE-3's 125 PFLOP/s; "
           "the fastest GPU's dense peak is 15 PFLOP/s (B300 NVFP4)")
_LINK_BW = _r(10 * MB, 100 * TB, "from 100 Mb/s Ethernet (12.5 MB/s) to 55x NVLink 5's 1.8 TB/s per GPU; "
              "a node's NICs reach 800 GB/s (8 x 800 Gb/s)")
_WIDTH = _r(1, 10**6, "widths and ranks are 1 to ~2e4 in published models (PaLM 540B: hidden 18,432)")
_LAYERS = _r(1, 10**5, "the deepest trained transformer has 1,000 layers (DeepNet, arXiv 2203.00555)")
_DEGREE = _r(1, 10**7, "parallel degrees multiply to the GPU count; the largest clusters have ~2e5 GPUs")

RANGES: Mapping[tuple[str, str], Range] = MappingProxyType({
    # --- gpu: the datasheet of one device (GPUs, and CPU sockets used as one)
    ("gpu", "memory"): _r(64 * MiB, 64 * TiB, "the largest GPU memory is 288 GB (B300, MI355X); a CPU socket "
                          "addresses up to 6 TB (AMD EPYC 9005)"),
    ("gpu", "mem_bandwidth"): _r(1 * GB, 100 * PB, "one DDR4 channel gives ~25 GB/s, the fastest HBM 8 TB/s (B200, "
                                 "MI355X), Cerebras WSE-3's on-chip SRAM 21 PB/s"),
    ("gpu", "sms"): _r(1, 10**6, "one CPU core up to Cerebras WSE-3's 900,000 cores; GPUs have 80-304 SMs or CUs"),
    ("gpu", "clock"): _r(100 * MB, 10 * GB, "datacenter GPUs clock 1-2.6 GHz, the fastest CPU 6.2 GHz (Intel "
                         "Core i9-14900KS boost)"),
    ("gpu", "l2_cache"): _r(64 * KiB, 64 * GiB, "GPU L2 caches are 6-128 MB, CPU L3 caches up to 1.1 GB (EPYC "
                            "9684X), Cerebras WSE-3's SRAM 44 GB"),
    ("gpu", "tdp"): _r(1, 100e3, "boards draw 5 W (Jetson Nano) to 1.4 kW (GB300); a Cerebras CS-3 system 23 kW"),
    ("gpu", "launch_overhead"): _r(100e-9, 10 * MS, "a CUDA kernel launch costs 2-10 us, a CPU function call "
                                   "~0.1 us; 10 ms is 1,000x the slowest"),
    ("gpu", "scaleup_bandwidth"): _LINK_BW,
    ("gpu", "host_bandwidth"): _r(100 * MB, 10 * TB, "PCIe Gen1 x1 carries 250 MB/s, NVLink-C2C 450 GB/s per "
                                  "direction (GH200, GB200)"),
    ("gpu", "host_memory_bandwidth"): _r(1 * GB, 10 * TB, "a CPU socket's memory gives 25-600 GB/s (12 channels of "
                                         "DDR5; GH200's LPDDR5X 500 GB/s)"),
    **{(section, d): _RATE for section in ("flops", "achievable", "flash_attention") for d in _DTYPES},
    # --- link: one tier of the network
    ("link", "bandwidth"): _LINK_BW,
    ("link", "peer_bandwidth"): _LINK_BW,
    ("link", "latency"): _r(0.0, 1.0, "NVLink ~0.5 us, InfiniBand 1-5 us, a transcontinental round trip ~0.1 s"),
    ("link", "efficiency"): _r(0.001, 1.0, "nccl-tests reach 75-92% of line rate on the catalog's links; "
                               "0.1% is a link that carries almost nothing"),
    # --- node and cluster
    ("node", "gpus_per_node"): _r(1, 4096, "servers hold 1-8 GPUs, an NVL72 rack modelled as one node 72; "
                                  "4,096 is 7x NVL576"),
    ("node", "nvlink_domain"): _r(1, 4096, "the largest NVLink domains join 72 (GB200 NVL72) to 576 GPUs "
                                  "(NVL576)"),
    ("cluster", "nodes"): _r(1, 10**6, "the largest clusters have ~2e5 GPUs (xAI Colossus), 25,000 nodes of 8"),
    # --- model
    ("model", "layers"): _LAYERS,
    ("model", "hidden"): _r(1, 10**7, "the widest dense models are ~2e4 wide (PaLM 540B: 18,432)"),
    ("model", "heads"): _r(1, 10**5, "models have 1 to 128 attention heads (DeepSeek-V3: 128)"),
    ("model", "kv_heads"): _r(1, 10**5, "as heads"),
    ("model", "head_dim"): _r(1, 10**5, "heads are 32 to 256 wide (Gemma: 256)"),
    ("model", "ffn_hidden"): _r(1, 10**8, "MLPs are up to ~7e4 wide (PaLM 540B: 73,728)"),
    ("model", "vocab"): _r(2, 10**8, "vocabularies run from 256 bytes to ~2.6e5 tokens (Gemma)"),
    ("model", "seq_len"): _r(1, 10**9, "the longest trained contexts are ~1e7 tokens (Llama 4 Scout)"),
    ("model", "dropout"): _r(0.0, 0.99, "a dropout probability (0.1 in GPT-2, 0 in most LLMs)"),
    ("model", "rotary_pct"): _r(0.01, 1.0, "the fraction of a head that rotary rotates (GPT-NeoX-20B: 0.25)"),
    ("model", "window"): _r(1, 10**9, "sliding windows are 128 (gpt-oss) to 4,096 tokens (Mistral 7B)"),
    ("model", "full_attention_every"): _LAYERS,
    ("model", "mtp_layers"): _r(1, 64, "DeepSeek-V3 trains 1 multi-token prediction module, Gloeckle et al. 2024 "
                                "(arXiv 2404.19737) up to 8; each is one more transformer layer, priced on its own"),
    ("moe", "experts"): _r(1, 10**7, "the most experts: ~1e6 (PEER, arXiv 2407.04153); DeepSeek-V3 256"),
    ("moe", "top_k"): _r(1, 10**4, "tokens go to 1-8 experts (Switch: 1, DeepSeek-V3: 8)"),
    ("moe", "expert_ffn_hidden"): _r(1, 10**8, "as ffn_hidden"),
    ("moe", "shared_experts"): _r(1, 1000, "models have 0 to 2 shared experts (DeepSeek-V2: 2)"),
    ("moe", "capacity_factor"): _r(0.01, 1000.0, "capacity factors are 1 to 2 (Switch Transformer: 1.0-1.25)"),
    ("moe", "imbalance"): _r(1e-3, 10**4, "1 is a balanced load (below it the spec's checks explain why "
                             "not); a single expert taking every token is at most the expert count"),
    ("moe", "first_dense_layers"): _LAYERS,
    ("moe", "every"): _LAYERS,
    ("mla", "q_lora_rank"): _WIDTH,
    ("mla", "kv_lora_rank"): _WIDTH,
    ("mla", "qk_nope_head_dim"): _WIDTH,
    ("mla", "qk_rope_head_dim"): _WIDTH,
    ("mla", "v_head_dim"): _WIDTH,
    # --- train
    ("train", "global_batch"): _r(1, 10**8, "sequences per step; real runs use ~1e3-1e5"),
    ("train", "micro_batch"): _r(1, 10**8, "as global_batch, which it divides"),
    ("train", "vocab_divisible_by"): _r(1, 10**6, "stacks pad to multiples of 64 or 128"),
    ("train", "offload_activations"): _LAYERS,
    ("train", "offload_optimizer"): _r(0.0, 1.0, "a fraction of the optimizer states"),
    ("finetune", "lora_rank"): _WIDTH,
    ("finetune", "sample_len"): _r(1, 10**9, "as seq_len"),
    # --- parallel
    **{("parallel", axis): _DEGREE for axis in ("dp", "tp", "pp", "cp", "ep", "etp", "vp", "microbatch_group")},
    ("parallel", "dp_bucket_size"): _r(1 * KB, 1 * PB, "gradient buckets are 25 MB (PyTorch DDP) to 2.5 GB "
                                       "(DeepSpeed); 1 PB is the megatron_lm profile's one bucket for the whole "
                                       "gradient"),
    ("parallel", "first_stage_layers"): _LAYERS,
    ("parallel", "last_stage_layers"): _LAYERS,
})
"""(section, field) → its physical range (in the section's own names: ``link`` covers every link,
inline or named; ``flops`` every dtype of a device's peaks)."""
