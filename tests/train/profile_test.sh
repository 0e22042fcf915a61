#!/bin/bash
# --profile: each listed rank writes rank<R>.summary.txt for iterations start+1..end (ops by time; Debian's LibTorch has
# no Kineto, so no trace here), profiling changes no number of the run, and missing or inconsistent flags are refused.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
source "$SRC/tests/support/expect_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 4 --train-iters 6)
run_train 2 "${common[@]}" --tensor-model-parallel-size 2 --metrics-file "$work/plain.jsonl" > "$work/plain.log" 2>&1 || { tail "$work/plain.log"; exit 1; }
run_train 2 "${common[@]}" --tensor-model-parallel-size 2 --metrics-file "$work/prof.jsonl" --profile --profile-step-start 1 --profile-step-end 3 \
  --profile-ranks 0 1 --profile-dir "$work/p" > "$work/prof.log" 2>&1 || { tail "$work/prof.log"; exit 1; }
for r in 0 1; do
  f="$work/p/rank$r.summary.txt"
  grep -q "rank $r, iterations 2..3" "$f" && grep -q "over 2 profiled step(s)" "$f" && grep -qE ' aten::(mm|matmul)$' "$f" ||
    { echo "bad or missing $f:"; head -5 "$f"; exit 1; }
done
grep -q "profile of iterations 2..3 written" "$work/prof.log" || { echo "no log line for the profile"; exit 1; }
compare_losses "$work/plain.jsonl" "$work/prof.jsonl" 0
echo "summaries of ranks 0 and 1, losses unchanged: OK"

set +e
expect window-outside-run 0 "iterations 11..12 are not all in this run \(iterations 1..6\): no profile" \
  "$MEGATON" train "${common[@]}" --profile --profile-dir "$work/none"
[ ! -e "$work/none/rank0.summary.txt" ] || { echo "FAIL: a profile outside the run was written"; fail=1; }
expect missing-dir 2 "needs --profile-dir" "$MEGATON" train "${common[@]}" --profile
expect empty-window 2 "must satisfy 0 <= start < end" "$MEGATON" train "${common[@]}" --profile --profile-dir "$work/x" \
  --profile-step-start 5 --profile-step-end 5
[ "$fail" = 0 ] && echo PASS
exit "$fail"
