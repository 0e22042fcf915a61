#!/bin/bash
# The interleaved 1F1B schedule (--num-layers-per-virtual-pipeline-stage): fp32 on CPU, same seed and data, the loss
# curve (20 iterations) and the validation loss equal the single-rank run's within 1e-5 at
#   PP=2, 4 layers, N=1 (2 chunks per rank; 2 ranks), with --eval-interval
#   PP=2 x DP=2 + ZeRO-1, 8 layers, N=2 (2 chunks per rank; 4 ranks)
#   PP=2, 8 layers, N=1 (4 chunks per rank; 2 ranks)
#   PP=2 with M == PP (2 micro-batches: all forwards, then all backwards)
# A checkpoint saved interleaved resumes without interleaving (and vice versa) with the loss curve of the straight
# run. M % PP != 0 is refused with a usage error naming the flags. The schedule's message order and deadlock freedom
# are checked by a model of it first (interleaved_schedule_sim.py).
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 "$SRC/tests/parallel/interleaved_schedule_sim.py"

make_synthetic_data "$work"
model4=($(tiny_model_args))
model4_eval=($(tiny_model_args | sed 's/--eval-interval 1000/--eval-interval 10/'))
model8=($(tiny_model_args | sed 's/--num-layers 4/--num-layers 8/'))
common=($(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 16
        --train-iters 20)
il=(--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage)

run() {  # name np flags... -> $work/name.{jsonl,log}
  local name=$1 np=$2
  shift 2
  run_train "$np" "$@" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; exit 1; }
}
check() {  # ref name np flags...
  local ref=$1 name=$2
  shift 2
  run "$name" "$@"
  echo -n "$name: "
  compare_losses "$work/$ref.jsonl" "$work/$name.jsonl" 1e-5
}
valid_losses_match() {  # A B: the validation losses agree within 1e-5 (and there are some)
  python3 - "$work/$1.jsonl" "$work/$2.jsonl" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o["valid_lm_loss"] for o in map(json.loads, open(p)) if "valid_lm_loss" in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a and sorted(a) == sorted(b), (a, b)
worst = max(abs(a[i] - b[i]) for i in a)
print(f"validation losses at {sorted(a)}: worst |diff| {worst:.3g} (tol 1e-05)")
sys.exit(0 if worst <= 1e-5 else 1)
PY
}

# References: one rank.
run ref4 1 "${model4_eval[@]}" "${common[@]}"
run ref8 1 "${model8[@]}" "${common[@]}"

check ref4 il_pp2_n1 2 "${model4_eval[@]}" "${common[@]}" "${il[@]}" 1
grep -q "interleaved pipeline: 2 model chunks of 1 layers per rank" "$work/il_pp2_n1.log" ||
  { echo "no interleaving report"; head -20 "$work/il_pp2_n1.log"; exit 1; }
echo -n "il_pp2_n1 "
valid_losses_match ref4 il_pp2_n1
check ref8 il_pp2_dp2_zero1_n2 4 "${model8[@]}" "${common[@]}" --zero-stage 1 "${il[@]}" 2
grep -q "ZeRO-1 shard 1/2" "$work/il_pp2_dp2_zero1_n2.log" || { echo "no ZeRO-1 memory report"; exit 1; }
check ref8 il_pp2_v4 2 "${model8[@]}" "${common[@]}" "${il[@]}" 1

# M == PP: 2 micro-batches at PP=2 (all-warmup path of the schedule).
small=("${model4[@]}" $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
       --global-batch-size 4 --train-iters 10)
run ref4_m2 1 "${small[@]}"
check ref4_m2 il_m2 2 "${small[@]}" "${il[@]}" 1

# Checkpoints: saved interleaved, resumed at PP=2 without interleaving; saved at PP=2, resumed interleaved.
run first_il 2 "${model4[@]}" "${common[@]}" "${il[@]}" 1 --save "$work/ck_il" --save-interval 100 --exit-interval 10
run first_plain 2 "${model4[@]}" "${common[@]}" --pipeline-model-parallel-size 2 --save "$work/ck_plain" \
  --save-interval 100 --exit-interval 10
for pair in "resume_plain_from_il ck_il --pipeline-model-parallel-size 2" \
            "resume_il_from_plain ck_plain ${il[*]} 1"; do
  set -- $pair
  name=$1 ck=$2
  shift 2
  run "$name" 2 "${model4[@]}" "${common[@]}" "$@" --load "$work/$ck"
  grep -q "loaded .* at iteration 10" "$work/$name.log" || { echo "$name did not resume"; tail "$work/$name.log"; exit 1; }
  echo -n "$name: "
  compare_losses "$work/ref4.jsonl" "$work/$name.jsonl" 1e-5 11
done

# M % PP != 0: refused before training, naming the flags (exit code 2, usage error).
set +e
run_train 1 "${model4[@]}" $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 \
  --global-batch-size 6 --train-iters 20 "${il[@]}" 1 --dry-run --world-size 2 > "$work/bad.log" 2>&1
code=$?
set -e
[ "$code" = 2 ] && grep -q "multiple of --pipeline-model-parallel-size" "$work/bad.log" &&
  grep -q -- "--num-layers-per-virtual-pipeline-stage" "$work/bad.log" ||
  { echo "M % PP != 0 not refused (exit $code)"; cat "$work/bad.log"; exit 1; }
echo "M % PP != 0 refused: $(grep -o 'needs the number of micro-batches.*' "$work/bad.log" | head -1)"
# --dry-run reports the chunks.
run_train 1 "${model8[@]}" "${common[@]}" "${il[@]}" 2 --dry-run --world-size 4 > "$work/dry.log" 2>&1 ||
  { cat "$work/dry.log"; exit 1; }
grep -q "interleaved: 2 model chunks of 2 layers per stage" "$work/dry.log" || { cat "$work/dry.log"; exit 1; }
echo "PASS"
