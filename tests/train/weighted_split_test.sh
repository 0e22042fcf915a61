#!/bin/bash
# BigScience's "mode 2" data flags (--train/valid-weighted-split-paths[-path]):
#   * a train group "t: 1 0:0.95 A" trains on exactly the documents of mode 1's --data-path A --split 95,5,0
#     (bit-identical losses);
#   * two validation groups are each evaluated and logged under their NAME (log line, metrics, TensorBoard), with
#     different losses (different documents);
#   * the -path file form gives the same run; bad groups are refused with exit 2 naming the flag.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work  # $work: a scratch directory (removed at exit) with the synthetic dataset
A="$work/synth_text_document"
model=($(tiny_model_args | sed 's/--split 95,5,0//; s/--eval-interval 1000//') $(tiny_lr_args) --micro-batch-size 2 --global-batch-size 4 --train-iters 8)

run_train 2 "${model[@]}" --data-path "$A" --split 95,5,0 --eval-interval 1000 --metrics-file "$work/mode1.jsonl" \
  > "$work/mode1.log" 2>&1 || { tail -20 "$work/mode1.log"; exit 1; }
groups=(--train-weighted-split-paths "t: 1 0:0.95 $A" --valid-weighted-split-paths "va: 1 0.95:1 $A" "vb: 1 0:0.05 $A")
run_train 2 "${model[@]}" "${groups[@]}" --eval-interval 4 --metrics-file "$work/mode2.jsonl" \
  --tensorboard-dir "$work/tb" > "$work/mode2.log" 2>&1 || { tail -20 "$work/mode2.log"; exit 1; }
echo -n "mode 2 train group vs mode 1 split: "
compare_losses "$work/mode1.jsonl" "$work/mode2.jsonl" 0
grep -q "^va loss at iteration 4 | lm loss value: " "$work/mode2.log" && grep -q "^vb loss at iteration 8 | " \
  "$work/mode2.log" || { echo "per-group validation lines missing"; tail -30 "$work/mode2.log"; exit 1; }
python3 "$SRC/tests/train/tensorboard_decode.py" "$work"/tb/events.out.tfevents.* > "$work/tb.json"
python3 - "$work/mode2.jsonl" "$work/tb.json" <<'PY'
import json, sys
v = [o for o in map(json.loads, open(sys.argv[1])) if "valid_lm_loss" in o]
by = {(o["valid_name"], o["iteration"]): o["valid_lm_loss"] for o in v}
assert sorted(by) == [("va", 4), ("va", 8), ("vb", 4), ("vb", 8)], sorted(by)
assert by[("va", 8)] != by[("vb", 8)], by
tags = {s["tag"] for s in json.load(open(sys.argv[2]))["scalars"]}
assert {"lm-loss-validation/va/lm loss validation", "lm-loss-validation/vb/lm loss validation"} <= tags, sorted(tags)
print("validation groups:", {k: round(x, 4) for k, x in by.items()})
PY

# The file form: the same groups, double-quoted, one file per flag.
echo "\"t: 1 0:0.95 $A\"" > "$work/train.txt"
printf '"va: 1 0.95:1 %s"\n"vb: 1 0:0.05 %s"\n' "$A" "$A" > "$work/valid.txt"
run_train 2 "${model[@]}" --train-weighted-split-paths-path "$work/train.txt" \
  --valid-weighted-split-paths-path "$work/valid.txt" --eval-interval 4 --metrics-file "$work/file.jsonl" \
  > "$work/file.log" 2>&1 || { tail -20 "$work/file.log"; exit 1; }
python3 - "$work/mode2.jsonl" "$work/file.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
key = lambda o: (o["iteration"], o.get("valid_name", ""), o.get("lm_loss"), o.get("valid_lm_loss"))
assert [key(o) for o in a] == [key(o) for o in b], "the -path file form differs from the inline groups"
PY
echo "file form: OK"

expect_usage() {  # grep-pattern flags...
  local pat=$1
  shift
  local rc=0
  run_train 1 "${model[@]}" "$@" > "$work/bad.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -q -- "$pat" "$work/bad.log" || { echo "expected exit 2 and '$pat', got $rc:"; cat "$work/bad.log"; exit 1; }
}
expect_usage "range 0.5:0.2 must satisfy" --train-weighted-split-paths "t: 1 0.5:0.2 $A"
expect_usage "are exclusive" --train-weighted-split-paths "t: 1 0:1 $A" --data-path "$A"
expect_usage "cannot read" --train-weighted-split-paths-path "$work/missing.txt"
expect_usage "holds no document" --train-weighted-split-paths "t: 1 0:0.001 $A"
echo "PASS"
