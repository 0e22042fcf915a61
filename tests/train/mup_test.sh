#!/bin/bash
# --mup end to end (the fork's tr14-mup flags): it trains at TP=2 x DP=2; the run does not depend on its layout (a
# checkpoint saved at TP=2 continues at TP=1 with the same losses); the checkpoint records muP and its multipliers
# (a run without --mup cannot load it); export-hf refuses the model.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
fail() { echo "FAIL: $*"; exit 1; }
mup=(--mup --mup-input-mult 10 --mup-output-mult 10 --mup-attn-mult 10 --mup-base-hidden-size 16
     --mup-base-ffn-hidden-size 64 --init-method-std 0.1)
base=($(tiny_model_args) $(tiny_lr_args) --hidden-size 64 --data-path "$work/synth_text_document"
      --micro-batch-size 2 --global-batch-size 16 --train-iters 20)
common=("${base[@]}" "${mup[@]}")

run_train 4 "${common[@]}" --tensor-model-parallel-size 2 --metrics-file "$work/straight.jsonl" \
  > "$work/straight.log" 2>&1 || { tail -30 "$work/straight.log"; exit 1; }
loss_decreases "$work/straight.jsonl" || fail "muP did not train"

run_train 4 "${common[@]}" --tensor-model-parallel-size 2 --save "$work/ckpt" --save-interval 100 --exit-interval 10 \
  > "$work/first.log" 2>&1 || { tail -30 "$work/first.log"; exit 1; }
# The closing summary: this run's iterations, samples, tokens and rate, and where the checkpoint went.
grep -q "summary: iterations 1..10 (10 in this run), 160 samples and 2560 tokens in .* tokens/s); consumed in all: 160 samples, 2560 tokens; newest checkpoint $work/ckpt/iter_0000010" \
  "$work/first.log" || fail "summary: $(grep summary "$work/first.log")"
run_train 2 "${common[@]}" --load "$work/ckpt" --metrics-file "$work/tp1.jsonl" > "$work/tp1.log" 2>&1 ||
  { tail -30 "$work/tp1.log"; exit 1; }
echo -n "muP resumed at TP=1 from TP=2: "
compare_losses "$work/straight.jsonl" "$work/tp1.jsonl" 1e-5 11

# The standard parametrisation from the same seed is another model.
run_train 4 "${base[@]}" --train-iters 5 --tensor-model-parallel-size 2 --metrics-file "$work/sp.jsonl" \
  > "$work/sp.log" 2>&1 || { tail -30 "$work/sp.log"; exit 1; }
python3 - "$work/straight.jsonl" "$work/sp.jsonl" <<'PY'
import json, sys
a, b = ([o["lm_loss"] for o in map(json.loads, open(p)) if "lm_loss" in o] for p in sys.argv[1:])
assert abs(a[0] - b[0]) > 1e-3, (a[0], b[0])
PY

# The checkpoint records muP and its multipliers: inspect shows them, a run without --mup is refused; export-hf
# refuses a muP model.
"$MEGATON" inspect "$work/ckpt" > "$work/inspect.out" 2>&1 || { cat "$work/inspect.out"; exit 1; }
grep -q '"mup":true,"mup_attn_mult":10.0,"mup_input_mult":10.0,"mup_output_mult":10.0' "$work/inspect.out" ||
  fail "inspect: $(cat "$work/inspect.out")"
if run_train 1 "${base[@]}" --load "$work/ckpt" > "$work/plain.log" 2>&1; then fail "a run without --mup loaded it"; fi
grep -q "mup: checkpoint has true, this run has false" "$work/plain.log" || fail "$(tail -5 "$work/plain.log")"
if "$MEGATON" export-hf --load "$work/ckpt" --out "$work/hf" > "$work/export.log" 2>&1; then
  fail "export-hf wrote a muP model"
fi
grep -q "muP model" "$work/export.log" || fail "export-hf: $(cat "$work/export.log")"
echo "PASS"
