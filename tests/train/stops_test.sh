#!/bin/bash
# Exit triggers leave a loadable checkpoint: the kill switch (--kill-switch-path, exit 0), --exit-duration-in-mins,
# SIGTERM (one rank run directly) and SIGUSR1 (sent to each of 2 ranks, as SLURM's --signal does); signals exit 0 once saved
# (interrupted, docs/errors.md). --skip-train-iteration-range skips data as the fork's loop does. --eval-only
# evaluates the loaded weights as the training loop would. A constant loss scale so large that every gradient
# overflows: each step is skipped and counted, the weights never change.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work  # $work: a scratch directory (removed at exit) with the synthetic dataset
common=($(tiny_model_args) $(tiny_lr_args) --lr-decay-iters 100 --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 4)
latest() { cat "$1/latest"; }

# Kill switch present at start: as the fork, exit 0 before anything is loaded, trained or saved.
touch "$work/kill"
run_train 2 "${common[@]}" --train-iters 50 --save "$work/k" --save-interval 100 --kill-switch-path "$work/kill" \
  > "$work/kill.log" 2>&1 || { tail -20 "$work/kill.log"; exit 1; }
grep -q "kill switch .* found at start: exiting without training" "$work/kill.log" && [ ! -e "$work/k/latest" ] &&
  ! grep -q "iteration        1/" "$work/kill.log" || { tail -20 "$work/kill.log"; exit 1; }
# Kill switch appearing during training: the iteration every rank agrees on is saved, exit 0, and it resumes.
rm "$work/kill"
run_train 2 "${common[@]}" --train-iters 100000 --save "$work/k" --save-interval 100000 --kill-switch-path \
  "$work/kill" --metrics-file "$work/kill.jsonl" > "$work/kill.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  [ -s "$work/kill.jsonl" ] && [ "$(wc -l < "$work/kill.jsonl")" -ge 2 ] && break
  sleep 0.2
done
touch "$work/kill"
wait "$pid" || { tail -20 "$work/kill.log"; exit 1; }
it=$(latest "$work/k")
grep -q "stopping at iteration $it: kill switch file found" "$work/kill.log" && [ "$it" -ge 2 ] ||
  { tail -20 "$work/kill.log"; exit 1; }
run_train 2 "${common[@]}" --train-iters $((it + 1)) --load "$work/k" > "$work/kill2.log" 2>&1 ||
  { tail -20 "$work/kill2.log"; exit 1; }
grep -q "loaded .* at iteration $it" "$work/kill2.log" || { echo "kill-switch checkpoint did not resume"; exit 1; }
echo "kill switch: OK"

# --exit-duration-in-mins (counted from the processes' start): a run asked for 100000 iterations stops after ~1.2 s at
# an iteration every rank agrees on, saves it, exits 0.
run_train 2 "${common[@]}" --train-iters 100000 --save "$work/d" --save-interval 100000 --exit-duration-in-mins 0.02 \
  > "$work/duration.log" 2>&1 || { tail -20 "$work/duration.log"; exit 1; }
it=$(latest "$work/d")
grep -q "stopping at iteration $it: --exit-duration-in-mins" "$work/duration.log" && [ "$it" -ge 1 ] &&
  [ "$it" -lt 100000 ] || { tail -20 "$work/duration.log"; exit 1; }
echo "exit duration: stopped and saved at iteration $it: OK"

# --train-tokens: 4 samples of 16 tokens an iteration, so a budget of 3 x 64 - 1 tokens ends training after iteration 3
# (Megatron's loop condition consumed < budget), as a normal end: final evaluation and save. Resuming with a larger
# budget goes on from the checkpoint's consumed tokens: 5 x 64 ends after iteration 5.
run_train 2 "${common[@]}" --train-iters 50 --train-tokens 191 --save "$work/t" --save-interval 100 \
  > "$work/tokens.log" 2>&1 || { tail -20 "$work/tokens.log"; exit 1; }
grep -q "stopping at iteration 3: --train-tokens reached" "$work/tokens.log" && [ "$(latest "$work/t")" = 3 ] &&
  grep -q "validation loss at iteration 3 " "$work/tokens.log" || { tail -20 "$work/tokens.log"; exit 1; }
run_train 2 "${common[@]}" --train-iters 50 --train-tokens 320 --load "$work/t" --save "$work/t" --save-interval 100 \
  > "$work/tokens2.log" 2>&1 || { tail -20 "$work/tokens2.log"; exit 1; }
grep -q "stopping at iteration 5: --train-tokens reached" "$work/tokens2.log" && [ "$(latest "$work/t")" = 5 ] ||
  { tail -20 "$work/tokens2.log"; exit 1; }
echo "train tokens: stopped at iterations 3 and 5: OK"

# --eval-only evaluates the loaded weights exactly as the training loop's final evaluation would (same samples, same
# loss to the last digit), trains nothing and writes no checkpoint.
run_train 2 "${common[@]}" --train-iters 3 --exit-interval 3 --save "$work/e" --save-interval 100 \
  > "$work/e.log" 2>&1 || { tail -20 "$work/e.log"; exit 1; }
run_train 2 "${common[@]}" --train-iters 3 --load "$work/e" --eval-only --metrics-file "$work/eval_only.jsonl" \
  > "$work/eval_only.log" 2>&1 || { tail -20 "$work/eval_only.log"; exit 1; }
! grep -q "iteration        [0-9]*/" "$work/eval_only.log" && [ "$(latest "$work/e")" = 3 ] &&
  [ ! -d "$work/e/iter_0000004" ] || { echo "--eval-only trained or saved"; tail -20 "$work/eval_only.log"; exit 1; }
run_train 2 "${common[@]}" --train-iters 3 --load "$work/e" --metrics-file "$work/eval_loop.jsonl" \
  > "$work/eval_loop.log" 2>&1 || { tail -20 "$work/eval_loop.log"; exit 1; }
python3 - "$work/eval_only.jsonl" "$work/eval_loop.jsonl" <<'PY'
import json, sys
a, b = ([o["valid_lm_loss"] for o in map(json.loads, open(p)) if "valid_lm_loss" in o] for p in sys.argv[1:])
assert len(a) == 1 and len(b) == 1 and a == b, (a, b)
print(f"eval-only valid loss {a[0]!r} == training loop's")
PY
echo "eval only: OK"

# Signals: start a long run, wait for a few iterations, signal, expect a checkpoint and exit 0.
signal_run() {  # name signal np
  local name=$1 sig=$2 np=$3
  local launch=("$MEGATON")
  [ "$np" = 1 ] || launch=("$MPIRUN" --oversubscribe --bind-to none -np "$np" "$MEGATON")
  "${launch[@]}" train "${common[@]}" --train-iters 100000 --save "$work/$name" --save-interval 100000 \
    --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    [ -s "$work/$name.jsonl" ] && [ "$(wc -l < "$work/$name.jsonl")" -ge 3 ] && break
    sleep 0.2
  done
  if [ "$np" = 1 ]; then
    kill -s "$sig" "$pid"
  else  # every rank, as srun --signal does (mpirun would forward USR1 too, but not every build does)
    for child in $(pgrep -P "$pid"); do kill -s "$sig" "$child"; done
  fi
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || { echo "$name: exit code $rc, expected 0 after the save"; tail -20 "$work/$name.log"; exit 1; }
  grep -q "SIGTERM/SIGUSR1 received" "$work/$name.log" || { tail -20 "$work/$name.log"; exit 1; }
  local it
  it=$(latest "$work/$name")
  [ "$it" -ge 3 ] || { echo "$name: checkpoint at iteration $it"; exit 1; }
  run_train "$np" "${common[@]}" --train-iters $((it + 2)) --load "$work/$name" > "$work/$name.resume.log" 2>&1 ||
    { tail -20 "$work/$name.resume.log"; exit 1; }
  grep -q "loaded .* at iteration $it" "$work/$name.resume.log" || { tail "$work/$name.resume.log"; exit 1; }
  echo "$name: stopped and saved at iteration $it, resumed: OK"
}
signal_run sigterm TERM 1
signal_run sigusr1 USR1 2

# Skipped iteration range, as the fork's loop: before iteration 3 (2 done) the data advances by 4 - 2 = 2 micro-batch
# groups (2 x micro-batch 2 x DP 1 = 4 samples) and the iteration counter stays; all 6 iterations train and count their
# samples. Iterations 1-2 match a run without the flag; iteration 3 reads the samples the plain run's iteration 4 reads.
run_train 1 "${common[@]}" --train-iters 6 --skip-train-iteration-range 3-4 --metrics-file "$work/skip.jsonl" \
  > "$work/skip.log" 2>&1 || { tail -20 "$work/skip.log"; exit 1; }
grep -q "Skipped iterations 3 to 4 due to --skip-train-iteration-range flag (2 micro-batches of data; 4 samples" \
  "$work/skip.log" || { tail -20 "$work/skip.log"; exit 1; }
run_train 1 "${common[@]}" --train-iters 6 --metrics-file "$work/noskip.jsonl" > "$work/noskip.log" 2>&1 ||
  { tail -20 "$work/noskip.log"; exit 1; }
python3 - "$work/skip.jsonl" "$work/noskip.jsonl" <<'PY'
import json, sys
skip, plain = ({o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o} for p in sys.argv[1:])
assert sorted(skip) == list(range(1, 7)) and skip[6]["consumed_samples"] == 24, skip
assert skip[1]["lm_loss"] == plain[1]["lm_loss"] and skip[2]["lm_loss"] == plain[2]["lm_loss"], (skip, plain)
assert skip[3]["lm_loss"] != plain[3]["lm_loss"], (skip[3], plain[3])
PY
echo "skip range: OK"

# Overflowing gradients: every step skipped and counted; the loss stays the same (weights untouched).
run_train 1 "${common[@]}" --train-iters 4 --bf16 --loss-scale 3e38 --metrics-file "$work/inf.jsonl" \
  > "$work/inf.log" 2>&1 || { tail -20 "$work/inf.log"; exit 1; }
python3 - "$work/inf.jsonl" <<'PY'
import json, sys
m = [o for o in map(json.loads, open(sys.argv[1])) if "valid_lm_loss" not in o]
assert len(m) == 4 and all(o["skipped_iterations"] == 1 and "lm_loss" not in o for o in m), m
assert m[-1]["total_skipped_iterations"] == 4, m[-1]
PY
grep -q "number of skipped iterations:   1" "$work/inf.log"
echo "overflow skipped and counted: OK"
echo "PASS"
