#!/usr/bin/env bash
# A crash during a save never damages the previous checkpoint: a 2-rank job saves iteration 1, starts saving a large
# iteration 2 and is SIGKILLed (every rank) while iteration 2 is being written. Then `latest` still says 1, no
# iter_0000002/ was published, loading returns iteration 1 with the right values, and inspect verifies it; the next
# save removes the dead job's temporary directory. No timing is assumed: the fault-injection library
# (tests/support/fault_injection.c) holds every write to iteration 2's file until the kill.
# Usage: test_checkpoint_kill.sh BUILD_DIR SOURCE_DIR   (MPIRUN may name mpirun)
set -euo pipefail
B=$1
MPIRUN=${MPIRUN:-mpirun}
PROBE=$B/tests/ckpt_probe
D=$(mktemp -d "${TMPDIR:-/tmp}/megaton_kill_XXXXXX")
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; cat "$D/save.log" 2>/dev/null | tail -20; exit 1; }

"$MPIRUN" --oversubscribe -np 2 -x LD_PRELOAD="$B/tests/megaton_fault_injection.so" \
  -x MEGATON_FAULT_STALL_PATH="*/iter_0000002.tmp-*/model_optim.h5" "$PROBE" save-then-big "$D/ckpt" 2 4 >"$D/save.log" 2>&1 &
JOB=$!
# Wait (however long the machine takes) until iteration 2's file exists: its writes are then held.
until compgen -G "$D/ckpt/iter_0000002.tmp-*/model_optim.h5" >/dev/null; do
  kill -0 $JOB 2>/dev/null || fail "the probe ended before iteration 2 started"
  sleep 0.05
done
until [ -f "$D/ckpt/pid.0" ] && [ -f "$D/ckpt/pid.1" ]; do sleep 0.05; done
[ -d "$D/ckpt/iter_0000002" ] && fail "iteration 2 was published while its writes were held"
for f in "$D"/ckpt/pid.*; do kill -9 "$(cat "$f")" 2>/dev/null || true; done
kill -9 $JOB 2>/dev/null || true
wait $JOB 2>/dev/null || true
echo "killed the saving job; left: $(ls "$D/ckpt" | tr '\n' ' ')"

[ "$(cat "$D/ckpt/latest")" = "1" ] || fail "latest is '$(cat "$D/ckpt/latest")', expected 1"
[ -d "$D/ckpt/iter_0000002" ] && fail "iter_0000002 was published"
[ -f "$D/ckpt/iter_0000001/model_optim.h5" ] || fail "iter_0000001 is gone"

# Load at the saving layout and at another one.
"$MPIRUN" --oversubscribe -np 2 "$PROBE" load "$D/ckpt" 2 1 | tee "$D/load.log"
grep -q "LOADED OK iteration 1" "$D/load.log" || fail "load after the crash"
"$MPIRUN" --oversubscribe -np 1 "$PROBE" load "$D/ckpt" 1 1 | grep -q "LOADED OK iteration 1" || fail "load at TP=1"
"$B/megaton" inspect -q "$D/ckpt" >"$D/inspect.log" || { cat "$D/inspect.log"; fail "inspect"; }
grep -q "iteration:       1" "$D/inspect.log" || fail "inspect iteration"
# A new save in the same directory succeeds and removes the killed job's temporary directory (its writer is gone).
"$MPIRUN" --oversubscribe -np 2 "$PROBE" save "$D/ckpt" 2 3 >"$D/save3.log" 2>&1 || { cat "$D/save3.log"; fail "save 3"; }
grep -q "removed left-over temporary directory .*is gone" "$D/save3.log" || fail "the temporary directory was not removed"
compgen -G "$D/ckpt/iter_0000002.tmp-*" >/dev/null && fail "the temporary directory is still there"
[ "$(cat "$D/ckpt/latest")" = "3" ] || fail "latest after save 3"
echo "PASS"
