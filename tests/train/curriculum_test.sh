#!/bin/bash
# Sequence-length curriculum learning from a DeepSpeed config (train/curriculum.h): the log line shows each
# iteration's length and the consumed tokens count it; PP=2 gives the single stage's losses with the lengths changing
# between iterations; a curriculum pinned at --seq-length is the plain run bit for bit; a resumed run continues the
# schedule where the saved run was.   $1 = build dir, $2 = source dir
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 4 --train-iters 8)
ds() {  # ds FILE MIN: fixed_linear from MIN to 16 over 4 steps, in steps of 8 (and the flags' clipping)
  cat > "$1" <<JSON
{"gradient_clipping": 1.0,
 "curriculum_learning": {"enabled": true, "curriculum_type": "seqlen", "min_difficulty": $2, "max_difficulty": 16,
 "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 4, "difficulty_step": 8}}}
JSON
}
ds "$work/cl.json" 8
ds "$work/pinned.json" 16

run_train 1 "${common[@]}" --deepspeed --deepspeed_config "$work/cl.json" --metrics-file "$work/cl.jsonl" \
  > "$work/cl.log" 2>&1 || { tail -20 "$work/cl.log"; exit 1; }
grep -q "iteration        1/       8 .*| curriculum seqlen:     8 |" "$work/cl.log" &&
  grep -q "iteration        8/       8 .*| curriculum seqlen:    16 |" "$work/cl.log" || { grep iteration "$work/cl.log"; exit 1; }
python3 - "$work/cl.jsonl" <<'PY'
import json, sys
m = {o["iteration"]: o for o in map(json.loads, open(sys.argv[1])) if "lm_loss" in o}
# DeepSpeed's fixed_linear: floor(k/4 x 8 + 8) rounded down to 8: 8, 8, 8, 16, 16, ...
seq = [m[i]["curriculum_seqlen"] for i in range(1, 9)]
assert seq == [8, 8, 8, 16, 16, 16, 16, 16], seq
assert m[8]["consumed_tokens"] == 4 * sum(seq), m[8]
print("curriculum lengths", seq, "consumed tokens", m[8]["consumed_tokens"])
PY
run_train 2 "${common[@]}" --pipeline-model-parallel-size 2 --deepspeed --deepspeed_config "$work/cl.json" \
  --metrics-file "$work/cl_pp2.jsonl" > "$work/cl_pp2.log" 2>&1 || { tail -20 "$work/cl_pp2.log"; exit 1; }
echo -n "curriculum, PP=2 vs PP=1: "
compare_losses "$work/cl.jsonl" "$work/cl_pp2.jsonl" 1e-5
run_train 1 "${common[@]}" --deepspeed --deepspeed_config "$work/pinned.json" --metrics-file "$work/pinned.jsonl" \
  > "$work/pinned.log" 2>&1 || { tail -20 "$work/pinned.log"; exit 1; }
run_train 1 "${common[@]}" --metrics-file "$work/plain.jsonl" > "$work/plain.log" 2>&1 || { tail "$work/plain.log"; exit 1; }
echo -n "curriculum pinned at --seq-length vs none: "
compare_losses "$work/pinned.jsonl" "$work/plain.jsonl" 0
! compare_losses "$work/cl.jsonl" "$work/plain.jsonl" 0 > /dev/null || { echo "the curriculum changed nothing"; exit 1; }
run_train 1 "${common[@]}" --deepspeed --deepspeed_config "$work/cl.json" --save "$work/ck" --save-interval 100 \
  --exit-interval 6 > "$work/first6.log" 2>&1 || { tail -20 "$work/first6.log"; exit 1; }
run_train 1 "${common[@]}" --deepspeed --deepspeed_config "$work/cl.json" --load "$work/ck" \
  --metrics-file "$work/resumed.jsonl" > "$work/resumed.log" 2>&1 || { tail -20 "$work/resumed.log"; exit 1; }
grep -q "loaded .* at iteration 6" "$work/resumed.log" || { tail "$work/resumed.log"; exit 1; }
echo -n "resumed at 6 vs continuous: "
python3 - "$work/cl.jsonl" "$work/resumed.jsonl" <<'PY'
import json, sys
a, b = ({o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o} for p in sys.argv[1:])
for i in (7, 8):
    assert a[i]["lm_loss"] == b[i]["lm_loss"] and a[i]["curriculum_seqlen"] == b[i]["curriculum_seqlen"], (i, a[i], b[i])
    assert a[i]["consumed_tokens"] == b[i]["consumed_tokens"], (i, a[i], b[i])
print("iterations 7-8 equal")
PY
echo "PASS"
