#!/bin/bash
# The batch-size ramp-up and the learning-rate schedules of a real run (2 ranks, DP=2), read back from the metrics
# JSONL, against Megatron's formulas computed independently here:
#   ramp-up (START INCR SAMPLES): batch(c) = GBS if c > SAMPLES else START + int(c / (SAMPLES / ((GBS-START)/INCR))) * INCR
#   lr(n): warmup max_lr * n / W; then linear/cosine decay to min_lr at D samples; min_lr after.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work  # $work: a scratch directory (removed at exit) with the synthetic dataset
model=($(tiny_model_args) --data-path "$work/synth_text_document" --micro-batch-size 2)

# Sample-based, ramp-up 4 -> 16 by 4 over 64 samples, linear decay; lr flags override the tiny defaults.
run_train 2 "${model[@]}" --global-batch-size 16 --rampup-batch-size 4 4 64 --train-samples 320 \
  --lr 1e-3 --min-lr 1e-4 --lr-decay-style linear --lr-warmup-samples 32 --lr-decay-samples 256 --lr-warmup-iters 0 \
  --metrics-file "$work/ramp.jsonl" > "$work/ramp.log" 2>&1 || { tail -20 "$work/ramp.log"; exit 1; }
# Iteration-based, constant batch 8, cosine.
run_train 2 "${model[@]}" --global-batch-size 8 --train-iters 12 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine \
  --lr-warmup-iters 3 --lr-decay-iters 10 --metrics-file "$work/cos.jsonl" > "$work/cos.log" 2>&1 ||
  { tail -20 "$work/cos.log"; exit 1; }

python3 - "$work/ramp.jsonl" "$work/cos.jsonl" <<'PY'
import json, math, sys
def rows(p): return [o for o in map(json.loads, open(p)) if "valid_lm_loss" not in o]
def lr(n, max_lr, min_lr, W, D, style):
    if W > 0 and n <= W: return max_lr * n / W
    if n > D: return min_lr
    r = (n - W) / (D - W)
    c = 1 - r if style == "linear" else (math.cos(math.pi * r) + 1) / 2
    return min_lr + c * (max_lr - min_lr)

# Ramp-up run.
ramp = rows(sys.argv[1])
consumed, its = 0, 0
spi = 64 / ((16 - 4) / 4)
for o in ramp:
    want = 16 if consumed > 64 else 4 + int(consumed / spi) * 4
    assert o["global_batch_size"] == want, (o["iteration"], o["global_batch_size"], want)
    consumed += want
    assert o["consumed_samples"] == consumed, (o, consumed)
    assert abs(o["learning_rate"] - lr(consumed, 1e-3, 1e-4, 32, 256, "linear")) < 1e-9, (o, consumed)
    its += 1
# update_train_iters: ramp iterations while consumed <= 64, then the rest in whole global batches.
c, n = 0, 0
while c <= 64:
    c += 16 if c > 64 else 4 + int(c / spi) * 4; n += 1
n += (320 - c) // 16
assert its == n == ramp[-1]["train_iters"], (its, n, ramp[-1]["train_iters"])
assert len({o["global_batch_size"] for o in ramp}) == 4

cos = rows(sys.argv[2])
assert len(cos) == 12
for o in cos:
    n = o["iteration"] * 8
    assert o["global_batch_size"] == 8
    assert abs(o["learning_rate"] - lr(n, 1e-3, 1e-4, 3 * 8, 10 * 8, "cosine")) < 1e-9, (o, lr(n, 1e-3, 1e-4, 24, 80, "cosine"))
print(f"ramp-up: {its} iterations, batches {sorted({o['global_batch_size'] for o in ramp})}; cosine: 12 iterations")
PY
echo "PASS"
