#!/bin/bash
# Resume is exact: at TP x PP x DP = 2x2x2, 20 iterations straight give bit-identical losses to 10 iterations, save,
# load, 10 more. Loading that checkpoint at another layout (1x4x2 and 4x1x1) continues with the same losses within
# fp32 tolerance. Also: --finetune restarts the iteration count from the loaded weights.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work  # $work: a scratch directory (removed at exit) with the synthetic dataset
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 16
        --train-iters 20)
tp2pp2=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)

run_train 8 "${common[@]}" "${tp2pp2[@]}" --metrics-file "$work/straight.jsonl" > "$work/straight.log" 2>&1 ||
  { tail -30 "$work/straight.log"; exit 1; }
# First half: --exit-interval 10 saves at iteration 10 and stops.
run_train 8 "${common[@]}" "${tp2pp2[@]}" --save "$work/ckpt" --save-interval 100 --exit-interval 10 \
  --metrics-file "$work/first.jsonl" > "$work/first.log" 2>&1 || { tail -30 "$work/first.log"; exit 1; }
[ "$(cat "$work/ckpt/latest_checkpointed_iteration.txt" 2>/dev/null || cat "$work/ckpt/latest")" = 10 ] ||
  { echo "no checkpoint at iteration 10"; ls -R "$work/ckpt"; exit 1; }
run_train 8 "${common[@]}" "${tp2pp2[@]}" --load "$work/ckpt" --metrics-file "$work/second.jsonl" \
  > "$work/second.log" 2>&1 || { tail -30 "$work/second.log"; exit 1; }
grep -q "loaded .* at iteration 10" "$work/second.log" || { echo "did not resume"; tail "$work/second.log"; exit 1; }
echo -n "resume, same layout (bit-identical): "
compare_losses "$work/straight.jsonl" "$work/second.jsonl" 0 11

for layout in "8 --tensor-model-parallel-size 1 --pipeline-model-parallel-size 4" \
              "4 --tensor-model-parallel-size 4 --pipeline-model-parallel-size 1"; do
  set -- $layout
  np=$1
  shift
  name="resh_${np}_${2}_${4}"
  run_train "$np" "${common[@]}" "$@" --load "$work/ckpt" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; exit 1; }
  echo -n "resume at $np ranks $*: "
  compare_losses "$work/straight.jsonl" "$work/$name.jsonl" 1e-5 11
done

# --finetune: weights only, iteration count restarts at 0 (20 iterations run, not 10).
run_train 4 "${common[@]}" --load "$work/ckpt" --finetune --metrics-file "$work/ft.jsonl" > "$work/ft.log" 2>&1 ||
  { tail -30 "$work/ft.log"; exit 1; }
grep -q "iteration       20/      20" "$work/ft.log" || { echo "finetune did not restart the count"; exit 1; }
python3 - "$work/ft.jsonl" "$work/straight.jsonl" <<'PY'
import json, sys
ft = [json.loads(l) for l in open(sys.argv[1]) if "lm_loss" in l]
st = [json.loads(l) for l in open(sys.argv[2]) if "lm_loss" in l]
# Finetuning starts from the trained weights: its first loss is below the fresh run's first loss.
assert ft[0]["iteration"] == 1 and ft[0]["lm_loss"] < st[0]["lm_loss"] - 0.1, (ft[0], st[0])
PY
echo "PASS"
