"""Real rows of validation/*.csv (published measurements), copied for the tests.

Each snippet is the header plus a few consecutive rows of one file. In the older snippets the
long ``source_ref`` and ``notes`` cells are shortened; the snippets added with the notes parser
(``FUNCTIONAL_*``, ``NEMO_NEMOTRON_340B``, ``TORCHTITAN_8B``) keep the notes whole, since llmp
now reads them. ``FIRST_LINE`` gives the line of the first row in its file, so row keys match.
"""

from __future__ import annotations

import csv
import io


def edit(snippet: str, column: str, value: str, row: int | None = None) -> str:
    """``snippet`` with ``column`` set to ``value`` in data row ``row`` (1-based), or in every row."""
    lines = snippet.splitlines(keepends=True)
    index = HEADER.strip().split(",").index(column)
    for i in range(1, len(lines)) if row is None else (row,):
        cells = next(csv.reader([lines[i]]))
        cells[index] = value
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(cells)
        lines[i] = buf.getvalue()
    return "".join(lines)

HEADER = (
    'source,source_ref,model_name,params_b,layers,hidden,heads,kv_heads,ffn_hidden,vocab,seq_len,moe_experts,moe_topk,gpu,gpu_id,num_gpus,gpus_per_node,interconnect_intra,interconnect_inter,tp,pp,dp,cp,ep,vp,micro_batch,global_batch,sequence_parallel,recompute,zero_stage_or_fsdp,precision,dtype,metric_name,metric_value,metric_unit,notes' "\n"
)

MPT_70B_H100 = (
    HEADER +
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-70b,64.862437376,80,8192,64,64,32768,50368,2048,,,h100_80gb,h100_sxm5_80gb,512,,,,1,1,512,1,,,8,4096,,full,FSDP FULL_SHARD,amp_bf16 (FSDP mixed_precision=DEFAULT),bf16,tokens_per_sec_per_gpu,1007,tokens/s/GPU,GradAccum=1; GlobalBatchSize(T)=8388608; NumParams=64862437376; ActivationCPUOffload=False' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-70b,64.862437376,80,8192,64,64,32768,50368,2048,,,h100_80gb,h100_sxm5_80gb,512,,,,1,1,512,1,,,8,4096,,full,FSDP FULL_SHARD,amp_bf16 (FSDP mixed_precision=DEFAULT),bf16,tokens_per_sec,515636,tokens/s,GradAccum=1; GlobalBatchSize(T)=8388608; NumParams=64862437376; ActivationCPUOffload=False' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-70b,64.862437376,80,8192,64,64,32768,50368,2048,,,h100_80gb,h100_sxm5_80gb,512,,,,1,1,512,1,,,8,4096,,full,FSDP FULL_SHARD,amp_bf16 (FSDP mixed_precision=DEFAULT),bf16,model_tflops_per_gpu,408,TFLOP/s/GPU,GradAccum=1; GlobalBatchSize(T)=8388608; NumParams=64862437376; ActivationCPUOffload=False' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-70b,64.862437376,80,8192,64,64,32768,50368,2048,,,h100_80gb,h100_sxm5_80gb,512,,,,1,1,512,1,,,8,4096,,full,FSDP FULL_SHARD,amp_bf16 (FSDP mixed_precision=DEFAULT),bf16,mfu_pct,41.25,%,GradAccum=1; GlobalBatchSize(T)=8388608; NumParams=64862437376; ActivationCPUOffload=False' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-70b,64.862437376,80,8192,64,64,32768,50368,2048,,,h100_80gb,h100_sxm5_80gb,512,,,,1,1,512,1,,,8,4096,,full,FSDP FULL_SHARD,amp_bf16 (FSDP mixed_precision=DEFAULT),bf16,hfu_pct,55.0,%,GradAccum=1; GlobalBatchSize(T)=8388608; NumParams=64862437376; ActivationCPUOffload=False' "\n"
)

MPT_7B_A100_40GB = (
    HEADER +
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-7b,6.717579264,32,4096,32,32,16384,50368,16384,,,a100_40gb,a100_sxm4_40gb,8,,,1600 Gbps node-node RoCE (per section title),1,1,8,1,,,1,32,,full,FSDP FULL_SHARD,bf16 (FSDP mixed_precision=PURE),bf16,tokens_per_sec_per_gpu,2249,tokens/s/GPU,GradAccum=4; GlobalBatchSize(T)=524288; NumParams=6717579264; ActivationCPUOffload=False; ' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-7b,6.717579264,32,4096,32,32,16384,50368,16384,,,a100_40gb,a100_sxm4_40gb,8,,,1600 Gbps node-node RoCE (per section title),1,1,8,1,,,1,32,,full,FSDP FULL_SHARD,bf16 (FSDP mixed_precision=PURE),bf16,tokens_per_sec,17998,tokens/s,GradAccum=4; GlobalBatchSize(T)=524288; NumParams=6717579264; ActivationCPUOffload=False; ' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-7b,6.717579264,32,4096,32,32,16384,50368,16384,,,a100_40gb,a100_sxm4_40gb,8,,,1600 Gbps node-node RoCE (per section title),1,1,8,1,,,1,32,,full,FSDP FULL_SHARD,bf16 (FSDP mixed_precision=PURE),bf16,model_tflops_per_gpu,148,TFLOP/s/GPU,GradAccum=4; GlobalBatchSize(T)=524288; NumParams=6717579264; ActivationCPUOffload=False; ' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-7b,6.717579264,32,4096,32,32,16384,50368,16384,,,a100_40gb,a100_sxm4_40gb,8,,,1600 Gbps node-node RoCE (per section title),1,1,8,1,,,1,32,,full,FSDP FULL_SHARD,bf16 (FSDP mixed_precision=PURE),bf16,mfu_pct,47.65,%,GradAccum=4; GlobalBatchSize(T)=524288; NumParams=6717579264; ActivationCPUOffload=False; ' "\n"
    'llm-foundry,mosaicml/llm-foundry@8c8dd48f72:scripts/train/benchmarking/R,MPT-7b,6.717579264,32,4096,32,32,16384,50368,16384,,,a100_40gb,a100_sxm4_40gb,8,,,1600 Gbps node-node RoCE (per section title),1,1,8,1,,,1,32,,full,FSDP FULL_SHARD,bf16 (FSDP mixed_precision=PURE),bf16,hfu_pct,63.53,%,GradAccum=4; GlobalBatchSize(T)=524288; NumParams=6717579264; ActivationCPUOffload=False; ' "\n"
)

SC21_1P7B = (
    HEADER +
    'megatron-sc21-table1,Narayanan et al. 2021 (arXiv 2104.04473) Table 1; numbers fr,GPT 1.7B (Megatron-LM SC21),1.7,24,2304,24,24,9216,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,32,8,,,1,1,32,1,,,16,512,,full,none,fp16 mixed,fp16,achieved_tflops_per_gpu,137,TFLOP/s/GPU,README image lists model-parallel size 1 (=TP*PP); NNODES=4 in run script; DDP-impl=torch;' "\n"
    'megatron-sc21-table1,Narayanan et al. 2021 (arXiv 2104.04473) Table 1; numbers fr,GPT 1.7B (Megatron-LM SC21),1.7,24,2304,24,24,9216,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,32,8,,,1,1,32,1,,,16,512,,full,none,fp16 mixed,fp16,pct_of_peak,44,%,README image lists model-parallel size 1 (=TP*PP); NNODES=4 in run script; DDP-impl=torch;' "\n"
    'megatron-sc21-table1,Narayanan et al. 2021 (arXiv 2104.04473) Table 1; numbers fr,GPT 1.7B (Megatron-LM SC21),1.7,24,2304,24,24,9216,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,32,8,,,1,1,32,1,,,16,512,,full,none,fp16 mixed,fp16,aggregate_pflops,4.4,PFLOP/s,README image lists model-parallel size 1 (=TP*PP); NNODES=4 in run script; DDP-impl=torch;' "\n"
)

SC21_530B = (
    HEADER +
    'megatron-sc21-table1,Narayanan et al. 2021 (arXiv 2104.04473) Table 1; numbers fr,GPT 530B (Megatron-LM SC21),529.6,105,20480,128,128,81920,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,2520,8,,,8,35,9,1,,3,1,2520,,full,none,fp16 mixed,fp16,achieved_tflops_per_gpu,163,TFLOP/s/GPU,README image lists model-parallel size 280 (=TP*PP); NNODES=315 in run script; DDP-impl=lo' "\n"
    'megatron-sc21-table1,Narayanan et al. 2021 (arXiv 2104.04473) Table 1; numbers fr,GPT 530B (Megatron-LM SC21),529.6,105,20480,128,128,81920,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,2520,8,,,8,35,9,1,,3,1,2520,,full,none,fp16 mixed,fp16,pct_of_peak,52,%,README image lists model-parallel size 280 (=TP*PP); NNODES=315 in run script; DDP-impl=lo' "\n"
    'megatron-sc21-table1,Narayanan et al. 2021 (arXiv 2104.04473) Table 1; numbers fr,GPT 530B (Megatron-LM SC21),529.6,105,20480,128,128,81920,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,2520,8,,,8,35,9,1,,3,1,2520,,full,none,fp16 mixed,fp16,aggregate_pflops,410.2,PFLOP/s,README image lists model-parallel size 280 (=TP*PP); NNODES=315 in run script; DDP-impl=lo' "\n"
)

SC21_ZERO3_175B = (
    HEADER +
    'megatron-sc21-table2,Narayanan et al. 2021 (arXiv 2104.04473) Table 2 \'Comparison,GPT 174.6B (Megatron-LM SC21 Table 2),174.6,96,12288,96,96,49152,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,384,8,,,1,1,384,,,,4,1536,,,ZeRO-3 (DeepSpeed),fp16 mixed,fp16,achieved_tflops_per_gpu,144,TFLOP/s/GPU,"Table 2 scheme \'ZeRO-3 without Model Parallelism\', model-parallel size 1; arch: 174.6B = G"' "\n"
    'megatron-sc21-table2,Narayanan et al. 2021 (arXiv 2104.04473) Table 2 \'Comparison,GPT 174.6B (Megatron-LM SC21 Table 2),174.6,96,12288,96,96,49152,51200,2048,,,A100 80GB (Selene DGX A100),a100_sxm4_80gb,384,8,,,1,1,384,,,,4,1536,,,ZeRO-3 (DeepSpeed),fp16 mixed,fp16,training_days_300B_tokens,90,days,"Table 2 scheme \'ZeRO-3 without Model Parallelism\', model-parallel size 1; arch: 174.6B = G"' "\n"
)

README2020_V100_1GPU = (
    HEADER +
    'megatron-lm-readme-2020,NVIDIA/Megatron-LM@5281919420 (2020-09-11) images/tables.tex,GPT-2 style 1B (Megatron-LM 2020),1.16,24,1920,15,15,,51200,1024,,,V100 (DGX-2),v100_sxm3_32gb,1,,,,1,1,1,,,,,8,,,,mixed precision (type not stated),,iteration_time_ms,1121,ms,"tp = ""Model Parallel Partitions"" (intra-layer/tensor MP, README at that commit); scaling %"' "\n"
    'megatron-lm-readme-2020,NVIDIA/Megatron-LM@5281919420 (2020-09-11) images/tables.tex,GPT-2 style 1B (Megatron-LM 2020),1.16,24,1920,15,15,,51200,1024,,,V100 (DGX-2),v100_sxm3_32gb,1,,,,1,1,1,,,,,8,,,,mixed precision (type not stated),,tflops_per_gpu,71.9,TFLOP/s/GPU,"tp = ""Model Parallel Partitions"" (intra-layer/tensor MP, README at that commit); scaling %"' "\n"
    'megatron-lm-readme-2020,NVIDIA/Megatron-LM@5281919420 (2020-09-11) images/tables.tex,GPT-2 style 1B (Megatron-LM 2020),1.16,24,1920,15,15,,51200,1024,,,V100 (DGX-2),v100_sxm3_32gb,1,,,,1,1,1,,,,,8,,,,mixed precision (type not stated),,scaling_efficiency_pct,100.0,%,"tp = ""Model Parallel Partitions"" (intra-layer/tensor MP, README at that commit); scaling %"' "\n"
)

README2020_8B_1024 = (
    HEADER +
    'megatron-lm-readme-2020,NVIDIA/Megatron-LM@5281919420 (2020-09-11) images/tables.tex,GPT-2 style 8B (Megatron-LM 2020),8.67,42,4096,32,32,,51200,1024,,,A100 (DGX-A100),a100_sxm4_80gb,1024,,,,8,1,128,,,,,2048,,,,mixed precision (type not stated),,iteration_time_ms,1380,ms,"tp = ""Model Parallel Partitions"" (intra-layer/tensor MP, README at that commit); scaling %"' "\n"
    'megatron-lm-readme-2020,NVIDIA/Megatron-LM@5281919420 (2020-09-11) images/tables.tex,GPT-2 style 8B (Megatron-LM 2020),8.67,42,4096,32,32,,51200,1024,,,A100 (DGX-A100),a100_sxm4_80gb,1024,,,,8,1,128,,,,,2048,,,,mixed precision (type not stated),,tflops_per_gpu,106.5,TFLOP/s/GPU,"tp = ""Model Parallel Partitions"" (intra-layer/tensor MP, README at that commit); scaling %"' "\n"
    'megatron-lm-readme-2020,NVIDIA/Megatron-LM@5281919420 (2020-09-11) images/tables.tex,GPT-2 style 8B (Megatron-LM 2020),8.67,42,4096,32,32,,51200,1024,,,A100 (DGX-A100),a100_sxm4_80gb,1024,,,,8,1,128,,,,,2048,,,,mixed precision (type not stated),,scaling_efficiency_pct,72.7,%,"tp = ""Model Parallel Partitions"" (intra-layer/tensor MP, README at that commit); scaling %"' "\n"
)

NEMO_LLAMA2_70B = (
    HEADER +
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",LLAMA2-70B,,80,8192,64,8,28672,32000,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,4,4,4,1,,20,1,128,,,,FP8,fp8,tokens_per_sec_per_gpu,1728,tokens/s/GPU,section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived' "\n"
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",LLAMA2-70B,,80,8192,64,8,28672,32000,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,4,4,4,1,,20,1,128,,,,FP8,fp8,model_tflops_per_gpu,768,TFLOP/s/GPU,section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived' "\n"
)

NEMO_GPT3_5B = (
    HEADER +
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",GPT3-5B,,24,4096,32,,16384,,2048,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,64,1,,1,4,2048,,,,FP8,fp8,tokens_per_sec_per_gpu,23406,tokens/s/GPU,section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived' "\n"
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",GPT3-5B,,24,4096,32,,16384,,2048,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,64,1,,1,4,2048,,,,FP8,fp8,model_tflops_per_gpu,765,TFLOP/s/GPU,section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived' "\n"
)

NEMO_NEMOTRON_8B = (
    HEADER +
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",Nemotron-8B,,32,4096,32,,16384,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,2,1,32,1,,1,4,256,,,,FP8,fp8,tokens_per_sec_per_gpu,12507,tokens/s/GPU,section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived' "\n"
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",Nemotron-8B,,32,4096,32,,16384,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,2,1,32,1,,1,4,256,,,,FP8,fp8,model_tflops_per_gpu,643,TFLOP/s/GPU,section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived' "\n"
)

NEMO_LORA = (
    HEADER +
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",LLAMA2-7B [LoRA],,32,4096,32,32,11008,32000,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,8,8,,,1,1,8,1,,,1,32,,,,FP8,fp8,tokens_per_sec_per_gpu,24824,tokens/s/GPU,section Finetuning; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived ' "\n"
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",LLAMA2-7B [LoRA],,32,4096,32,32,11008,32000,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,8,8,,,1,1,8,1,,,1,32,,,,FP8,fp8,model_tflops_per_gpu,663,TFLOP/s/GPU,section Finetuning; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived ' "\n"
)

NEMO_DPO = edit(NEMO_LORA, "model_name", "LLAMA2-7B [DPO]")
"""A preference-optimisation row (the LoRA row retagged): a fine-tuning task llmp refuses."""

AUTOMODEL_NEMOTRON_V3 = (
    HEADER +
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,Nemotron V3 Super 120B (26.02),,,,,,,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,64,1,64,,2,512,,,FSDP2 (FSDP=64),BF16,bf16,iteration_time_s,7.286,s,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=2, GA=4; kernel opti"' "\n"
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,Nemotron V3 Super 120B (26.02),,,,,,,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,64,1,64,,2,512,,,FSDP2 (FSDP=64),BF16,bf16,model_tflops_per_gpu,334,TFLOP/s/GPU,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=2, GA=4; kernel opti"' "\n"
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,Nemotron V3 Super 120B (26.02),,,,,,,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,64,1,64,,2,512,,,FSDP2 (FSDP=64),BF16,bf16,tokens_per_sec_per_gpu,4497,tokens/s/GPU,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=2, GA=4; kernel opti"' "\n"
)

AUTOMODEL_DEEPSEEK = (
    HEADER +
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,DeepSeek V3 671B,,61,7168,128,,18432,129280,4096,256,8,H100 80GB (DGX-H100),h100_sxm5_80gb,1024,8,,,1,4,256,1,64,8,1,8192,,,FSDP2 (FSDP=256),BF16,bf16,iteration_time_s,37.87,s,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=8, GA=4; kernel opti"' "\n"
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,DeepSeek V3 671B,,61,7168,128,,18432,129280,4096,256,8,H100 80GB (DGX-H100),h100_sxm5_80gb,1024,8,,,1,4,256,1,64,8,1,8192,,,FSDP2 (FSDP=256),BF16,bf16,model_tflops_per_gpu,216,TFLOP/s/GPU,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=8, GA=4; kernel opti"' "\n"
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,DeepSeek V3 671B,,61,7168,128,,18432,129280,4096,256,8,H100 80GB (DGX-H100),h100_sxm5_80gb,1024,8,,,1,4,256,1,64,8,1,8192,,,FSDP2 (FSDP=256),BF16,bf16,tokens_per_sec_per_gpu,865,tokens/s/GPU,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=8, GA=4; kernel opti"' "\n"
)

AUTOMODEL_LLAMA3_70B = (
    HEADER +
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,Llama3 70B,,80,8192,64,8,28672,128256,8192,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,32,2,,,1,128,,,FSDP2 (FSDP=32),BF16,bf16,iteration_time_s,18.90,s,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=1, GA=4; kernel opti"' "\n"
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,Llama3 70B,,80,8192,64,8,28672,128256,8192,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,32,2,,,1,128,,,FSDP2 (FSDP=32),BF16,bf16,model_tflops_per_gpu,389,TFLOP/s/GPU,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=1, GA=4; kernel opti"' "\n"
    'nemo-automodel-perf-summary,NVIDIA-NeMo/Automodel@36044ad3d1:docs/performance-summary.md,Llama3 70B,,80,8192,64,8,28672,128256,8192,,,H100 80GB (DGX-H100),h100_sxm5_80gb,64,8,,,1,1,32,2,,,1,128,,,FSDP2 (FSDP=32),BF16,bf16,tokens_per_sec_per_gpu,866.77,tokens/s/GPU,"section \'Pre-Training Performance\'; LBS(local batch per GPU per step)=1, GA=4; kernel opti"' "\n"
)

MISC_BLOOM = (
    HEADER +
    'bloom-176b-tr11,bigscience-workshop/bigscience@00327f8c35:train/tr11-176B-ml,BLOOM-176B,176,70,14336,112,112,57344,250880,2048,,,A100 80GB,a100_sxm4_80gb,384,8,"NVLink (README: ""NVLink 4 inter-gpu connects"")",Omni-Path Architecture (4 OPA links per node),4,12,8,,,,2,2048,,full,ZeRO-1 (DeepSpeed BF16_Optimizer),bf16,bf16,iteration_time_s,104.70,s,log line at iteration 85376 (end of first epoch): \'elapsed time per iteration (s): 104.70 ' "\n"
    'bloom-176b-tr11,bigscience-workshop/bigscience@00327f8c35:train/tr11-176B-ml,BLOOM-176B,176,70,14336,112,112,57344,250880,2048,,,A100 80GB,a100_sxm4_80gb,384,8,"NVLink (README: ""NVLink 4 inter-gpu connects"")",Omni-Path Architecture (4 OPA links per node),4,12,8,,,,2,2048,,full,ZeRO-1 (DeepSpeed BF16_Optimizer),bf16,bf16,samples_per_sec,19.561,samples/s,log line at iteration 85376 (end of first epoch): \'elapsed time per iteration (s): 104.70 ' "\n"
    'bloom-176b-tr11,bigscience-workshop/bigscience@00327f8c35:train/tr11-176B-ml,BLOOM-176B,176,70,14336,112,112,57344,250880,2048,,,A100 80GB,a100_sxm4_80gb,384,8,"NVLink (README: ""NVLink 4 inter-gpu connects"")",Omni-Path Architecture (4 OPA links per node),4,12,8,,,,2,2048,,full,ZeRO-1 (DeepSpeed BF16_Optimizer),bf16,bf16,hw_tflops_per_gpu,149.77,TFLOP/s/GPU,log line at iteration 85376 (end of first epoch): \'elapsed time per iteration (s): 104.70 ' "\n"
)

MISC_MTNLG = (
    HEADER +
    'mt-nlg-530b,Smith et al. 2022 MT-NLG (arXiv 2201.11990) Sec. 2.4 as quot,Megatron-Turing NLG 530B,530,105,20480,128,128,81920,50272,2048,,,A100 (DGX A100),a100_sxm4_80gb,2240,8,,,8,35,8,,,,,1920,,,,,,iteration_time_s,60.1,s,"280 DGX A100 servers; quoted: \'latency per iteration observed is 60.1, 50.2, and 44.4 seco"' "\n"
    'mt-nlg-530b,Smith et al. 2022 MT-NLG (arXiv 2201.11990) Sec. 2.4 as quot,Megatron-Turing NLG 530B,530,105,20480,128,128,81920,50272,2048,,,A100 (DGX A100),a100_sxm4_80gb,2240,8,,,8,35,8,,,,,1920,,,,,,achieved_tflops_per_gpu,126,TFLOP/s/GPU,"280 DGX A100 servers; quoted: \'latency per iteration observed is 60.1, 50.2, and 44.4 seco"' "\n"
)

MISC_LLAMA65B = (
    HEADER +
    "llama1-65b,Touvron et al. 2023 LLaMA (arXiv 2302.13971) as quoted in cl,LLaMA 65B,65.2,80,8192,64,64,22016,32000,2048,,,A100 80GB,a100_sxm4_80gb,2048,,,,,,,,,,,,,,,,,tokens_per_sec_per_gpu,380,tokens/s/GPU,quoted: 'code processes around 380 tokens/sec/GPU on 2048 A100 GPU with 80GB of RAM' (appr" "\n"
)

MISC_LLAMA31 = (
    HEADER +
    'llama3-405b-pretrain,"glennklockwood.com/garden/llama-3.1 (pages corpus), table of",Llama 3.1 405B (pre-training),405,126,16384,128,8,53248,128256,,,,"H100 80GB (700W, Grand Teton)",h100_sxm5_80gb,8192,8,,,8,16,64,1,,,,,,,FSDP (DP dimension),bf16,bf16,model_tflops_per_gpu,430,TFLOP/s/GPU,tokens/batch 16M; dp derived = GPUs/(TP*CP*PP); seq_len not given by this source (CP=16 ro' "\n"
)

FUNCTIONAL_7B_H100 = (
    HEADER +
    'megatron-lm-functional-tests,NVIDIA/Megatron-LM@d98e8a64dd:tests/functional_tests/test_ca,GPT 32L h4096 (Megatron CI test gpt3_7b_tp1_pp4_memory_speed),,32,4096,32,8,16384,131073,8192,,,"NVIDIA H100 (DGX H100, Megatron-LM CI platform dgx_h100)",h100_sxm5_80gb,8,8,,,1,4,2,1,,8,1,8,no,none,Megatron distributed optimizer (ZeRO-1-like),BF16 mixed,bf16,iteration_time_s,1.15013,s,"Megatron-LM functional test \'gpt3_7b_tp1_pp4_memory_speed\' (dev container, CI platform dgx_h100); world size 8 = recipe h100/gpt.yaml spec nodes 1 x gpus 8; metric = median of the golden \'iteration-time\' values (Megatron \'elapsed time per iteration\', averaged over --log-interval 2 steps) after dropping the first 2 logged values as warm-up: 10 values from step 6 to 24, min 1.1486 max 1.1525 s; --train-iters 25; GA 4 (derived GBS/(MBS*DP)); dp derived = world/(TP*PP*CP); GPT (LayerNorm, GeLU MLP); ffn derived (Megatron default 4*hidden); vocab NullTokenizer --vocab-size 131073, padded to a multiple of 128*TP = 131200; flags: --transformer-impl=transformer_engine --deterministic-mode --overlap-grad-reduce --overlap-param-gather --no-gradient-accumulation-fusion --untie-embeddings-and-output-weights; env: CUDA_DEVICE_MAX_CONNECTIONS=1 NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 NCCL_ALGO=Ring CUBLAS_WORKSPACE_CONFIG=:4096:8; golden mem-max-allocated-bytes max 56.55 GiB (one rank, as logged)"' "\n"
)

FUNCTIONAL_LOCAL_IMPL = (
    HEADER +
    'megatron-lm-functional-tests,NVIDIA/Megatron-LM@d98e8a64dd:tests/functional_tests/test_ca,GPT 12L h512 (Megatron CI test gpt3_mcore_tp1_pp2),,12,512,8,8,2048,50257,1024,,,"NVIDIA A100 (DGX A100, Megatron-LM CI platform dgx_a100; 40/80GB not stated)",a100_sxm4_80gb,8,8,,,1,2,4,1,,,4,32,no,none,none (Megatron DDP),BF16 mixed,bf16,iteration_time_s,0.12981,s,"Megatron-LM functional test \'gpt3_mcore_tp1_pp2\' (dev container, CI platform dgx_a100); world size 8 = recipe h100/gpt.yaml spec nodes 1 x gpus 8 (the recipe\'s current products do not list this env/platform; the golden file is older, world size taken from the only recipe that runs this test case); metric = median of the golden \'iteration-time\' values (Megatron \'elapsed time per iteration\', averaged over --log-interval 1 steps) after dropping the first 2 logged values as warm-up: 9 values from step 10 to 50, min 0.1281 max 0.1325 s; --train-iters 50; GA 2 (derived GBS/(MBS*DP)); dp derived = world/(TP*PP*CP); GPT (LayerNorm, GeLU MLP); ffn derived (Megatron default 4*hidden); vocab GPT-2 BPE vocab.json (50257 tokens), padded to a multiple of 128*TP = 50304; flags: --transformer-impl=local --deterministic-mode --no-gradient-accumulation-fusion --apply-query-key-layer-scaling; env: CUDA_DEVICE_MAX_CONNECTIONS=1 NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 NCCL_ALGO=Ring CUBLAS_WORKSPACE_CONFIG=:4096:8; tiny CI model: launch/synchronisation overhead dominates; deterministic-mode / NCCL_ALGO=Ring / unfused attention settings slow some cases deliberately; golden mem-max-allocated-bytes max 3.38 GiB (one rank, as logged)"' "\n"
)

FUNCTIONAL_UNEVEN = (
    HEADER +
    'megatron-lm-functional-tests,NVIDIA/Megatron-LM@d98e8a64dd:tests/functional_tests/test_ca,GPT 12L h512 (Megatron CI test gpt3_mcore_te_tp1_pp4_vp1_uneven_pipeline),,12,512,8,8,2048,50257,1024,,,"NVIDIA A100 (DGX A100, Megatron-LM CI platform dgx_a100; 40/80GB not stated)",a100_sxm4_80gb,8,8,,,1,4,2,1,,,4,32,no,none,none (Megatron DDP),BF16 mixed,bf16,iteration_time_s,0.19545,s,"Megatron-LM functional test \'gpt3_mcore_te_tp1_pp4_vp1_uneven_pipeline\' (dev container, CI platform dgx_a100); world size 8 = recipe h100/gpt.yaml spec nodes 1 x gpus 8 (the recipe\'s current products do not list this env/platform; the golden file is older, world size taken from the only recipe that runs this test case); metric = median of the golden \'iteration-time\' values (Megatron \'elapsed time per iteration\', averaged over --log-interval 1 steps) after dropping the first 2 logged values as warm-up: 9 values from step 10 to 50, min 0.1946 max 0.2030 s; --train-iters 50; GA 4 (derived GBS/(MBS*DP)); dp derived = world/(TP*PP*CP); GPT (LayerNorm, GeLU MLP); ffn derived (Megatron default 4*hidden); vocab GPT-2 BPE vocab.json (50257 tokens), padded to a multiple of 128*TP = 50304; flags: --transformer-impl=transformer_engine --attention-backend=unfused --deterministic-mode --no-gradient-accumulation-fusion --decoder-first-pipeline-num-layers=2 --decoder-last-pipeline-num-layers=2 --untie-embeddings-and-output-weights; env: CUDA_DEVICE_MAX_CONNECTIONS=1 NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 NCCL_ALGO=Ring CUBLAS_WORKSPACE_CONFIG=:4096:8; tiny CI model: launch/synchronisation overhead dominates; deterministic-mode / NCCL_ALGO=Ring / unfused attention settings slow some cases deliberately; golden mem-max-allocated-bytes max 2.22 GiB (one rank, as logged)"' "\n"
)

NEMO_NEMOTRON_340B = (
    HEADER +
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",Nemotron-340B,,96,18432,96,8,73728,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,128,8,,,8,8,2,1,,12,1,32,,,,FP8,fp8,tokens_per_sec_per_gpu,326,tokens/s/GPU,"section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived = GPUs/(TP*PP*CP); arch from NVIDIA/NeMo@8cfedd7203 nemo/collections/llm/gpt/model/{base,nemotron}.py config class of same name (NeMo 2.0; assumed identical to 24.07 recipe)"' "\n"
    'nemo-24.07-perf-summary,"NVIDIA/NeMo@d31653f792^ (last version before removal, commit",Nemotron-340B,,96,18432,96,8,73728,,4096,,,H100 80GB (DGX-H100),h100_sxm5_80gb,128,8,,,8,8,2,1,,12,1,32,,,,FP8,fp8,model_tflops_per_gpu,686,TFLOP/s/GPU,"section Pretraining; container NeMo 24.07; DGX-H100; FP8 precision (page text); dp derived = GPUs/(TP*PP*CP); arch from NVIDIA/NeMo@8cfedd7203 nemo/collections/llm/gpt/model/{base,nemotron}.py config class of same name (NeMo 2.0; assumed identical to 24.07 recipe)"' "\n"
)

TORCHTITAN_8B = (
    HEADER +
    'torchtitan-llama3-h100-202412,pytorch/torchtitan@31a17bfdb7:benchmarks/llama3_h100_202412_,Llama 3.1 8B (torchtitan: FSDP),8.03,32,4096,32,8,14336,128256,8192,,,"H100 SXM 96GB HBM2e (500 W, Grand Teton)",h100_sxm_96gb_hbm2e_500w,8,8,NVLink (fully connected),"backend RDMA network, 400 Gb/s per GPU",1,1,8,1,,,2,16,,selective (op),FSDP2 (FSDP=8),"BF16 mixed (FSDP2 param bf16, reduce fp32)",bf16,tokens_per_sec_per_gpu,5762,tokens/s/GPU,"Table 1: technique \'FSDP\'; local batch size 2, global batch 16 = local x FSDP degree 8; selective (op) activation checkpointing (torchtitan llama3_8b.toml: selective_ac_option \'op\'); eager mode; hardware per the page: Grand Teton hosts, 8 H100 SXM 96GB HBM2e per host, 500 W power limit, NVLink within the host, backend RDMA network 400 Gb/s per GPU; TPS/GPU logged every 10 iterations and read at iteration 90; Memory(GiB) is torchtitan\'s logged \'memory\', torch.cuda max_reserved (metrics.py: device_mem_stats.max_reserved_gib), max over GPUs; versions torch 1963fc8 (2024-12-23), torchao eab345c, torchtitan 9dec370 (2024-12-26); arch from torchtitan llama3 8B config (dim 4096, 32 layers, 32 heads / 8 KV, ffn_dim_multiplier 1.3 -> 14336, tiktoken vocab 128256)"' "\n"
    'torchtitan-llama3-h100-202412,pytorch/torchtitan@31a17bfdb7:benchmarks/llama3_h100_202412_,Llama 3.1 8B (torchtitan: FSDP),8.03,32,4096,32,8,14336,128256,8192,,,"H100 SXM 96GB HBM2e (500 W, Grand Teton)",h100_sxm_96gb_hbm2e_500w,8,8,NVLink (fully connected),"backend RDMA network, 400 Gb/s per GPU",1,1,8,1,,,2,16,,selective (op),FSDP2 (FSDP=8),"BF16 mixed (FSDP2 param bf16, reduce fp32)",bf16,mem_max_reserved_gib,82.4,GiB,"Table 1: technique \'FSDP\'; local batch size 2, global batch 16 = local x FSDP degree 8; selective (op) activation checkpointing (torchtitan llama3_8b.toml: selective_ac_option \'op\'); eager mode; hardware per the page: Grand Teton hosts, 8 H100 SXM 96GB HBM2e per host, 500 W power limit, NVLink within the host, backend RDMA network 400 Gb/s per GPU; TPS/GPU logged every 10 iterations and read at iteration 90; Memory(GiB) is torchtitan\'s logged \'memory\', torch.cuda max_reserved (metrics.py: device_mem_stats.max_reserved_gib), max over GPUs; versions torch 1963fc8 (2024-12-23), torchao eab345c, torchtitan 9dec370 (2024-12-26); arch from torchtitan llama3 8B config (dim 4096, 32 layers, 32 heads / 8 KV, ffn_dim_multiplier 1.3 -> 14336, tiktoken vocab 128256)"' "\n"
)

MISC_LLAMA3_405B = (
    HEADER +
    'megatron-lm-examples-llama,NVIDIA/Megatron-LM@d98e8a64dd:examples/llama/README.md section \'FP8 Performance\' (last changed bd32927e7e 2025-12-09),LLAMA3-405B,405,126,16384,128,8,53248,128256,8192,,,H100 (inferred: table does not name the GPU; example script is train_llama3_8b_h100_fp8.sh and configs follow NeMo H100 performance scripts),h100_sxm5_80gb,1024,,,,8,8,8,2,1,8,1,512,,,,FP8,fp8,tokens_per_sec_per_gpu,315,tokens/s/GPU,"GA=64; dp derived; README key training parameters for the 8B script list FP8 format: hybrid; arch from public Llama 3.1 405B config (126L, d16384, 128H/8KV, ffn53248, vocab128256)"' "\n"
    'megatron-lm-examples-llama,NVIDIA/Megatron-LM@d98e8a64dd:examples/llama/README.md section \'FP8 Performance\' (last changed bd32927e7e 2025-12-09),LLAMA3-405B,405,126,16384,128,8,53248,128256,8192,,,H100 (inferred: table does not name the GPU; example script is train_llama3_8b_h100_fp8.sh and configs follow NeMo H100 performance scripts),h100_sxm5_80gb,1024,,,,8,8,8,2,1,8,1,512,,,,FP8,fp8,model_tflops_per_gpu,834,TFLOP/s/GPU,"GA=64; dp derived; README key training parameters for the 8B script list FP8 format: hybrid; arch from public Llama 3.1 405B config (126L, d16384, 128H/8KV, ffn53248, vocab128256)"' "\n"
)

FUNCTIONAL_ACCOUNT = (
    HEADER +
    'megatron-lm-functional-tests,NVIDIA/Megatron-LM@d98e8a64dd:tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split/golden_values_dev_dgx_a100.json (iteration-time); config tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split/model_config.yaml; recipe tests/test_utils/recipes/h100/gpt.yaml,GPT 6L h512 (Megatron CI test gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split),,6,512,8,8,2048,50257,1024,,,"NVIDIA A100 (DGX A100, Megatron-LM CI platform dgx_a100; 40/80GB not stated)",a100_sxm4_80gb,8,8,,,1,4,2,1,,2,4,32,no,none,none (Megatron DDP),BF16 mixed,bf16,iteration_time_s,0.12755,s,"Megatron-LM functional test \'gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split\' (dev container, CI platform dgx_a100); world size 8 = recipe h100/gpt.yaml spec nodes 1 x gpus 8 (the recipe\'s current products do not list this env/platform; the golden file is older, world size taken from the only recipe that runs this test case); metric = median of the golden \'iteration-time\' values (Megatron \'elapsed time per iteration\', averaged over --log-interval 1 steps) after dropping the first 2 logged values as warm-up: 9 values from step 10 to 50, min 0.1251 max 0.1329 s; --train-iters 50; GA 4 (derived GBS/(MBS*DP)); dp derived = world/(TP*PP*CP); GPT (LayerNorm, GeLU MLP); ffn derived (Megatron default 4*hidden); vocab GPT-2 BPE vocab.json (50257 tokens), padded to a multiple of 128*TP = 50304; flags: --transformer-impl=transformer_engine --attention-backend=unfused --deterministic-mode --no-gradient-accumulation-fusion --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split --untie-embeddings-and-output-weights; env: CUDA_DEVICE_MAX_CONNECTIONS=1 NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 NCCL_ALGO=Ring CUBLAS_WORKSPACE_CONFIG=:4096:8; tiny CI model: launch/synchronisation overhead dominates; deterministic-mode / NCCL_ALGO=Ring / unfused attention settings slow some cases deliberately; golden mem-max-allocated-bytes max 2.62 GiB (one rank, as logged)"' "\n"
)

FUNCTIONAL_TUNABLE = (
    HEADER +
    'megatron-lm-functional-tests,NVIDIA/Megatron-LM@d98e8a64dd:tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap/golden_values_dev_dgx_a100.json (iteration-time); config tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap/model_config.yaml; recipe tests/test_utils/recipes/h100/gpt.yaml,GPT 12L h512 (Megatron CI test gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap),,12,512,8,8,2048,50257,1024,,,"NVIDIA A100 (DGX A100, Megatron-LM CI platform dgx_a100; 40/80GB not stated)",a100_sxm4_80gb,8,8,,,1,4,2,1,,3,4,40,no,none,none (Megatron DDP),BF16 mixed,bf16,iteration_time_s,0.46793,s,"Megatron-LM functional test \'gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap\' (dev container, CI platform dgx_a100); world size 8 = recipe h100/gpt.yaml spec nodes 1 x gpus 8 (the recipe\'s current products do not list this env/platform; the golden file is older, world size taken from the only recipe that runs this test case); metric = median of the golden \'iteration-time\' values (Megatron \'elapsed time per iteration\', averaged over --log-interval 1 steps) after dropping the first 2 logged values as warm-up: 9 values from step 10 to 50, min 0.4603 max 0.4731 s; --train-iters 50; GA 5 (derived GBS/(MBS*DP)); dp derived = world/(TP*PP*CP); GPT (LayerNorm, GeLU MLP); ffn derived (Megatron default 4*hidden); vocab GPT-2 BPE vocab.json (50257 tokens), padded to a multiple of 128*TP = 50304; flags: --transformer-impl=transformer_engine --attention-backend=unfused --deterministic-mode --no-gradient-accumulation-fusion --microbatch-group-size-per-virtual-pipeline-stage=5; env: CUDA_DEVICE_MAX_CONNECTIONS=1 NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 NCCL_ALGO=Ring CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; tiny CI model: launch/synchronisation overhead dominates; deterministic-mode / NCCL_ALGO=Ring / unfused attention settings slow some cases deliberately; golden mem-max-allocated-bytes max 4.28 GiB (one rank, as logged)"' "\n"
)

FIRST_LINE = {
    "MPT_70B_H100": ("llm_foundry_mpt.csv", 2),
    "MPT_7B_A100_40GB": ("llm_foundry_mpt.csv", 757),
    "SC21_1P7B": ("megatron_sc21.csv", 2),
    "SC21_530B": ("megatron_sc21.csv", 26),
    "SC21_ZERO3_175B": ("megatron_sc21.csv", 32),
    "README2020_V100_1GPU": ("megatron_lm_readme_2020.csv", 2),
    "README2020_8B_1024": ("megatron_lm_readme_2020.csv", 35),
    "NEMO_LLAMA2_70B": ("nemo_24_07_perf_summary.csv", 14),
    "NEMO_GPT3_5B": ("nemo_24_07_perf_summary.csv", 2),
    "NEMO_NEMOTRON_8B": ("nemo_24_07_perf_summary.csv", 16),
    "NEMO_LORA": ("nemo_24_07_perf_summary.csv", 32),
    "AUTOMODEL_NEMOTRON_V3": ("nemo_automodel_perf_summary.csv", 2),
    "AUTOMODEL_DEEPSEEK": ("nemo_automodel_perf_summary.csv", 11),
    "AUTOMODEL_LLAMA3_70B": ("nemo_automodel_perf_summary.csv", 29),
    "MISC_BLOOM": ("misc_published_runs.csv", 5),
    "MISC_MTNLG": ("misc_published_runs.csv", 8),
    "MISC_LLAMA65B": ("misc_published_runs.csv", 14),
    "MISC_LLAMA31": ("misc_published_runs.csv", 16),
    "FUNCTIONAL_7B_H100": ("megatron_lm_functional_tests.csv", 3),
    "FUNCTIONAL_LOCAL_IMPL": ("megatron_lm_functional_tests.csv", 103),
    "FUNCTIONAL_UNEVEN": ("megatron_lm_functional_tests.csv", 43),
    "NEMO_NEMOTRON_340B": ("nemo_24_07_perf_summary.csv", 20),
    "TORCHTITAN_8B": ("torchtitan_llama3_h100.csv", 2),
    "MISC_LLAMA3_405B": ("misc_published_runs.csv", 23),
    "FUNCTIONAL_ACCOUNT": ("megatron_lm_functional_tests.csv", 48),
    "FUNCTIONAL_TUNABLE": ("megatron_lm_functional_tests.csv", 38),
}
