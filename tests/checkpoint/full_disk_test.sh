#!/usr/bin/env bash
# A full disk during a multi-rank save: every rank learns of the failed write and the job exits with the checkpoint
# error code (4) instead of hanging in HDF5's collectives; the partial temporary directory is removed; the previous
# checkpoint and the tracker stay, and load; also when the save runs in the background (--async-save). The "full disk" is tests/support/fault_injection.c (LD_PRELOAD): each
# rank may write a budget of bytes under the save directory, enough for the first save and not the second.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
PRELOAD="$BUILD/tests/megaton_fault_injection.so"
[ -f "$PRELOAD" ] || { echo "FAIL: $PRELOAD not built"; exit 1; }
fail() { echo "FAIL: $*"; tail -20 "$work/full.log" 2>/dev/null; exit 1; }
# shellcheck disable=SC2046
args=($(tiny_model_args) $(tiny_lr_args) --tensor-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 4
  --train-iters 6 --save-interval 2 --data-path "$work/synth_text_document")

# One save with room to spare: what each rank writes per save.
run_train 2 "${args[@]}" --train-iters 6 --exit-interval 2 --save "$work/probe" > "$work/probe.log" 2>&1 || { cat "$work/probe.log"; exit 1; }
size=$(stat -c %s "$work/probe/iter_0000002/model_optim.h5")
echo "checkpoint file: $size bytes"

# full_save CASE ENV...: a 2-rank run saving at iterations 2 and 4 whose ranks see a disk that fills up; then checks
# that the job ended with exit code 4 (no hang), said so on every rank, and left iteration 2 published and intact.
full_save() {
  local name=$1
  shift
  local envs=() e
  for e in "$@"; do envs+=(-x "$e"); done
  rm -rf "$work/ckpt"
  set +e
  timeout 300 "$MPIRUN" --oversubscribe --bind-to none -np 2 -x LD_PRELOAD="$PRELOAD" \
    -x MEGATON_FAULT_ENOSPC_DIR="$work/ckpt" "${envs[@]}" \
    "$MEGATON" train "${args[@]}" "${extra[@]}" --distributed-timeout-minutes 0.5 --save "$work/ckpt" > "$work/full.log" 2>&1
  local rc=$?
  set -e
  [ $rc -ne 124 ] || fail "$name: the job hung (killed by timeout)"
  [ $rc -eq 4 ] || fail "$name: exit code $rc, expected 4 (checkpoint error)"
  grep -q "checkpoint error: .*iteration 4" "$work/full.log" || fail "$name: no checkpoint error for iteration 4"
  grep -q "previous checkpoint" "$work/full.log" || fail "$name: no word that the previous checkpoint stands"
  [ "$(cat "$work/ckpt/latest")" = 2 ] || fail "$name: latest is '$(cat "$work/ckpt/latest")', expected 2"
  [ -d "$work/ckpt/iter_0000004" ] && fail "$name: iteration 4 was published"
  local left
  left=$(find "$work/ckpt" -maxdepth 1 -name '*.tmp-*')
  [ -z "$left" ] || fail "$name: temporary directory left: $left"
  "$MEGATON" inspect -q "$work/ckpt" > "$work/inspect.log" || { cat "$work/inspect.log"; fail "$name: inspect"; }
  echo "$name: exit 4, iteration 2 intact"
}

extra=()
# The space check before writing catches it: each rank's budget holds one reservation of the whole file, not two.
full_save "space check" MEGATON_FAULT_ENOSPC_AFTER=$((size * 5 / 4))
n=$(grep -o "checkpoint error: .*saving iteration 4 .* failed: the checkpoint needs" "$work/full.log" | wc -l)
[ "$n" = 1 ] || fail "space check: the missing space was reported $n times, expected once for the job"
# The disk fills up in the middle of the write (the space check passes): every rank fails with it, or the I/O watchdog
# ends a job whose ranks HDF5 left waiting.
full_save "mid-write" MEGATON_FAULT_ENOSPC_AFTER=$((size * 3 / 4)) MEGATON_FAULT_FALLOCATE_OK=1
# The same during a background write (--async-save): the job fails at the iteration where both ranks have seen it end.
extra=(--async-save)
full_save "async mid-write" MEGATON_FAULT_ENOSPC_AFTER=$((size * 3 / 4)) MEGATON_FAULT_FALLOCATE_OK=1
extra=()
# The disk fills up during HDF5's metadata flush, inside its own collectives: the I/O watchdog ends the job after
# --distributed-timeout-minutes (0.5 here).
full_save "metadata flush" MEGATON_FAULT_ENOSPC_AFTER=$((size)) MEGATON_FAULT_FALLOCATE_OK=1
# The surviving checkpoint resumes (at another layout, without the fault).
run_train 1 "${args[@]}" --tensor-model-parallel-size 1 --train-iters 6 --exit-interval 4 --load "$work/ckpt" --save "$work/ckpt2" \
  > "$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "resume from iteration 2"; }
grep -q "iteration 2" "$work/resume.log" || fail "the resume did not start from iteration 2"
echo PASS
