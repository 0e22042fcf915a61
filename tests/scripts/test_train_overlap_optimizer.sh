#!/bin/bash
# --overlap-optimizer-step defers Adam's update of an iteration to a side stream beside the next forward (on the CPU,
# to the start of the next iteration, in order): the training must be the same bits as without it.
#   1 rank, TP=2 x PP=2 (the 1F1B schedule, the tied embedding's copy on the last stage) and DP=2 with accumulation,
#   recomputation and --no-gradient-accumulation-fusion: lm_loss bit-identical at every iteration, and so are the validation losses of an --eval-interval (evaluation reads the updated parameters);
#   a checkpoint saved by a run with the flag at --exit-interval (the update finished before the save) and resumed
#   without it continues with the losses of a run that never stopped;
#   refused with a usage error naming the flag: --optimizer sgd, --zero-stage 1 over DP 2, --cuda-graph.
# On a CUDA build with a GPU, the same comparison in bf16 on the GPU (the grouped fused Adam on a side stream).
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/scripts/train_lib.sh"
setup_work
model=($(tiny_model_args | sed "s/--eval-interval 1000 --eval-iters 1 //") $(tiny_lr_args)
       --data-path "$work/synth_text_document" --micro-batch-size 2 --eval-interval 3 --eval-iters 2)
valid_losses() {
  python3 -c 'import json,sys; print([o["valid_lm_loss"] for o in map(json.loads, open(sys.argv[1])) if "valid_lm_loss" in o])' "$1"
}
same_runs() {  # NP FLAGS...: without and with --overlap-optimizer-step, bit-identical losses
  local np=$1
  shift
  run_train "$np" "${model[@]}" --train-iters 8 "$@" --metrics-file "$work/plain.jsonl" > "$work/plain.log" 2>&1 ||
    { tail "$work/plain.log"; exit 1; }
  run_train "$np" "${model[@]}" --train-iters 8 "$@" --overlap-optimizer-step --metrics-file "$work/overlap.jsonl" \
    > "$work/overlap.log" 2>&1 || { tail "$work/overlap.log"; exit 1; }
  grep -q -- "--overlap-optimizer-step: the update runs beside the next forward in" "$work/overlap.log" ||
    { echo "FAIL: no overlap log line"; tail -5 "$work/overlap.log"; exit 1; }
  compare_losses "$work/plain.jsonl" "$work/overlap.jsonl" 0
  local va vb
  va=$(valid_losses "$work/plain.jsonl") vb=$(valid_losses "$work/overlap.jsonl")
  [ "$va" = "$vb" ] && [ "$va" != "[]" ] || { echo "FAIL: validation losses $va vs $vb"; exit 1; }
  echo "validation losses equal: $va"
  rm -f "$work/plain.jsonl" "$work/overlap.jsonl"
}
same_runs 1 --global-batch-size 2
same_runs 4 --global-batch-size 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
# DP = 2 with 2 micro-batches per step (the gradient all-reduce, accumulation), recomputation (the forward gated per
# recomputed chunk) and autograd's weight gradients added by DataParallel's hooks.
same_runs 2 --global-batch-size 8 --checkpoint-activations --no-gradient-accumulation-fusion

# Saved at iteration 4 with the flag (--exit-interval: not the end of the run's schedule), resumed without it.
whole=("${model[@]}" --global-batch-size 2 --train-iters 10)
run_train 1 "${whole[@]}" --metrics-file "$work/whole.jsonl" > "$work/whole.log" 2>&1 || { tail "$work/whole.log"; exit 1; }
run_train 1 "${whole[@]}" --overlap-optimizer-step --save "$work/ckpt" --save-interval 4 --exit-interval 4 \
  > "$work/first.log" 2>&1 || { tail "$work/first.log"; exit 1; }
run_train 1 "${whole[@]}" --load "$work/ckpt" --metrics-file "$work/second.jsonl" > "$work/second.log" 2>&1 ||
  { tail "$work/second.log"; exit 1; }
compare_losses "$work/whole.jsonl" "$work/second.jsonl" 0 5

# Refused combinations: a usage error naming the flag, before any training.
refused() {  # NP PATTERN FLAGS...
  local np=$1 pattern=$2
  shift 2
  if run_train "$np" "${model[@]}" --train-iters 1 --overlap-optimizer-step "$@" > "$work/refused.log" 2>&1; then
    echo "FAIL: --overlap-optimizer-step $* accepted"; exit 1
  fi
  grep -q -- "$pattern" "$work/refused.log" || { echo "FAIL: no usage error for $*"; tail -5 "$work/refused.log"; exit 1; }
}
refused 1 "--overlap-optimizer-step needs --optimizer adam" --global-batch-size 2 --optimizer sgd
refused 2 "--overlap-optimizer-step: not with ZeRO-1" --global-batch-size 4 --zero-stage 1
refused 1 "--overlap-optimizer-step with --cuda-graph" --global-batch-size 2 --cuda-graph

if grep -q "^MEGATON_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  model=($(printf '%s\n' "${model[@]}" | sed -e 's/^cpu$/cuda/' -e 's/^mpi$/nccl/') --bf16)
  same_runs 1 --global-batch-size 2
  echo "GPU: bf16 on CUDA, bit-identical"
fi
echo PASS
