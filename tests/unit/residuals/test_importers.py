"""Importers of public GPU measurements: small synthetic files in each source's exact format
(with the documented faults), checked for the kernels and times written, the composite split,
the skips and their reasons, byte-identical reruns, that ``dataset.load`` reads the output, and
every kind of bad input. One slow test imports the real seed folder when the shared data is there.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from residual_helpers import A100

from llmp.analytic.kernels import CollectiveKind, Elementwise, Fusion, SoftmaxKind, Tier
from llmp.errors import InputError
from llmp.hardware.spec import Dtype
from llmp.residuals import dataset, features, samplefile
from llmp.residuals.importers import kernels, physics, run, sampledir, seed

GPU = "NVIDIAA100-SXM4-80GB"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data"


# ---------------------------------------------------------------------------------------------- fixtures


def _write(path: Path, header: str, rows: list[str], crlf: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    end = "\r\n" if crlf else "\n"
    path.write_bytes((end.join([header, *rows]) + end).encode())
    return path


def _nccl_rows(n: int, m: int, shapes: list[int], busbw: list[float], kind: str) -> list[str]:
    """Rows whose bus bandwidth (GB/s, nccl-tests convention) is the given one."""
    ranks = n * m
    out = []
    for shape, bw in zip(shapes, busbw):
        size = 2 * shape
        moved = {"allreduce": size * 2 * (ranks - 1) / ranks, "allgather": size * (ranks - 1), "p2p": size}[kind]
        out.append(f"{shape:.1f},{n:.1f},{m:.1f},{moved / (bw * 1e9) * 1e6:.1f}")
    return out


def write_seed(root: Path) -> Path:
    """A seed folder: operator and NCCL files in the seed's format, with its documented faults."""
    op, nccl = root / "perlmutter-a100" / "operator", root / "perlmutter-a100" / "nccl"
    five = "mp,b,h,l,dim,F_dur(us),B_dur(us)"
    _write(op / f"{GPU}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)",
           ["1.0,2.0,1024.0,2048.0,400.0,900.0", "2.0,4.0,1024.0,2048.0,410.0,880.2"])
    _write(op / f"{GPU}_linear4_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)", ["4.0,2.0,1024.0,2048.0,150.0,310.0"])
    _write(op / f"{GPU}_linear_final_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)",
           ["2.0,2.0,1024.0,2048.0,800.0,1700.0"])
    _write(op / f"{GPU}_flash_atten_fp16.csv", five, [
        "2.0,4.0,32.0,2048.0,4096.0,1000.0,2600.0",
        "1.0,8.0,40.0,4096.0,5120.0,14398.0,12891.666666666666",  # the impossible row (README §8.4)
        "2.0,4.0,32.0,2048.0,4096.0,1130.0,2950.0",  # the same key again, slower (README §8.3)
        "1.0,8.0,32.0,4608.0,4608.0,21212.75,66032.75",  # fewer samples: off the 0.2 us grid
    ])
    _write(op / f"{GPU}_baddbmm_fp16.csv", five, ["1.0,4.0,16.0,1024.0,2048.0,100.0,250.0"])
    _write(op / f"{GPU}_bmm_fp16.csv", five, ["2.0,4.0,16.0,1024.0,2048.0,60.0,130.0"])
    _write(op / f"{GPU}_fillmask_fp16.csv", five, ["1.0,4.0,16.0,1024.0,2048.0,190.0,400.0"])
    _write(op / f"{GPU}_RoPE_fp16.csv", five, ["2.0,4.0,16.0,1024.0,2048.0,211.8,439.4"])
    _write(op / f"{GPU}_softmax_fp16.csv", "mp,b,h,l,F_dur(us),B_dur(us)", ["2.0,2.0,16.0,1024.0,70.0,110.0"])
    _write(op / f"{GPU}_ScaledUpperTriangMaskedSoftmax_fp16.csv", "mp,b,h,l,F_dur(us),B_dur(us)",
           ["1,2.0,2.0,1024.0,16.0,13.0"])
    _write(op / f"{GPU}_gelu_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)", ["4.0,2.0,1024.0,2048.0,30.0,42.0"])
    _write(op / f"{GPU}_res_add_fp16.csv", "b,l,dim,F_dur(us),B_dur(us)", ["2.0,1024.0,2048.0,30.0,30.0"])
    _write(op / f"{GPU}_layernorm_fp16.csv", "b,l,dim,F_dur(us),B_dur(us)", ["2.0,1024.0,2048.0,22.0,65.6"])
    _write(op / f"{GPU}_RMSlayernorm_fp16.csv", "b,l,dim,F_dur(us),B_dur(us)", ["2.0,1024.0,2048.0,124.0,357.6"])
    _write(op / f"{GPU}_embedding_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)", ["2.0,2.0,1024.0,2048.0,62.0,122.4"])
    _write(op / f"{GPU}_parallel_cross_entropy_128_fp16.csv", "mp,b,l,F_dur(us),B_dur(us)",
           ["1.0,2.0,1024.0,1861.6,604.2"])
    _write(op / f"{GPU}_firstStage_optimizer_fp16.csv", "mp,dim,encoders,dur(us)", ["1.0,2048.0,4.0,2557.6"], crlf=True)
    _write(op / f"{GPU}.csv", "GPU,Function,Precision,Propagation,Best_model,Best_config,Best_error%",
           [f"{GPU},linear1,fp16,fwd,xgboost,\"{{'n_estimators': 10}}\",0.05"], crlf=True)
    shapes = [20971520 + 65536 * i for i in range(20)]
    bw = [205.0 + (i % 3) for i in range(20)]
    bw[5], bw[13] = 19.0, 22.0  # the slow mode (README §8.2)
    header = "shape,nodes,GPUsPerNode,dur(us)"
    _write(nccl / f"{GPU}_allreduce_fp16_1_4.csv", header, _nccl_rows(1, 4, shapes, bw, "allreduce"), crlf=True)
    _write(nccl / f"{GPU}_allreduce_fp16.csv", header, _nccl_rows(1, 4, shapes[:3], bw[:3], "allreduce"), crlf=True)
    _write(nccl / f"{GPU}_allgather_large_fp16_1_2.csv", header,
           _nccl_rows(1, 2, [134217728, 134817728], [48.0, 49.0], "allgather"), crlf=True)
    _write(nccl / f"{GPU}_p2p_fp16_2_1.csv", header, _nccl_rows(2, 1, [2097152, 2162688], [1.2, 1.2], "p2p"), crlf=True)
    _write(nccl / f"{GPU}_p2p_fp16_1_2.csv", header, _nccl_rows(1, 2, [2097152, 2162688], [91.0, 90.0], "p2p"),
           crlf=True)
    _write(root / "examples" / "llemma_7b_4_2_2_P.csv", "module,parameter,predition(us)", ["linear1_fwd,[1 2 3],3275"])
    return root


def write_vidur(root: Path) -> Path:
    """Vidur compute and network files in their layout (compute/<gpu>/<org>/<model>, network/<node>)."""
    ops = ("emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
           "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")

    def mlp(path: Path, model_ops: tuple[str, ...], rows: list[tuple[dict[str, str], float]]) -> None:
        stats = [f"time_stats.{o}.{s}" for o in model_ops for s in ("min", "max", "mean", "median", "std")]
        keys = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp", "num_tokens",
                "num_tensor_parallel_workers"]
        lines = []
        for cfg, base in rows:
            vals = []
            for i, _ in enumerate(model_ops):
                med = base * (i + 1)
                vals += [med * 0.9, med * 1.2, med, med, med * 0.01]
            lines.append(",".join([*(repr(v) for v in vals), *(cfg[k] for k in keys)]))
        _write(path, ",".join([*stats, *keys]), lines)

    llama = {"n_head": "32", "n_kv_head": "8", "n_embd": "4096", "n_expanded_embd": "14336", "vocab_size": "128256",
             "use_gated_mlp": "True", "num_tokens": "512", "num_tensor_parallel_workers": "2"}
    mlp(root / "compute" / "a100" / "meta-llama" / "Meta-Llama-3-8B" / "mlp.csv", ops,
        [(llama, 0.05), ({**llama, "num_tokens": "1024"}, 0.09), (llama, 0.04)])  # a configuration twice
    phi = {"n_head": "32", "n_kv_head": "32", "n_embd": "2560", "n_expanded_embd": "10240", "vocab_size": "51200",
           "use_gated_mlp": "False", "num_tokens": "256", "num_tensor_parallel_workers": "1"}
    phi_ops = tuple(o for o in ops if o != "post_attention_layernorm")
    for gpu in ("a100", "a40"):
        mlp(root / "compute" / gpu / "microsoft" / "phi-2" / "mlp.csv", phi_ops, [(phi, 0.02)])
    head = ",time_stats.{c}.min,time_stats.{c}.max,time_stats.{c}.mean,time_stats.{c}.median,time_stats.{c}.std,rank," \
           "num_workers,size,collective,devices_per_node,max_devices_per_node"
    _write(root / "network" / "a100_dgx" / "all_reduce.csv", head.format(c="all_reduce"), [
        "0,0.3,0.5,0.4,0.4,0.01,0,8,67108864,all_reduce,8,8",
        "1,2.0,3.0,2.5,2.5,0.1,0,16,67108864,all_reduce,8,8",
        "2,0.3,0.5,0.4,0.38,0.01,0,8,67108864,all_reduce,8,8",  # the same size again
    ])
    _write(root / "network" / "a100_pairwise_nvlink" / "send_recv.csv", head.format(c="send_recv"),
           ["0,0.01,0.01,0.01,0.012,0.0,0,2,2048,send_recv,1,4"])
    return root


def kernels_row(**cells: str) -> dict[str, str]:
    return {c: cells.get(c, "") for c in kernels.COLUMNS}


KERNEL_ROWS = [
    # XLA H100: the superseded 2025-08 table and its 2025-10 replacement (README fault 3)
    kernels_row(source="xla_gemm_tables", source_ref="tensorflow/tensorflow@372d578bb8:x.h:28", gpu="sm_90",
                gpu_id="h100_sxm5_80gb", dtype="bf16", op="gemm", **{"pass": "fwd"}, batch="1", m="1024", n="2048",
                k="256", time_s="7.696e-06", time_derived="true", backend="xla",
                notes="xla_dtype=bf16xbf16->bf16; table=2025-08; superseded=true"),
    kernels_row(source="xla_gemm_tables", source_ref="openxla/xla@336bb15c32:t.txtpb:40", gpu="sm_90",
                gpu_id="h100_sxm5_80gb", dtype="bf16", op="gemm", **{"pass": "fwd"}, batch="1", m="1024", n="2048",
                k="256", time_s="7.5e-06", time_derived="true", backend="xla",
                notes="xla_dtype=bf16xbf16->bf16; table=2025-10"),
    # B200: SimuMax dgrad and a grouped wgrad, an XLA mixed-FP8 GEMM, cuDNN attention re-measured under two
    # software versions, an mxfp8 row, a windowed row, an MLA row, a deterministic backward, torch_math, a
    # non-causal windowed row
    kernels_row(source="simumax", source_ref="MooreThreads/SimuMax@4dcaae513b:b200.json:20", gpu="b200_bf16_ceperm",
                gpu_id="b200", dtype="bf16", op="gemm", **{"pass": "dgrad"}, layout="NN", batch="1", m="4096", n="8192",
                k="10240", time_s="0.0005", time_derived="true", backend="te_general_gemm",
                notes="accumulate=false; out_dtype=bf16; eff=0.6; peak_tflops=2250.0"),
    kernels_row(source="simumax", source_ref="MooreThreads/SimuMax@4dcaae513b:b200.json:545", gpu="b200_bf16_ceperm",
                gpu_id="b200", dtype="bf16", op="grouped_gemm", **{"pass": "wgrad"}, layout="NT", m="4096", n="7168",
                k="128", groups="256", time_s="0.0110355", time_derived="true", backend="te_grouped_gemm",
                notes="simumax_MNK=128x4096x7168; main_grad_dtype=fp32; accumulate=true; eff=0.0775"),
    kernels_row(source="xla_gemm_tables", source_ref="openxla/xla@336bb15c32:t.txtpb:3593", gpu="sm_100_B200",
                gpu_id="b200", dtype="fp8_e4m3xe5m2", op="gemm", **{"pass": "fwd"}, batch="4", m="1024", n="4096",
                k="4096", time_s="5.3019e-05", time_derived="true", backend="xla",
                notes="xla_dtype=f8e4m3fnxf8e5m2->bf16; table=2025-10"),
    *(kernels_row(source="cudnn_frontend", source_ref=f"NVIDIA/cudnn-frontend@{c}:a.csv:19", gpu="NVIDIA B200",
                  gpu_id="b200", dtype="bf16", op="attention", **{"pass": "fwd"}, batch="1", seq_q="8192",
                  seq_kv="8192", heads_q="64", heads_kv="8", head_dim_qk="128", head_dim_v="128", causal="true",
                  time_s=t, backend="cudnn", notes=f"mask=top_left; cudnn={v}; fe={fe}; timing={timing}")
      for c, t, v, fe, timing in (("9793df569c", "0.00050", "9.10.2", "1.12.0", "cuda_events_median10"),
                                  ("be6c079be8", "0.00052", "9.13.1", "1.14.1", "cuda_events_median10"))),
    kernels_row(source="cudnn_frontend", source_ref="NVIDIA/cudnn-frontend@3929da2ef4:g.csv:18", gpu="NVIDIA B200",
                gpu_id="b200", dtype="mxfp8", op="attention", **{"pass": "bwd"}, batch="2", seq_q="16384",
                seq_kv="16384", heads_q="128", heads_kv="128", head_dim_qk="64", head_dim_v="64", causal="true",
                time_s="0.024996", backend="cudnn", notes="cudnn=9.22.0; deterministic_bwd=false"),
    kernels_row(source="cudnn_frontend", source_ref="NVIDIA/cudnn-frontend@3929da2ef4:g.csv:6", gpu="NVIDIA B200",
                gpu_id="b200", dtype="bf16", op="attention", **{"pass": "bwd"}, batch="1", seq_q="2048",
                seq_kv="2048", heads_q="64", heads_kv="8", head_dim_qk="64", head_dim_v="64", causal="true",
                window="128", time_s="0.0037", backend="cudnn", notes="cudnn=9.22.0; deterministic_bwd=false"),
    kernels_row(source="cudnn_frontend", source_ref="NVIDIA/cudnn-frontend@3929da2ef4:d.csv:2", gpu="NVIDIA B200",
                gpu_id="b200", dtype="bf16", op="attention", **{"pass": "fwd"}, batch="2", seq_q="4096",
                seq_kv="4096", heads_q="128", heads_kv="128", head_dim_qk="192", head_dim_v="128", causal="true",
                time_s="0.003", backend="cudnn", notes="cudnn=9.22.0"),
    kernels_row(source="cudnn_frontend", source_ref="NVIDIA/cudnn-frontend@3929da2ef4:g.csv:9", gpu="NVIDIA B200",
                gpu_id="b200", dtype="bf16", op="attention", **{"pass": "fwd"}, batch="1", seq_q="2048",
                seq_kv="2048", heads_q="64", heads_kv="8", head_dim_qk="64", head_dim_v="64", causal="false",
                window="128", time_s="0.0009", backend="cudnn", notes="cudnn=9.22.0"),
    *(kernels_row(source="cudnn_frontend", source_ref=f"NVIDIA/cudnn-frontend@3929da2ef4:w.csv:{line}",
                  gpu="NVIDIA B200", gpu_id="b200", dtype="bf16", op="attention", **{"pass": "bwd"}, batch="1",
                  seq_q="4096", seq_kv="4096", heads_q="40", heads_kv="40", head_dim_qk="128", head_dim_v="128",
                  causal="false", time_s=t, backend="cudnn", notes=f"cudnn=9.22.0; deterministic_bwd={det}")
      for line, t, det in ((15, "0.0021", "false"), (16, "0.0026", "true"))),
    kernels_row(source="cudnn_frontend", source_ref="NVIDIA/cudnn-frontend@be6c079be8:m.csv:2", gpu="NVIDIA B200",
                gpu_id="b200", dtype="bf16", op="attention", **{"pass": "fwd"}, batch="1", seq_q="512", seq_kv="512",
                heads_q="128", heads_kv="8", head_dim_qk="128", head_dim_v="128", causal="true", time_s="0.000692",
                backend="torch_math", notes="cudnn=9.13.0; timing=cuda_events_median10"),
    # GB200 norm, A100 Echo all-reduce: one rank (a local copy) and 16 ranks over 2 nodes
    kernels_row(source="cudnn_frontend", source_ref="NVIDIA/cudnn-frontend@3929da2ef4:n.csv:26", gpu="NVIDIA GB200",
                gpu_id="gb200", dtype="bf16", op="norm", **{"pass": "fwd"}, norm_rows="2048", norm_cols="4096",
                time_s="9e-06", backend="cudnn", notes="norm=rms_norm; has_bias=false; cudnn=9.19.1"),
    kernels_row(source="echo_nccl", source_ref="NetX-lab/Echo@15f0d12c41:nccl-test-log/nccl_1.log:40",
                gpu="A100-SXM4-40GB", gpu_id="a100_sxm4_40gb", dtype="fp32", op="collective", collective="all_reduce",
                bytes="4194304", ranks="1", nodes="1", time_s="2.1e-05", backend="nccl",
                notes="single_rank_no_communication"),
    kernels_row(source="echo_nccl", source_ref="NetX-lab/Echo@15f0d12c41:nccl-test-log/nccl_16.log:60",
                gpu="A100-SXM4-40GB", gpu_id="a100_sxm4_40gb", dtype="fp32", op="collective", collective="all_reduce",
                bytes="1073741824", ranks="16", nodes="2", time_s="0.0166", backend="nccl", notes="busbw_GBps=121.0"),
]


def write_kernels(path: Path, rows: list[dict[str, str]] = KERNEL_ROWS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=kernels.COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return path


def rows_of(out: Path, family: str) -> list[dict[str, str]]:
    return list(samplefile.read(out / f"{family}.csv").rows)


def by_source(rows: list[dict[str, str]], needle: str) -> list[dict[str, str]]:
    return [r for r in rows if needle in r["source_ref"]]


@pytest.fixture(scope="module")
def a100():
    return dataset.catalog_device(A100)


@pytest.fixture(scope="module")
def seed_out(tmp_path_factory):
    root = write_seed(tmp_path_factory.mktemp("seed_src"))
    out = tmp_path_factory.mktemp("seed_out") / "a100"
    report = run("seed", [root], out, device=A100)
    return root, out, report


# ---------------------------------------------------------------------------------------------- schema


def test_columns_are_the_samplers():
    pytest.importorskip("torch")
    from llmp.measure import collectives, design, sampling

    assert sampledir.SAMPLE_TAIL == sampling.SAMPLE_COLUMNS_TAIL
    assert sampledir.COLLECTIVE_BASE == collectives.COLUMNS
    for family in design.FAMILIES:
        assert sampledir.kernel_columns(family) == (*sampling.columns(family), *sampledir.EXTRA)


# ---------------------------------------------------------------------------------------------- seed


def test_seed_linear_forward_and_backward_split(seed_out, a100):
    _, out, _ = seed_out
    rows = by_source(rows_of(out, "gemm"), "linear1_fp16.csv:2")
    fwd = [r for r in rows if r["pass"] == "fwd"]
    bwd = {r["variant"]: r for r in rows if r["pass"] == "bwd"}
    # README §3.1: linear1 mp=1, b=2, l=1024, dim=2048: forward GEMM (b*l, 3*dim/mp, dim)
    assert len(fwd) == 1 and (fwd[0]["m"], fwd[0]["n"], fwd[0]["k"], fwd[0]["batch"]) == ("2048", "6144", "2048", "1")
    assert float(fwd[0]["time_s"]) == pytest.approx(400e-6) and "bias" in fwd[0]["note"].split(";")
    assert (bwd["dgrad"]["m"], bwd["dgrad"]["n"], bwd["dgrad"]["k"]) == ("2048", "2048", "6144")
    assert (bwd["wgrad"]["m"], bwd["wgrad"]["n"], bwd["wgrad"]["k"]) == ("2048", "6144", "2048")
    times = {v: float(r["time_s"]) for v, r in bwd.items()}
    assert sum(times.values()) == pytest.approx(900e-6, rel=1e-5)
    ratios = [times[v] / features.roofline_seconds(dataset.kernel_of(bwd[v]), a100)[1] for v in ("dgrad", "wgrad")]
    assert ratios[0] == pytest.approx(ratios[1], rel=1e-5)
    assert all("composite:dgrad+wgrad+bias" in r["note"] for r in bwd.values())


def test_seed_gemm_shapes_of_every_linear_and_batched_gemm(seed_out):
    _, out, _ = seed_out
    gemm = rows_of(out, "gemm")

    def fwd(needle):
        (r,) = [r for r in by_source(gemm, needle) if r["pass"] == "fwd"]
        return tuple(int(r[c]) for c in ("m", "n", "k", "batch"))

    assert fwd("linear4_fp16") == (2048, 2048, 2048, 1)  # (b*l, 4*dim/mp, dim) with mp=4
    assert fwd("linear_final_fp16") == (2048, 25216, 2048, 1)  # V(2) = 25216 (README §2.4)
    assert fwd("baddbmm_fp16") == (1024, 1024, 128, 64)  # batch b*h/mp, (l, hd, l)
    assert fwd("_bmm_fp16") == (1024, 128, 1024, 32)
    linear4 = {r["variant"]: r for r in by_source(gemm, "linear4_fp16") if r["pass"] == "bwd"}
    assert "composite:dgrad+wgrad" in linear4["dgrad"]["note"] and "bias" not in linear4["dgrad"]["note"]


def test_seed_non_gemm_kernels_are_the_stacks_variants(seed_out):
    _, out, _ = seed_out
    ew = rows_of(out, "elementwise")
    rope = {r["pass"]: r for r in by_source(ew, "RoPE")}
    assert rope["fwd"]["variant"] == Elementwise.ROTARY_UNFUSED
    assert rope["fwd"]["elements"] == str(2 * 4 * 1024 * 8 * 128)  # q and k: 2*b*l*(h/mp)*(dim/h)
    fill = by_source(ew, "fillmask")
    assert {r["variant"] for r in fill} == {"masked_fill"} and fill[0]["elements"] == str(4 * 16 * 1024 * 1024)
    gelu = by_source(ew, "gelu")
    assert gelu[0]["elements"] == str(2 * 1024 * 2048)  # b*l*4*dim/mp with mp = 4
    res_add = by_source(ew, "res_add")
    assert [r["pass"] for r in res_add] == ["fwd"] and res_add[0]["variant"] == "add"
    norms = {(r["variant"], r["rms"], r["pass"]) for r in rows_of(out, "norm")}
    assert norms == {("", "0", "fwd"), ("", "0", "bwd"), (Fusion.UNFUSED, "1", "fwd"), (Fusion.UNFUSED, "1", "bwd")}
    soft = {(r["variant"], r["rows"], r["cols"]) for r in rows_of(out, "softmax")}
    assert soft == {("", str(2 * 8 * 1024), "1024"), (SoftmaxKind.CAUSAL_FUSED, str(2 * 2 * 1024), "1024")}
    ce = rows_of(out, "cross_entropy")
    assert {(r["variant"], r["tokens"], r["vocab"]) for r in ce} == {("unfused", "2048", "50304")}
    emb = rows_of(out, "embedding")
    assert {(r["tokens"], r["hidden"], r["vocab"]) for r in emb} == {("2048", "2048", "25216")}


def test_seed_flash_attention_faults(seed_out):
    _, out, report = seed_out
    att = rows_of(out, "attention")
    key = [r for r in att if r["heads"] == "16" and r["seq_q"] == "2048"]  # h/mp = 32/2
    assert {r["pass"]: float(r["time_s"]) for r in key} == pytest.approx({"fwd": 1000e-6, "bwd": 2600e-6})
    assert {(r["causal"], r["flash"], r["head_dim"]) for r in key} == {("0", "1", "128")}  # non-causal flash-attn
    impossible = [r for r in att if r["heads"] == "40"]  # README §8.4: its backward is above the A100's peak
    assert [r["pass"] for r in impossible] == ["fwd"]  # judged on its own, the forward stays
    few = [r for r in att if r["seq_q"] == "4608"]
    assert len(few) == 2 and all("fewer_samples" in r["note"] and r["repeats"] == "" for r in few)
    (inp,) = [i for i in report.manifest["inputs"] if i["file"].endswith("flash_atten_fp16.csv")]
    assert inp["duplicates_merged"] == 2 and inp["rows_read"] == 4
    assert inp["skipped"] == {physics.PEAK_REASON: 1}


def test_seed_skips_and_reasons(seed_out):
    _, _, report = seed_out
    m = report.manifest
    files = {i["file"]: i for i in m["inputs"]}
    assert files[f"{GPU}_res_add_fp16.csv"]["skipped"] == {seed.RES_ADD_BWD_REASON: 1}
    assert files[f"{GPU}_firstStage_optimizer_fp16.csv"]["skipped"] == {seed.SKIP_FILES["firstStage_optimizer"]: 1}
    assert files[f"{GPU}.csv"]["skipped"] == {seed.SUMMARY_REASON: 1}
    assert files[f"{GPU}_allreduce_fp16.csv"]["skipped"] == {seed.COMBINED_REASON: 3}
    assert files[f"{GPU}_p2p_fp16_2_1.csv"]["skipped"] == {}  # slow, but what ran (README §8.1)
    assert files[f"{GPU}_allreduce_fp16_1_4.csv"]["skipped"] == {}  # a slow mode is no impossibility
    assert m["ignored_files"] == ["llemma_7b_4_2_2_P.csv"]
    assert m["node_id"] == "perlmutter_seed" and m["device_in_catalog"] and m["notes"] == []


def test_seed_nccl_rows(seed_out):
    _, out, _ = seed_out
    table = samplefile.read(out / "collectives.csv")
    assert table.meta["node_id"] == "perlmutter_seed" and table.meta["device_id"] == A100
    coll = [dataset.collective_of(r) for r in table.rows]
    ar = [c for c in coll if c.kind is CollectiveKind.ALL_REDUCE]
    assert len(ar) == 20 and {(c.group, c.ranks_per_node, c.tier) for c in ar} == {(4, 4, Tier.INTRA)}
    assert min(c.bytes for c in ar) == 2 * 20971520  # fp16 elements (README §5.1)
    ag = sorted(c.bytes for c in coll if c.kind is CollectiveKind.ALL_GATHER)
    assert ag == [2 * 134217728 * 2, 2 * 134817728 * 2]  # the gathered output of 2 ranks
    p2p = [c for c in coll if c.kind is CollectiveKind.SEND_RECV]
    assert {(c.group, c.ranks_per_node, c.tier) for c in p2p} == {(2, 2, Tier.INTRA), (2, 1, Tier.INTER)}


def test_seed_collectives_faster_than_their_links_are_dropped(tmp_path):
    """Physics, not one machine's transport: an intra-node pair above its NVLink3 pair's 100 GB/s is
    dropped; the slow inter-node rows of the seed's network are kept, on the node perlmutter_seed."""
    nccl = tmp_path / "nccl"
    header = "shape,nodes,GPUsPerNode,dur(us)"
    _write(nccl / f"{GPU}_p2p_fp16_1_2.csv", header, _nccl_rows(1, 2, [2097152, 2162688], [91.0, 130.0], "p2p"))
    _write(nccl / f"{GPU}_p2p_fp16_2_1.csv", header, _nccl_rows(2, 1, [2097152, 2162688], [1.2, 1.1], "p2p"))
    report = run("seed", [nccl], tmp_path / "out", device="a100_sxm4_80gb")
    files = {i["file"]: i for i in report.manifest["inputs"]}
    assert files[f"{GPU}_p2p_fp16_1_2.csv"]["skipped"] == {physics.LINK_REASON: 1}
    assert files[f"{GPU}_p2p_fp16_2_1.csv"]["skipped"] == {}
    assert report.manifest["node_id"] == "perlmutter_seed"


GH200 = "NVIDIAGH200480GB"


def _gh200_folder(root: Path, prefix: str = GH200) -> Path:
    """The seed's format measured on another GPU: its prefix is that GPU's driver name without spaces."""
    _write(root / f"{prefix}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)",
           ["1.0,2.0,1024.0,2048.0,130.0,290.0", "1.0,2.0,1024.0,2048.0,131.0,1.0"])  # an impossible backward
    _write(root / f"{prefix}_layernorm_fp16.csv", "b,l,dim,F_dur(us),B_dur(us)", ["2.0,1024.0,2048.0,9.0,20.0"])
    _write(root / f"{prefix}_allreduce_fp16_2_1.csv", "shape,nodes,GPUsPerNode,dur(us)",
           _nccl_rows(2, 1, [2097152, 4194304], [20.0, 21.0], "allreduce"))
    return root


def test_seed_format_of_another_gpu_by_its_prefix_or_alias(tmp_path):
    root = _gh200_folder(tmp_path / "vista")
    by_prefix = run("seed", [root], tmp_path / "a").manifest
    assert by_prefix["device_id"] == "gh200_96gb" and by_prefix["node_id"] == "vista_gh200"
    by_alias = run("seed", [root], tmp_path / "b", device="gh200").manifest
    assert by_alias == by_prefix
    gemm = rows_of(tmp_path / "a", "gemm")
    assert sorted(r["variant"] for r in gemm) == ["dgrad", "fwd", "wgrad"]  # a backward dropped, its forward kept
    assert by_prefix["skipped"] == {physics.PEAK_REASON: 1}


def test_seed_format_of_an_unlisted_gpu_needs_gpu_and_node(tmp_path):
    root = _gh200_folder(tmp_path / "mine", prefix="ACMEX1")
    with pytest.raises(InputError, match="prefix 'ACMEX1' names no GPU") as err:
        run("seed", [root], tmp_path / "a")
    assert "--gpu" in str(err.value.hint)
    with pytest.raises(InputError, match="need the catalog node") as err:
        run("seed", [root], tmp_path / "a", device="h100_sxm5_80gb")
    assert "--node" in str(err.value.hint) and "dgx_h100" in str(err.value.hint)
    m = run("seed", [root], tmp_path / "a", device="h100_sxm5_80gb", node_id="dgx_h100").manifest
    assert m["device_id"] == "h100_sxm5_80gb" and m["node_id"] == "dgx_h100"


def test_seed_files_of_several_gpus_need_a_choice(tmp_path):
    _gh200_folder(tmp_path / "src")
    write_seed(tmp_path / "src")
    with pytest.raises(InputError, match="several GPUs"):
        run("seed", [tmp_path / "src"], tmp_path / "a")
    m = run("seed", [tmp_path / "src"], tmp_path / "a", device="gh200_96gb").manifest
    assert m["device_id"] == "gh200_96gb"


def test_seed_output_is_read_by_dataset_load(seed_out, a100):
    _, out, report = seed_out
    kernel_files = sorted(p for p in out.glob("*.csv") if p.name != "collectives.csv")
    loaded = dataset.load(kernel_files)
    kernel_rows = sum(n for k, n in report.manifest["rows_written"].items() if not k.startswith("collective/"))
    assert len(loaded.observations) == kernel_rows and loaded.skipped == {}
    assert {d.id for d in loaded.devices} == {A100}
    assert {o.item.dtype for o in loaded.observations} == {Dtype.FP16}
    coll_rows = samplefile.read(out / "collectives.csv").rows
    assert all(dataset.collective_of(r) for r in coll_rows)
    whole = dataset.load([out])
    assert len(whole.observations) == sum(report.manifest["rows_written"].values())


def test_seed_reruns_are_byte_identical(tmp_path):
    root = write_seed(tmp_path / "src")
    a, b = tmp_path / "a", tmp_path / "b"
    run("seed", [root], a, device=A100)
    run("seed", [root / "perlmutter-a100" / "nccl", root / "perlmutter-a100" / "operator", root / "examples"], b,
        device=A100)
    first = {p.name: p.read_bytes() for p in a.iterdir()}
    assert first == {p.name: p.read_bytes() for p in b.iterdir()}
    run("seed", [root], a, device=A100)  # into the same directory: replaced, same bytes
    assert first == {p.name: p.read_bytes() for p in a.iterdir()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directories left
    text = (a / "gemm.csv").read_text() + (a / "import.json").read_text()
    assert str(tmp_path) not in text and "2026" not in text


def test_seed_rows_are_sorted_and_keys_unique(seed_out):
    _, out, _ = seed_out
    for path in out.glob("*.csv"):
        lines = path.read_text().splitlines()
        keys = [next(csv.reader([line]))[0] for line in lines[3:]]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)


# ---------------------------------------------------------------------------------------------- vidur


def test_vidur_compute_kernels(tmp_path):
    root = write_vidur(tmp_path / "vidur")
    out = tmp_path / "out"
    report = run("vidur", [root], out, device=A100)
    gemm = rows_of(out, "gemm")
    llama = [r for r in gemm if "Llama-3-8B" in r["source_ref"] and "t=512," in r["key"]]
    shapes = {(r["m"], r["n"], r["k"]) for r in llama}
    # tp=2: QKV (32/2 + 2*8/2)*128 = 3072 wide, out proj k = 16*128, up 2*14336/2, down k = 7168
    assert shapes == {("512", "3072", "4096"), ("512", "4096", "2048"), ("512", "14336", "4096"),
                      ("512", "4096", "7168")}
    ew = {(r["variant"], r["elements"], r["width"]) for r in rows_of(out, "elementwise")
          if "Llama-3-8B" in r["source_ref"] and "t=512," in r["key"]}
    assert ew == {("rotary", str(512 * (16 + 4) * 128), "128"), ("swiglu", str(512 * 7168), "7168"),
                  ("add", str(512 * 4096), "4096")}
    norms = [r for r in rows_of(out, "norm") if "Llama-3-8B" in r["source_ref"] and "t=512," in r["key"]]
    assert {(r["variant"], r["rms"]) for r in norms} == {("", "1")} and len(norms) == 2  # input and post-attention
    emb = [r for r in rows_of(out, "embedding") if "t=512," in r["key"]]
    assert {r["vocab"] for r in emb} == {"64128"}
    # the configuration profiled twice: the faster median (0.04 ms * op index) is kept
    up = [r for r in llama if r["n"] == "14336"]
    assert len(up) == 1 and float(up[0]["time_s"]) == pytest.approx(0.04e-3 * 7)
    (inp,) = [i for i in report.manifest["inputs"] if "Meta-Llama-3-8B" in i["source_ref"]]
    assert inp["duplicates_merged"] == 10 and inp["rows_read"] == 3 and inp["values_read"] == 30


def test_vidur_phi2_layer_norm_gelu_and_two_adds(tmp_path):
    root = write_vidur(tmp_path / "vidur")
    out = tmp_path / "out"
    run("vidur", [root], out, device=A100)
    phi = [r for r in rows_of(out, "elementwise") if "phi-2" in r["source_ref"]]
    add = [r for r in phi if r["variant"] == "add"]
    # `add` is the 9th op of phi-2's file: its median is 0.02 ms * 9, two identical kernels
    assert len(add) == 1 and float(add[0]["time_s"]) == pytest.approx(0.02e-3 * 9 / 2)
    assert "composite:2x" in add[0]["note"]
    assert {r["variant"] for r in phi} == {"add", "gelu", "rotary"}
    assert {(r["variant"], r["rms"]) for r in rows_of(out, "norm") if "phi-2" in r["source_ref"]} == {("", "0")}


def test_vidur_network_nodes(tmp_path):
    root = write_vidur(tmp_path / "vidur")
    out = tmp_path / "out"
    report = run("vidur", [root], out, device=A100)
    table = samplefile.read(out / "collectives.csv")
    assert table.meta["node_id"] == "dgx_a100"
    coll = sorted((c.group, c.ranks_per_node, c.tier.value, c.bytes) for c in map(dataset.collective_of, table.rows))
    assert coll == [(8, 8, "intra", 67108864), (16, 8, "inter", 67108864)]  # `size` is bytes already
    eight = [r for r in table.rows if r["group"] == "8"]
    assert float(eight[0]["time_s"]) == pytest.approx(0.38e-3)  # the duplicate's faster median
    (pair,) = [i for i in report.manifest["inputs"] if "a100_pairwise_nvlink" in i["source_ref"]]
    assert list(pair["skipped"]) == [f"{vidur_no_node()}: a100_pairwise_nvlink: "
                                     f"{vidur_nodes()['a100_pairwise_nvlink'].why}"]


def vidur_no_node() -> str:
    from llmp.residuals.importers import vidur

    return vidur.NO_NODE


def vidur_nodes():
    from llmp.residuals.importers import vidur

    return vidur.NETWORKS


def test_a_device_not_in_the_catalog_is_written_and_flagged(tmp_path):
    gemm = KERNEL_ROWS[1]  # the current (not superseded) XLA row
    path = write_kernels(tmp_path / "data" / "kernels.csv", [{**gemm, "gpu": "MI210", "gpu_id": "mi210"}])
    report = run("kernels", [path], tmp_path / "out", device="mi210")
    assert not report.manifest["device_in_catalog"]
    assert "not in the catalog yet" in report.manifest["notes"][0]
    assert samplefile.read(tmp_path / "out" / "gemm.csv").meta["device_id"] == "mi210"


# ---------------------------------------------------------------------------------------------- kernels


def test_kernels_b200_rows(tmp_path):
    path = write_kernels(tmp_path / "data" / "kernels.csv")
    out = tmp_path / "out"
    report = run("kernels", [path], out, device="b200")
    gemm = {r["variant"]: r for r in rows_of(out, "gemm")}
    dgrad = gemm["dgrad"]
    assert (dgrad["pass"], dgrad["m"], dgrad["n"], dgrad["k"]) == ("bwd", "4096", "8192", "10240")
    assert "derived_time" in gemm["dgrad"]["note"] and "wall_clock" in gemm["dgrad"]["note"]
    assert (gemm["wgrad"]["batch"], gemm["wgrad"]["m"]) == ("256", "4096")  # grouped: batch = groups
    assert "grouped:groups=256" in gemm["wgrad"]["note"]
    assert (gemm["fwd"]["dtype"], gemm["fwd"]["batch"]) == ("fp8", "4") and "fp8=e4m3xe5m2" in gemm["fwd"]["note"]
    att = rows_of(out, "attention")
    cudnn = [r for r in att if r["seq_q"] == "8192"]
    assert len(cudnn) == 1 and "be6c079be8" in cudnn[0]["source_ref"]  # the newest software, although slower
    assert "cuda_events" in cudnn[0]["note"]
    bwd = [r for r in att if r["heads"] == "40"]
    assert len(bwd) == 1 and float(bwd[0]["time_s"]) == pytest.approx(0.0021)  # non-deterministic kept
    math_ = [r for r in att if r["flash"] == "0"]
    assert len(math_) == 1 and "backend=torch_math" in math_[0]["note"]
    windowed = [r for r in att if r["window"] != r["seq_kv"]]
    assert [(r["window"], r["seq_kv"], r["causal"]) for r in windowed] == [("128", "2048", "1")]
    mla = [r for r in att if r["head_dim"] != r["head_dim_v"]]
    assert [(r["head_dim"], r["head_dim_v"]) for r in mla] == [("192", "128")]
    skipped = report.manifest["skipped"]
    assert skipped[kernels.NON_CAUSAL_WINDOW] == 1 and skipped[kernels.DETERMINISTIC] == 1
    assert skipped["dtype mxfp8 has no llmp dtype"] == 1
    assert report.manifest["duplicates_merged"] == 1
    loaded = dataset.load([out])
    assert len(loaded.observations) == sum(report.manifest["rows_written"].values())


def test_kernels_superseded_xla_and_gpu_selection(tmp_path):
    path = write_kernels(tmp_path / "kernels.csv")
    out = tmp_path / "out"
    report = run("kernels", [path], out, device="h100_sxm5_80gb")
    (row,) = rows_of(out, "gemm")
    assert "openxla" in row["source_ref"] and "median_kernel" in row["note"]
    assert report.manifest["skipped"][kernels.SUPERSEDED] == 1
    # gb300 is not in the catalog: its rows would be written and flagged; here none exist
    with pytest.raises(InputError, match="nothing to import"):
        run("kernels", [path], tmp_path / "none", device="gb300")
    # an explicit --gpu-id: the GB200 norm row imported as if on a B200
    run("kernels", [path], tmp_path / "proxy", device="b200", gpu_id="gb200")
    (norm,) = rows_of(tmp_path / "proxy", "norm")
    assert (norm["tokens"], norm["hidden"], norm["rms"], norm["variant"]) == ("2048", "4096", "1", "")


def test_kernels_echo_collectives(tmp_path):
    path = write_kernels(tmp_path / "kernels.csv")
    out = tmp_path / "out"
    report = run("kernels", [path], out, device="a100_sxm4_40gb")
    table = samplefile.read(out / "collectives.csv")
    assert table.meta["node_id"] == "dgx_a100_40gb"
    (row,) = table.rows
    c = dataset.collective_of(row)
    assert (c.group, c.ranks_per_node, c.tier, c.bytes, row["dtype"]) == (16, 8, Tier.INTER, 2**30, "fp32")
    assert report.manifest["skipped"][kernels.SINGLE_RANK] == 1


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("fmt, make, kw, match", [
    ("nope", None, {"device": A100}, "unknown format"),
    ("seed", None, {"device": "h100"}, "'h100' names no catalog GPU"),
    ("seed", None, {"device": "../x"}, "names no catalog GPU"),
    ("seed", None, {"device": "h100_sxm5_80gb"}, "nothing to import"),
    ("seed", None, {"device": A100, "node_id": "dgx_h100"}, "holds 'h100_sxm5_80gb'"),
    ("seed", None, {"device": A100, "node_id": "nowhere"}, "unknown node id"),
    ("seed", None, {"device": A100, "gpu_id": "b200"}, "--gpu-id"),
    ("vidur", None, {}, "needs the GPU"),
    ("kernels", None, {"device": "v100_sxm3_32gb"}, "no gpu_id of kernels.csv maps"),
])
def test_bad_options(tmp_path, fmt, make, kw, match):
    root = write_seed(tmp_path / "src")
    with pytest.raises(InputError, match=match):
        run(fmt, [root], tmp_path / "out", **kw)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, text, match", [
    (f"{GPU}_linear1_fp16.csv", "mp,b,l,F_dur(us),B_dur(us)\n1,2,1024,10,20\n", "lacks the columns dim"),
    (f"{GPU}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)\n1,2,1024,x,10,20\n", "not a number"),
    (f"{GPU}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)\n1,2,1024,2048,-10,20\n", "negative time"),
    (f"{GPU}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)\n1,2.5,1024,2048,10,20\n", "whole number"),
    (f"{GPU}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)\n5,2,1024,2048,10,20\n", "not divisible"),
    (f"{GPU}_linear1_fp16.csv", "mp,b,l,dim,F_dur(us),B_dur(us)\n1,2,1024\n", "3 cells"),
    (f"{GPU}_linear1_fp16.csv", "", "is empty"),
    (f"{GPU}_allreduce_fp16_1_4.csv", "shape,nodes,GPUsPerNode,dur(us)\n1024,2,4,10\n", "contradict the file name"),
    ("results.csv", "a,b\n1,2\n", "not a seed file"),
])
def test_bad_seed_files(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        run("seed", [path], tmp_path / "out", device=A100)


def test_bad_vidur_and_kernels_files(tmp_path):
    mlp = tmp_path / "compute" / "a100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    mlp.parent.mkdir(parents=True)
    mlp.write_text("n_head,n_kv_head\n1,2\n")
    with pytest.raises(InputError, match="lacks the columns"):
        run("vidur", [tmp_path / "compute"], tmp_path / "out", device=A100)
    loose = tmp_path / "mlp.csv"
    loose.write_text("x\n1\n")
    with pytest.raises(InputError, match="not a vidur file"):
        run("vidur", [loose], tmp_path / "out", device=A100)
    bad = KERNEL_ROWS[2] | {"time_s": "-1e-3"}
    with pytest.raises(InputError, match="negative time"):
        run("kernels", [write_kernels(tmp_path / "k" / "kernels.csv", [bad])], tmp_path / "out", device="b200")
    (tmp_path / "k2").mkdir()
    (tmp_path / "k2" / "kernels.csv").write_text("source,gpu_id\nx,b200\n")
    with pytest.raises(InputError, match="lacks the columns"):
        run("kernels", [tmp_path / "k2"], tmp_path / "out", device="b200")
    with pytest.raises(InputError, match="no such file"):
        run("kernels", [tmp_path / "missing"], tmp_path / "out", device="b200")


def test_refuses_to_replace_a_directory_it_did_not_write(tmp_path):
    root = write_seed(tmp_path / "src")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="no import wrote"):
        run("seed", [root], precious, device=A100)
    assert (precious / "notes.txt").read_text() == "keep me"


# ---------------------------------------------------------------------------------------------- real data


SEED_DIR = SHARED / "seed-estimate-train-time" / "perlmutter-a100"


@pytest.mark.slow
@pytest.mark.skipif(not SEED_DIR.is_dir(), reason="the shared seed data is not on this machine")
def test_real_seed_folder_matches_the_readme_tables(tmp_path):
    report = run("seed", [SEED_DIR], tmp_path / "seed", device=A100)
    files = {i["file"].removeprefix(f"{GPU}_").removesuffix("_fp16.csv"): i for i in report.manifest["inputs"]}
    readme_rows = {  # README §3.4
        "linear1": 1755, "linear2": 351, "linear3": 1755, "linear4": 1755, "linear_final": 1755, "gelu": 1755,
        "embedding": 1755, "layernorm": 351, "RMSlayernorm": 351, "res_add": 351, "softmax": 1057,
        "ScaledUpperTriangMaskedSoftmax": 306, "baddbmm": 4774, "bmm": 4860, "fillmask": 4567, "flash_atten": 4071,
        "RoPE": 4860, "parallel_cross_entropy_128": 130,
    }
    assert {op: files[op]["rows_read"] for op in readme_rows} == readme_rows
    gemm_ops = ("linear1", "linear2", "linear3", "linear4", "linear_final", "baddbmm", "bmm")
    for op in gemm_ops:  # baddbmm: 30 backwards at more than 3x their forward's rate, the forwards kept
        dropped = files[op]["skipped"].get(physics.BACKWARD_REASON, 0)
        assert dropped == (30 if op == "baddbmm" else 0)
        assert files[op]["rows_written"] == {"gemm/bwd": 2 * (readme_rows[op] - dropped), "gemm/fwd": readme_rows[op]}
    flash = files["flash_atten"]  # README §8.3-8.4: 85 duplicated keys, one impossible backward
    assert flash["duplicates_merged"] == 2 * 85 and flash["skipped"] == {physics.PEAK_REASON: 1}
    assert flash["rows_written"] == {"attention/bwd": 4071 - 85 - 1, "attention/fwd": 4071 - 85}
    assert files["res_add"]["rows_written"] == {"elementwise/fwd": 351}
    nccl = {i["file"]: i for i in report.manifest["inputs"] if "_fp16_" in i["file"]}
    readme_nccl = {"allreduce_fp16_1_2": 1729, "allreduce_large_fp16_1_4": 1777, "allgather_large_fp16_1_4": 1777,
                   "p2p_fp16_2_1": 1995, "allreduce_large_fp16_8_1": 632}  # README §5.3
    for name, n in readme_nccl.items():
        assert nccl[f"{GPU}_{name}.csv"]["rows_read"] == n
    assert all(not i["skipped"] for name, i in nccl.items() if name.count("_") > 3)  # physics drops none
    assert report.manifest["node_id"] == "perlmutter_seed"
    assert json.loads((tmp_path / "seed" / "import.json").read_text()) == report.manifest
