#!/bin/bash
# megaton train with --fp8-format on the CPU (the FP8 GEMMs emulated from the host rounding, ops/fp8/fp8_linear.h):
# the loss curve of 30 iterations decreases and stays near the 32-bit run's; TP=2 and DP=2 stay near the one-rank FP8
# run (the scales' agreement across ranks is megaton_mpi_tests' Fp8ScalingParallel.*); the tensorwise recipe and
# --no-fp8-wgrad train too; bad recipe flags and --fp8-format with --save are refused naming the flags.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 8 --train-iters 30)
fp8=(--fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max)
run() {  # name np flags...
  local name=$1 np=$2
  shift 2
  run_train "$np" "${common[@]}" "$@" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; exit 1; }
}
run ref 1
run fp8 1 "${fp8[@]}"
echo -n "FP8: "
loss_decreases "$work/fp8.jsonl"
echo -n "FP8 against 32 bits: "
compare_losses "$work/ref.jsonl" "$work/fp8.jsonl" 0.01
run fp8_tp2 2 "${fp8[@]}" --tensor-model-parallel-size 2
echo -n "FP8 TP=2 against TP=1: "
compare_losses "$work/fp8.jsonl" "$work/fp8_tp2.jsonl" 2e-3
run fp8_dp2 2 "${fp8[@]}"
echo -n "FP8 DP=2 against DP=1: "
compare_losses "$work/fp8.jsonl" "$work/fp8_dp2.jsonl" 2e-3
run tensorwise 1 --fp8-format e4m3 --fp8-recipe tensorwise --no-fp8-wgrad
echo -n "tensorwise, --no-fp8-wgrad: "
loss_decreases "$work/tensorwise.jsonl"
refused() {  # flags... : a usage error naming the first flag
  if "$MEGATON" train "${common[@]}" "$@" > "$work/bad.log" 2>&1; then echo "accepted: $*"; exit 1; fi
  grep -q -- "$1" "$work/bad.log" || { echo "no mention of $1:"; cat "$work/bad.log"; exit 1; }
}
refused --fp8-format e5m2
refused --fp8-recipe mxfp8 --fp8-format hybrid
refused --fp8-amax-compute-algo mean --fp8-format hybrid
refused --fp8-format hybrid --save "$work/ckpt"
echo "PASS"
