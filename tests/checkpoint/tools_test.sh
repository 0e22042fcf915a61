#!/usr/bin/env bash
# megaton inspect and megaton reshard on a checkpoint saved by 2 ranks at TP=2: listing, JSON output, checksum
# verification (a flipped byte is reported with exit code 4), reshard to TP=1 bf16 without optimizer, to a release
# checkpoint, refusal of a target TP that does not divide the heads, and loading the results.
# Usage: test_checkpoint_tools.sh BUILD_DIR SOURCE_DIR   (MPIRUN may name mpirun)
set -euo pipefail
B=$1
source "$(dirname "$0")/../support/ckpt_lib.sh"
ckpt_setup tools

# inspect: text
"$M" inspect "$D/a" >"$D/i.txt" || { cat "$D/i.txt"; fail "inspect"; }
grep -q "iteration:       5" "$D/i.txt" || fail "inspect: iteration"
grep -q "saved at:        TP=2 x PP=1 x DP=1 (world 2)" "$D/i.txt" || fail "inspect: layout"
grep -Eq "^model/layers.3.attention.qkv.weight +bfloat16 +\[4, 3, 2, 8\]" "$D/i.txt" || fail "inspect: qkv line"
grep -Eq "^optim/exp_avg/layers.0.mlp.fc2.weight +float32 +\[8, 16\]" "$D/i.txt" || fail "inspect: optim line"
grep -Eq "^model/embedding.word_embeddings.weight +bfloat16 +\[50, 8\]" "$D/i.txt" || fail "inspect: unpadded embedding"
N=$(grep -Ec "^(model|optim|rng)/" "$D/i.txt")
grep -q "checksums:       $N/$N OK" "$D/i.txt" || fail "inspect: checksums ($N tensors)"
# inspect: JSON, through python's parser
"$M" inspect --json "$D/a/iter_0000005" >"$D/i.json"
python3 - "$D/i.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["iteration"] == 5, j["iteration"]
assert j["saved_layout"] == {"tp": 2, "pp": 1, "dp": 1, "world": 2}, j["saved_layout"]
assert j["tensors"]["model/layers.1.mlp.fc1.weight"]["shape"] == [16, 8]
assert j["problems"] == [] and j["verified"]
assert j["model_config"]["num_attention_heads"] == 4
PY
# inspect: a flipped byte
cp -r "$D/a" "$D/bad"
"$PROBE" corrupt "$D/bad/iter_0000005/model_optim.h5" "model/layers.2.mlp.fc1.weight" || fail "corrupt"
set +e
"$M" inspect -q "$D/bad" >"$D/bad.txt" 2>&1
rc=$?
set -e
[ $rc -eq 4 ] || { cat "$D/bad.txt"; fail "inspect of a corrupt file exited $rc, expected 4"; }
grep -q "PROBLEM model/layers.2.mlp.fc1.weight: crc32 mismatch" "$D/bad.txt" || fail "inspect: problem line"
# reshard refuses a corrupt source
set +e
"$M" reshard --load "$D/bad" --save "$D/never" --target-tp 1 >"$D/r.txt" 2>&1
rc=$?
set -e
[ $rc -eq 4 ] || { cat "$D/r.txt"; fail "reshard of a corrupt file exited $rc"; }

# reshard: TP=1, bf16 (already), drop optimizer; load at TP=1 on one rank
"$M" reshard --load "$D/a" --save "$D/b" --target-tp 1 --target-pp 2 --drop-optimizer >"$D/r.txt" 2>&1 || { cat "$D/r.txt"; fail "reshard"; }
"$M" inspect "$D/b" >"$D/ib.txt" || fail "inspect b"
grep -q "saved at:        TP=1 x PP=2" "$D/ib.txt" || fail "reshard layout"
grep -q "^optim/" "$D/ib.txt" && fail "reshard kept the optimizer"
grep -q "^rng/" "$D/ib.txt" && fail "reshard kept the RNG states at a new layout"
"$MPIRUN" --oversubscribe -np 1 "$PROBE" load "$D/b" 1 5 | grep -q "LOADED OK iteration 5" || fail "load resharded"
# reshard to fp32 release; the fp32 model loads it exactly
"$M" reshard --load "$D/a" --save "$D/c" --dtype fp32 --release >"$D/r2.txt" 2>&1 || { cat "$D/r2.txt"; fail "reshard release"; }
[ "$(cat "$D/c/latest")" = "release" ] || fail "release tracker"
"$M" inspect "$D/c" >"$D/ic.txt" || fail "inspect c"
grep -Eq "^model/layers.0.mlp.fc1.weight +float32 +\[16, 8\]" "$D/ic.txt" || fail "fp32 conversion"
grep -Eq "^optim/master/layers.0.mlp.fc1.weight +float32" "$D/ic.txt" || fail "reshard without --drop-optimizer keeps it"
"$MPIRUN" --oversubscribe -np 2 "$PROBE" load "$D/c" 2 -1 float32 | grep -q "LOADED OK iteration -1" || fail "load release"
# reshard refuses a TP that does not divide the heads
set +e
"$M" reshard --load "$D/a" --save "$D/d" --target-tp 3 >"$D/r3.txt" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || { cat "$D/r3.txt"; fail "reshard --target-tp 3 exited $rc, expected 2"; }
grep -q "target-tp 3 does not divide the checkpoint's num_attention_heads (4)" "$D/r3.txt" || fail "reshard message"
# The spec's validator accepts what megaton wrote and refuses a tracker that points nowhere.
bash "$2/checkpoints-format/validate.sh" "$D/a" "$M" >"$D/v.txt" || { cat "$D/v.txt"; fail "validate a"; }
bash "$2/checkpoints-format/validate.sh" "$D/c" "$M" >"$D/v.txt" || { cat "$D/v.txt"; fail "validate c"; }
echo 8 >"$D/a/latest"
if bash "$2/checkpoints-format/validate.sh" "$D/a" "$M" >"$D/v.txt"; then fail "validate accepted a bad tracker"; fi
grep -q "latest names iter_0000008" "$D/v.txt" || { cat "$D/v.txt"; fail "validator message"; }
echo "PASS"
