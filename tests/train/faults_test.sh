#!/usr/bin/env bash
# Faults during a 2-rank training job, each with its expected exit code and the checkpoint that must survive:
#   read-only save directory   exit 4 at the first save, nothing written, no hang
#   SIGTERM to every rank      the job saves where it stands and exits 0; that checkpoint is complete and loads
#   SIGTERM during a save      the save completes, the job exits 0 without saving twice; the checkpoint is complete;
#                              with --async-save the stop waits for the background write, then saves where it stands
#   one rank SIGKILLed         the job ends (no hang); the last published checkpoint is intact and resumes
#   full disk mid-save         exit 4 on every rank; the previous checkpoint stands (tests/checkpoint/full_disk_test.sh)
#   SIGKILL mid-save           the previous checkpoint stands; the next save removes the temporary (kill_test.sh)
# No case waits on a fixed clock: each waits for a file or a log line, however long the machine takes.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
fail() { echo "FAIL: $*"; tail -20 "$work/run.log" 2>/dev/null; exit 1; }
# shellcheck disable=SC2046
args=($(tiny_model_args) $(tiny_lr_args) --tensor-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 4
  --data-path "$work/synth_text_document")
table=()
row() { table+=("$(printf '%-24s exit %-4s %s' "$1" "$2" "$3")"); }

# A background 2-rank job with a unique tag on its command line, so its ranks can be found and signalled.
mpi_env=()  # -x NAME=VALUE options for the ranks of the next start_job
start_job() {
  local tag=$1
  shift
  "$MPIRUN" --oversubscribe --bind-to none -np 2 ${mpi_env[@]+"${mpi_env[@]}"} "$MEGATON" train "${args[@]}" --tensorboard-dir "$work/tb-$tag" "$@" \
    > "$work/run.log" 2>&1 &
  JOB=$!
}
rank_pids() { pgrep -f -- "--tensorboard-dir $work/tb-$1" | grep -v "^$JOB\$" || true; }
job_rc() {  # waits for the background job; its exit code in $rc
  set +e
  wait $JOB
  rc=$?
  set -e
}
wait_for_log() {  # wait_for_log PATTERN: until run.log matches (or the job ended)
  until grep -q "$1" "$work/run.log"; do
    kill -0 $JOB 2>/dev/null || fail "the job ended before '$1'"
    sleep 0.1
  done
}

# 1. Read-only save directory (root ignores permissions: a file in the way of the directory stands in for it).
: > "$work/readonly"
set +e
run_train 2 "${args[@]}" --train-iters 4 --save-interval 2 --save "$work/readonly/ckpt" > "$work/run.log" 2>&1
rc=$?
set -e
[ $rc -eq 4 ] || fail "read-only: exit $rc, expected 4"
grep -q "checkpoint error: .*cannot create directory" "$work/run.log" || fail "read-only: no clear error"
row "read-only save dir" $rc "clear checkpoint error, nothing written"

# 2. SIGTERM to every rank while training: save where it stands, exit 0.
start_job term --train-iters 100000 --save "$work/term" --save-interval 100000 --log-interval 1
wait_for_log "iteration        3/"
for p in $(rank_pids term); do kill -TERM "$p"; done
job_rc
[ $rc -eq 0 ] || fail "SIGTERM: exit $rc, expected 0 after the save"
grep -q "SIGTERM/SIGUSR1 received" "$work/run.log" || fail "SIGTERM: the log does not say why it stopped"
it=$(cat "$work/term/latest")
"$MEGATON" inspect -q "$work/term" > "$work/inspect.log" || fail "SIGTERM: the checkpoint of iteration $it is damaged"
row "SIGTERM" $rc "saved iteration $it, intact"

# 3. SIGTERM while a save is being written (its writes held by the fault-injection library until the signal is sent).
sigterm_mid_save() {  # TAG WHAT FLAGS...: starts a job whose save of iteration 2 is held, SIGTERMs it, releases it
  local tag=$1 what=$2
  shift 2
  mpi_env=(-x LD_PRELOAD="$BUILD/tests/megaton_fault_injection.so" -x MEGATON_FAULT_STALL_PATH="*/iter_0000002.tmp-*/*.h5"
    -x MEGATON_FAULT_STALL_UNTIL="$work/release-$tag")
  start_job "$tag" --train-iters 100000 --save "$work/$tag" --save-interval 2 --log-interval 1 "$@"
  mpi_env=()
  until compgen -G "$work/$tag/iter_0000002.tmp-*/model_optim.h5" > /dev/null; do
    kill -0 $JOB 2>/dev/null || fail "$what: the job ended before the save"
    sleep 0.1
  done
  for p in $(rank_pids "$tag"); do kill -TERM "$p"; done
  : > "$work/release-$tag"
  job_rc
  [ $rc -eq 0 ] || fail "$what: exit $rc, expected 0 after the save"
}
sigterm_mid_save midsave "SIGTERM mid-save"
[ "$(cat "$work/midsave/latest")" = 2 ] || fail "SIGTERM mid-save: latest is $(cat "$work/midsave/latest"), expected 2"
"$MEGATON" inspect -q "$work/midsave" > "$work/inspect.log" || fail "SIGTERM mid-save: iteration 2 is damaged"
row "SIGTERM during a save" $rc "iteration 2 completed, intact"

# 3b. The same while the save is written in the background (--async-save): training goes on, and the stop waits for
# the write in flight before its own save.
sigterm_mid_save midasync "SIGTERM mid-async-save" --async-save
it=$(cat "$work/midasync/latest")
[ "$it" -ge 2 ] && [ -d "$work/midasync/iter_0000002" ] || fail "SIGTERM mid-async-save: iteration 2 missing (latest $it)"
"$MEGATON" inspect -q "$work/midasync/iter_0000002" > "$work/inspect.log" ||
  fail "SIGTERM mid-async-save: iteration 2 is damaged"
"$MEGATON" inspect -q "$work/midasync" > "$work/inspect.log" || fail "SIGTERM mid-async-save: iteration $it is damaged"
row "SIGTERM, async save" $rc "iteration 2 completed, then $it saved; intact"

# 4. One rank SIGKILLed after a checkpoint: the job ends, the checkpoint stands and resumes.
start_job kill --train-iters 100000 --save "$work/kill" --save-interval 2 --log-interval 1
until [ -f "$work/kill/latest" ]; do kill -0 $JOB 2>/dev/null || fail "killed rank: the job ended early"; sleep 0.1; done
wait_for_log "iteration        5/"
kill -KILL "$(rank_pids kill | tail -1)"
job_rc
[ $rc -ne 0 ] || fail "killed rank: the job exited 0"
it=$(cat "$work/kill/latest")
"$MEGATON" inspect -q "$work/kill" > "$work/inspect.log" || fail "killed rank: iteration $it is damaged"
run_train 2 "${args[@]}" --train-iters 100000 --exit-interval $((it + 2)) --load "$work/kill" > "$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; fail "killed rank: resume from iteration $it"; }
row "rank SIGKILLed" $rc "iteration $it intact, resumes"

printf '%s\n' "${table[@]}"
echo PASS
