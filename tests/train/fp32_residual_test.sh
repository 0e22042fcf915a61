#!/bin/bash
# --fp32-residual-connection with --bf16: the residual stream, and so what a pipeline stage sends to the next, stays
# fp32. The first iteration's loss (a forward before any update) of PP=2 equals PP=1's bit for bit, which it would not
# with a bf16 hand-over between the stages; later iterations agree to bf16 rounding (the gradient norm's sums are
# ordered differently). Without the flag the same run gives a different first loss (the flag is not a no-op).
# --fp32-residual-connection without --fp16/--bf16 is a usage error.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 4 --train-iters 6 --bf16)
run_train 1 "${common[@]}" --fp32-residual-connection --metrics-file "$work/pp1.jsonl" > "$work/pp1.log" 2>&1 ||
  { tail -20 "$work/pp1.log"; exit 1; }
run_train 2 "${common[@]}" --fp32-residual-connection --pipeline-model-parallel-size 2 \
  --metrics-file "$work/pp2.jsonl" > "$work/pp2.log" 2>&1 || { tail -20 "$work/pp2.log"; exit 1; }
run_train 2 "${common[@]}" --pipeline-model-parallel-size 2 --metrics-file "$work/plain.jsonl" > "$work/plain.log" 2>&1 ||
  { tail -20 "$work/plain.log"; exit 1; }
python3 - "$work/pp1.jsonl" "$work/pp2.jsonl" "$work/plain.jsonl" <<'PY'
import json, sys
def losses(p):
    return {o["iteration"]: o["lm_loss"] for o in map(json.loads, open(p)) if "lm_loss" in o and "valid_lm_loss" not in o}
pp1, pp2, plain = (losses(p) for p in sys.argv[1:])
assert sorted(pp1) == sorted(pp2) == list(range(1, 7)), (sorted(pp1), sorted(pp2))
assert pp1[1] == pp2[1], f"iteration 1: PP=1 {pp1[1]!r} vs PP=2 {pp2[1]!r} (a rounded hand-over?)"
worst = max(abs(pp1[i] - pp2[i]) for i in pp1)
assert worst < 2e-2, f"PP=1 and PP=2 drift apart: worst |diff| {worst}"
assert plain[1] != pp2[1], f"--fp32-residual-connection changed nothing: {plain[1]!r}"
print(f"first loss {pp1[1]!r} at PP=1 and PP=2 (without the flag {plain[1]!r}); worst |diff| over 6 iterations {worst:.3g}")
PY
if run_train 1 $(tiny_model_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 2 \
  --train-iters 1 --fp32-residual-connection > "$work/fp32.log" 2>&1; then
  echo "FAIL: --fp32-residual-connection accepted without --fp16/--bf16"; exit 1
fi
grep -q -- "--fp32-residual-connection needs --fp16 or --bf16" "$work/fp32.log" ||
  { echo "FAIL: no usage error"; tail -5 "$work/fp32.log"; exit 1; }
echo "fp32 residual connection: OK"
