#!/bin/bash
# megaton train with --fp8-format on the CPU (the FP8 GEMMs emulated from the host rounding, ops/fp8/fp8_linear.h):
# the loss curve of 30 iterations decreases and stays near the 32-bit run's; TP=2 and DP=2 stay near the one-rank FP8
# run (the scales' agreement across ranks is megaton_mpi_tests' Fp8ScalingParallel.*); the tensorwise recipe and
# --no-fp8-wgrad train too; a run saved at iteration 15 resumes with the straight run's losses exactly (the scaling
# state is in meta/state.json), and at TP=2 from a TP=1 checkpoint, and at PP=1 from a PP=2 one (every stage's slots
# merged); a checkpoint without FP8 state loads with a warning; bad recipe flags are refused naming the flags.
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
# Evaluation forwards use the scales without recording amaxes: training is the same with them.
run fp8_eval 1 "${fp8[@]}" --eval-interval 4 --eval-iters 2
echo -n "FP8 with --eval-interval 4: "
compare_losses "$work/fp8.jsonl" "$work/fp8_eval.jsonl" 0
run fp8_tp2 2 "${fp8[@]}" --tensor-model-parallel-size 2
echo -n "FP8 TP=2 against TP=1: "
compare_losses "$work/fp8.jsonl" "$work/fp8_tp2.jsonl" 2e-3
run fp8_dp2 2 "${fp8[@]}"
echo -n "FP8 DP=2 against DP=1: "
compare_losses "$work/fp8.jsonl" "$work/fp8_dp2.jsonl" 2e-3
run tensorwise 1 --fp8-format e4m3 --fp8-recipe tensorwise --no-fp8-wgrad --no-fp8-cast-fusion
echo -n "tensorwise, --no-fp8-wgrad, --no-fp8-cast-fusion: "
loss_decreases "$work/tensorwise.jsonl"
refused() {  # flags... : a usage error naming the first flag
  if "$MEGATON" train "${common[@]}" "$@" > "$work/bad.log" 2>&1; then echo "accepted: $*"; exit 1; fi
  grep -q -- "$1" "$work/bad.log" || { echo "no mention of $1:"; cat "$work/bad.log"; exit 1; }
}
refused --fp8-format e5m2
refused --fp8-recipe mxfp8 --fp8-format hybrid
refused --fp8-amax-compute-algo mean --fp8-format hybrid
# Save at 15 and resume: the scales and amax histories come back, so the losses after 15 are the straight run's.
run saved 1 "${fp8[@]}" --save "$work/ckpt" --save-interval 15 --exit-interval 15
"$MEGATON" inspect --checkpoint "$work/ckpt" --json --no-verify > "$work/inspect.json"
python3 - "$work/inspect.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
def find(o):  # the "fp8" object of the training state, wherever inspect nests it
    if isinstance(o, dict):
        if "fp8" in o and isinstance(o["fp8"], dict):
            return o["fp8"]
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    return None
fp8 = find(j)
assert fp8 is not None, "no fp8 state in inspect's output"
assert len(fp8) == 4 * 4 * 3, sorted(fp8)[:5]  # 4 layers x 4 linear layers x input, weight, output gradient
slot = fp8["layers.0.mlp.fc1.weight:grad_output"]
assert len(slot["amax_history"]) == 4 and slot["scale"] != 1.0, slot
print(f"checkpoint: {len(fp8)} FP8 slots with their scales and amax histories")
PY
run resumed 1 "${fp8[@]}" --load "$work/ckpt"
echo -n "FP8 resumed at 15: "
compare_losses "$work/fp8.jsonl" "$work/resumed.jsonl" 0 16
run resumed_tp2 2 "${fp8[@]}" --load "$work/ckpt" --tensor-model-parallel-size 2
echo -n "FP8 resumed at 15 at TP=2: "
compare_losses "$work/fp8.jsonl" "$work/resumed_tp2.jsonl" 2e-3 16
# Saved at PP=2 (each stage's slots merged into one state), resumed at PP=1.
run saved_pp2 2 "${fp8[@]}" --pipeline-model-parallel-size 2 --save "$work/ckpt_pp2" --save-interval 15 \
  --exit-interval 15
"$MEGATON" inspect --checkpoint "$work/ckpt_pp2" --json --no-verify > "$work/inspect_pp2.json"
python3 -c 'import json, sys; t = json.dumps(json.load(open(sys.argv[1]))); assert t.count(":grad_output") == 16, t.count(":grad_output")' \
  "$work/inspect_pp2.json"
run resumed_pp1 1 "${fp8[@]}" --load "$work/ckpt_pp2"
echo -n "FP8 saved at PP=2, resumed at PP=1: "
compare_losses "$work/fp8.jsonl" "$work/resumed_pp1.jsonl" 2e-3 16
# A checkpoint saved without FP8 loads into an FP8 run, whose scales start at 1 (said in the log).
run plain 1 --save "$work/plain" --save-interval 15 --exit-interval 15
run from_plain 1 "${fp8[@]}" --load "$work/plain"
grep -q "has no FP8 scaling state" "$work/from_plain.log" || { echo "no warning"; tail "$work/from_plain.log"; exit 1; }
echo "PASS"
