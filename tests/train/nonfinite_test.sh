#!/usr/bin/env bash
# A diverging bf16/fp32 run (--lr 1e4) never checkpoints NaN over a finite state: updates whose gradients hold NaN or
# inf are skipped and counted, the run stops with a runtime error (exit 6) after --max-nan-iterations of them in a
# row, and every checkpoint it left, including the one --keep-last 1 kept, is finite (inspect passes).
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
fail() { echo "FAIL: $*"; tail -20 "$work/nan.log"; exit 1; }
# shellcheck disable=SC2046
args=($(tiny_model_args) --lr 1e4 --min-lr 1e3 --lr-decay-style constant --tensor-model-parallel-size 2
  --micro-batch-size 2 --global-batch-size 4 --train-iters 40 --save-interval 2 --keep-last 1
  --data-path "$work/synth_text_document")

set +e
run_train 2 "${args[@]}" --save "$work/ckpt" --max-nan-iterations 5 > "$work/nan.log" 2>&1
rc=$?
set -e
[ $rc -eq 6 ] || fail "exit code $rc, expected 6 (runtime error)"
grep -q "held NaN or inf in 5 iterations in a row (--max-nan-iterations)" "$work/nan.log" || fail "no clear error"
grep -q "NaN or inf in the gradients, the update was skipped (1 in a row)" "$work/nan.log" || fail "no warning"
grep -Eq "number of skipped iterations: +[1-9]" "$work/nan.log" || fail "skipped iterations not counted"
latest=$(cat "$work/ckpt/latest")
"$MEGATON" inspect -q "$work/ckpt" > "$work/inspect.log" || { cat "$work/inspect.log"; fail "inspect of iteration $latest"; }
grep -q "non-finite" "$work/inspect.log" && fail "a non-finite checkpoint was saved"
echo "stopped with exit 6; iteration $latest saved and finite"

# --max-nan-iterations 0: the run goes on to the end (every bad update skipped), still saving only finite states.
run_train 2 "${args[@]}" --train-iters 16 --save "$work/ckpt0" --max-nan-iterations 0 > "$work/nan0.log" 2>&1 ||
  { cat "$work/nan0.log"; fail "--max-nan-iterations 0 should not stop the run"; }
[ "$(cat "$work/ckpt0/latest")" = 16 ] || fail "latest is $(cat "$work/ckpt0/latest"), expected 16"
"$MEGATON" inspect -q "$work/ckpt0" > "$work/inspect0.log" || { cat "$work/inspect0.log"; fail "inspect"; }
echo PASS
