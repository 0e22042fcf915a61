#!/bin/bash
# dev/compare_builds.sh OLD_MEGATON NEW_MEGATON [SRC]: for refactorings that must not change what is computed. Runs the
# CPU training configurations of the parity, resume, schedule and interleaved script tests (fp32, tiny GPT, synthetic
# data) with both binaries and demands bit-identical per-iteration values: lm loss, grad norm, params norm, learning
# rate, batch size and validation losses. Prints one line per configuration; exits 1 on any difference.
set -uo pipefail
OLD=$(realpath "${1:?usage: compare_builds.sh OLD_MEGATON NEW_MEGATON [SRC]}")
NEW=$(realpath "${2:?usage: compare_builds.sh OLD_MEGATON NEW_MEGATON [SRC]}")
SRC=$(realpath "${3:-$(dirname "$0")/..}")
BUILD=unused
source "$SRC/tests/support/train_lib.sh"
setup_work
fail=0

common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 16 --train-iters 20)
model8=($(tiny_model_args | sed 's/--num-layers 4/--num-layers 8/'))
lr=($(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 16 --train-iters 20)
tp2pp2=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)

# run BIN NAME NP FLAGS...: one training run, its metrics in $work/NAME.jsonl.
run() {
  local bin=$1 name=$2 np=$3
  shift 3
  MEGATON=$bin run_train "$np" "$@" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { echo "FAIL $name: exit code $?"; tail -5 "$work/$name.log"; fail=1; }
}

same() {  # NAME: old and new metrics equal bit for bit
  python3 - "$work/old_$1.jsonl" "$work/new_$1.jsonl" "$1" <<'PY' || fail=1
import json, sys
keys = ("lm_loss", "grad_norm", "params_norm", "learning_rate", "global_batch_size", "num_zeros", "valid_lm_loss",
        "consumed_samples", "iteration")
def load(p):
    return [{k: o[k] for k in keys if k in o} for o in map(json.loads, open(p))]
a, b = load(sys.argv[1]), load(sys.argv[2])
if not a:
    sys.exit(f"FAIL {sys.argv[3]}: no metrics")
diff = [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
if len(a) != len(b) or diff:
    print(f"FAIL {sys.argv[3]}: {len(a)} vs {len(b)} lines; first difference {diff[:1]}")
    sys.exit(1)
losses = [o["lm_loss"] for o in a if "lm_loss" in o]
print(f"same {sys.argv[3]}: {len(a)} lines bit-identical (last lm loss {losses[-1] if losses else None!r})")
PY
}

both() {  # NAME NP FLAGS...
  local name=$1
  shift
  run "$OLD" "old_$name" "$@"
  run "$NEW" "new_$name" "$@"
  same "$name"
}

both single 1 "${common[@]}" --log-params-norm --log-num-zeros-in-grad
both tp2pp2dp2 8 "${common[@]}" "${tp2pp2[@]}" --log-params-norm
both pp4 4 "${common[@]}" --pipeline-model-parallel-size 4
both dp4zero1 4 "${common[@]}" --zero-stage 1 --log-params-norm
both tp2sync 2 "${common[@]}" --tensor-model-parallel-size 2 --sync-tp-duplicated-parameters
both ramp 2 $(tiny_model_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 16 \
  --rampup-batch-size 4 4 64 --train-samples 320 --lr 1e-3 --min-lr 1e-4 --lr-decay-style linear \
  --lr-warmup-samples 32 --lr-decay-samples 256
both interleaved 2 $(tiny_model_args | sed 's/--eval-interval 1000/--eval-interval 10/') "${lr[@]}" \
  --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
both interleaved_dp_zero1 4 "${model8[@]}" "${lr[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 2 --zero-stage 1
# Resume: each binary saves at iteration 10 and resumes its own checkpoint; then the new binary resumes the old one's.
for who in old new; do
  bin=$OLD; [ $who = new ] && bin=$NEW
  run "$bin" "${who}_first" 8 "${common[@]}" "${tp2pp2[@]}" --save "$work/ckpt_$who" --save-interval 100 --exit-interval 10
  run "$bin" "${who}_resume" 8 "${common[@]}" "${tp2pp2[@]}" --load "$work/ckpt_$who"
done
same first
same resume
run "$NEW" new_cross 8 "${common[@]}" "${tp2pp2[@]}" --load "$work/ckpt_old"
cp "$work/old_resume.jsonl" "$work/old_cross.jsonl"
same cross

[ $fail = 0 ] && echo "compare_builds: every configuration bit-identical"
exit $fail
