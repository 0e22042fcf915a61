#!/bin/bash
# --async-save (2 ranks, TP=2, saves every 2 iterations), against the synchronous save of the same run (and --dry-run
# states the host memory it takes):
#   * the training losses are bit-identical, and every checkpoint holds the same tensors (inspect's CRC-32 of each)
#     and the same training state;
#   * a run resumed from an async checkpoint continues with the straight run's losses, bit for bit;
#   * training goes on while a save is being written: with the writes of iteration 4's file held (fault injection),
#     iteration 5 completes; SIGKILL then leaves `latest` at 2, no iteration 4 published, and iteration 2 loads.
# The full disk during a background write is tests/checkpoint/full_disk_test.sh's async case.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck disable=SC2046
args=($(tiny_model_args) $(tiny_lr_args) --tensor-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 4
      --train-iters 8 --save-interval 2 --data-path "$work/synth_text_document")
run() {  # run NAME ARGS...
  local name=$1
  shift
  run_train 2 "${args[@]}" "$@" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; fail "$name"; }
}
# --dry-run states the host memory the copies take.
"$MEGATON" train "${args[@]}" --save "$work/dry" --async-save --dry-run --world-size 2 > "$work/dry.log" 2>&1
grep -q -- "--async-save: [0-9.]* GiB of host memory per rank" "$work/dry.log" || { cat "$work/dry.log"; fail "dry run"; }
run sync --save "$work/sync"
run async --save "$work/async" --async-save
grep -q "the state copied to host memory in .* ms; writing it in the background" "$work/async.log" ||
  fail "no word of the background save"
grep -q "of host memory for the state's copy reserved in" "$work/async.log" || fail "no host memory reserved"
grep -q "saved checkpoint at iteration 8 to .* (written in the background in" "$work/async.log" ||
  fail "the last background save was not waited for"
echo -n "losses, async vs sync: "
compare_losses "$work/sync.jsonl" "$work/async.jsonl" 0
for it in 2 4 6 8; do
  d=$(printf "iter_%07d" $it)
  for v in sync async; do "$MEGATON" inspect --json "$work/$v/$d" > "$work/$v.$it.json"; done
  python3 - "$work/sync.$it.json" "$work/async.$it.json" <<'PY' || fail "iteration $it: the checkpoints differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["problems"] == [] and b["problems"] == [], (a["problems"], b["problems"])
assert a["tensors"] == b["tensors"], [k for k in a["tensors"] if a["tensors"][k] != b["tensors"].get(k)][:5]
assert a["state"] == b["state"] and a["iteration"] == b["iteration"]
PY
done
echo "checkpoints 2, 4, 6, 8: the same tensors (CRC-32) and state"

# Resume from the async checkpoint of iteration 2.
run first --save "$work/resume" --async-save --exit-interval 2
run second --save "$work/resume" --load "$work/resume" --async-save
echo -n "resumed at 2 vs straight: "
compare_losses "$work/sync.jsonl" "$work/second.jsonl" 0 3

# Training goes on during the write; a kill mid-write keeps the previous checkpoint.
("$MPIRUN" --oversubscribe --bind-to none -np 2 -x LD_PRELOAD="$BUILD/tests/megaton_fault_injection.so" \
  -x MEGATON_FAULT_STALL_PATH="*/iter_0000004.tmp-*/model_optim.h5" \
  "$MEGATON" train "${args[@]}" --save "$work/held" --async-save > "$work/held.log" 2>&1; true) 2> /dev/null &
job=$!
until grep -q "iteration        5/" "$work/held.log"; do
  kill -0 $job 2> /dev/null || { tail -30 "$work/held.log"; fail "the held run ended"; }
  sleep 0.1
done
compgen -G "$work/held/iter_0000004.tmp-*/model_optim.h5" > /dev/null || fail "iteration 4's file is not being written"
[ -d "$work/held/iter_0000004" ] && fail "iteration 4 was published while its writes were held"
echo "iteration 5 completed while iteration 4's checkpoint was being written"
pkill -9 -f -- "--save $work/held" || true
wait $job 2> /dev/null || true
[ "$(cat "$work/held/latest")" = 2 ] || fail "latest is '$(cat "$work/held/latest")', expected 2"
[ -d "$work/held/iter_0000004" ] && fail "iteration 4 was published"
"$MEGATON" inspect -q "$work/held" > "$work/held.inspect" || { cat "$work/held.inspect"; fail "inspect"; }
grep -q "iteration:       2" "$work/held.inspect" || fail "the surviving checkpoint is not iteration 2"
echo "PASS"
