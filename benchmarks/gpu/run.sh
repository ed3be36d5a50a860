#!/usr/bin/env bash
# GPU calibration run (issue 6): sample every kernel family, then time the end-to-end configs.
# Runs on a bare GPU node with torch only (the sampler and measure step import torch + numpy).
#
#   usage: benchmarks/gpu/run.sh DEVICE CONFIGS_DIR OUT_DIR [SAMPLE_MINUTES]
#   GPU:   benchmarks/gpu/run.sh cuda gpu_run/configs "$OUT" 8
#   dry:   benchmarks/gpu/run.sh cpu /tmp/dry/configs /tmp/dry/out 0.5
#
# Interrupted? Rerun the same command: samples resume by key; finished configs are skipped.
set -euo pipefail
device=$1 configs=$2 out=$3 minutes=${4:-8}
export PYTHONUNBUFFERED=1
mkdir -p "$out"
dtypes=$([ "$device" = cuda ] && echo bf16,fp16,fp32 || echo fp32)
python -m llmp.cli sample --device "$device" --out "$out/samples" --minutes "$minutes" --dtypes "$dtypes" --quiet
done_list="$out/measured.done"
touch "$done_list"
for cfg in "$configs"/*.json; do
  name=$(basename "$cfg" .json)
  grep -qx "$name" "$done_list" && continue
  if python -m llmp.measure.step --config "$cfg" --csv "$out/measured.csv"; then
    echo "$name" >> "$done_list"
  else
    echo "FAILED $name (see above); continuing" >&2
  fi
done
echo "samples: $out/samples   end-to-end rows: $out/measured.csv"
