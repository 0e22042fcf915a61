#!/bin/bash
# megaton train at TP x PP x DP = 2x2x2, PP=4, PP=6 with stages of no transformer layer (DeepSpeed's type partition),
# DP=4 (with and without ZeRO-1) reproduces the loss curve of the
# single-rank run for 20 iterations within 1e-5 (fp32, same seed and data; global batch 16 in every layout); so does
# TP=2 with --sync-tp-duplicated-parameters. --log-params-norm gives the single rank's value at 2x2x2 and with ZeRO-1
# (each parameter counted once, shards summed); --log-num-zeros-in-grad is logged (its counting rule is checked by
# megaton_mpi_tests' OptimModelParallel.*: exact zeros of a real gradient depend on the order of its sums).
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work  # $work: a scratch directory (removed at exit) with the synthetic dataset
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 16
        --train-iters 20)

norms=(--log-params-norm --log-num-zeros-in-grad)
run_train 1 "${common[@]}" "${norms[@]}" --metrics-file "$work/ref.jsonl" --tensorboard-dir "$work/tb" \
  --log-batch-size-to-tensorboard --log-timers-to-tensorboard --tensorboard-queue-size 5 > "$work/ref.log"
grep -q "| num zeros: [0-9]*\.[0-9] | params norm: [0-9.]* |" "$work/ref.log" || { grep -m2 iteration "$work/ref.log"; exit 1; }
grep -q "iteration       20/      20" "$work/ref.log" || { cat "$work/ref.log"; exit 1; }
loss_decreases "$work/ref.jsonl"
# The TensorBoard events file decodes (independent reader), holds the same losses as the metrics file, and names its
# series as Megatron-DeepSpeed's training_log and evaluate_and_print_results do.
python3 "$SRC/tests/train/tensorboard_decode.py" "$work"/tb/events.out.tfevents.* > "$work/tb.json"
python3 - "$work/tb.json" "$work/ref.jsonl" <<'PY'
import json, sys
tb = json.load(open(sys.argv[1]))["scalars"]
m = {o["iteration"]: o for o in map(json.loads, open(sys.argv[2])) if "lm_loss" in o}
loss = {s["step"]: s["value"] for s in tb if s["tag"] == "lm-loss-training/lm loss"}
assert sorted(loss) == sorted(m), (sorted(loss), sorted(m))
assert all(abs(loss[i] - m[i]["lm_loss"]) < 1e-6 * max(1, m[i]["lm_loss"]) for i in m)
tags = {s["tag"] for s in tb}
for t in ["steps-vs-samples/y=steps,x=samples", "steps-vs-tokens/y=tokens,x=steps", "learning-rate/learning-rate",
          "learning-rate/learning-rate vs tokens", "batch-size/batch-size vs samples", "lm-loss-training/lm loss vs samples",
          "lm-loss-training/lm loss vs gigaflos (without embeddings)", "grad-norm/grad-norm", "params-norm/params-norm",
          "num-zeros/num-zeros", "iteration-time/iteration-time", "iteration-time/TFLOPs per gpu (estimated)",
          "forward-backward-time", "lm-loss-validation/lm loss validation",
          "lm-loss-validation/lm loss validation vs gigaflos (without embeddings)"]:
    assert t in tags, (t, sorted(tags))
steps = {s["step"]: s["value"] for s in tb if s["tag"] == "steps-vs-samples/y=samples,x=steps"}
assert steps[20] == 20 * 16, steps
PY

check() {  # name np flags...
  local name=$1 np=$2
  shift 2
  run_train "$np" "${common[@]}" "$@" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; exit 1; }
  echo -n "$name: "
  compare_losses "$work/ref.jsonl" "$work/$name.jsonl" 1e-5
}
same_norms() {  # name: params norm (relative 1e-5) as the single-rank run's, every iteration; num zeros present
  python3 - "$work/ref.jsonl" "$work/$1.jsonl" <<'PY'
import json, sys
ref, got = ({o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o} for p in sys.argv[1:])
assert sorted(ref) == sorted(got) and all("params_norm" in got[i] and "num_zeros" in got[i] for i in got), sys.argv[2]
bad = [(i, ref[i]["params_norm"], got[i]["params_norm"]) for i in ref
       if abs(ref[i]["params_norm"] - got[i]["params_norm"]) > 1e-5 * ref[i]["params_norm"]]
assert not bad, bad[:3]
assert all(isinstance(got[i]["num_zeros"], int) and got[i]["num_zeros"] >= 0 for i in got)
print(f"params norm {got[max(got)]['params_norm']:.6f} as the single rank's (num zeros {got[max(got)]['num_zeros']})")
PY
}
check tp2pp2dp2 8 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "${norms[@]}"
same_norms tp2pp2dp2
check pp4 4 --pipeline-model-parallel-size 4
# DeepSpeed's type partition of 4 layers over 6 stages: the embedding alone on the first, the LM head alone on the last.
check pp6-embedding-stages 6 --pipeline-model-parallel-size 6 --pp-partition-method 'type:transformer|embedding'
"$MEGATON" train "${common[@]}" --pipeline-model-parallel-size 6 --pp-partition-method 'type:transformer|embedding' \
  --dry-run --world-size 6 > "$work/pp6.plan" 2>&1
grep -q "layers per stage: 0 1 1 1 1 0" "$work/pp6.plan" || { echo "expected 0 1 1 1 1 0"; cat "$work/pp6.plan"; exit 1; }
check dp4 4
check tp2-sync-tp-duplicated 2 --tensor-model-parallel-size 2 --sync-tp-duplicated-parameters
check dp4zero1 4 --zero-stage 1 "${norms[@]}"
same_norms dp4zero1
grep -q "ZeRO-1 shard 1/4" "$work/dp4zero1.log" || { echo "no ZeRO-1 memory report"; exit 1; }
grep -q "ZeRO-1 (parameter all-gather overlapped with the forward)" "$work/dp4zero1.log" ||
  { echo "ZeRO-1's parameter all-gather is not overlapped by default"; exit 1; }
# The gradient reduction overlapped with backward (the default) and after it (--no-overlap-grad-reduce), and under
# ZeRO-1 the parameter all-gather overlapped with the next forward (the default) and at the end of the step
# (--no-overlap-param-gather): the same collectives of the same buckets, so bit-identical losses.
serial=(--no-overlap-grad-reduce --no-overlap-param-gather)
for z in 0 1; do
  run_train 4 "${common[@]}" --zero-stage $z "${serial[@]}" --metrics-file "$work/serial$z.jsonl" \
    > "$work/serial$z.log" 2>&1 || { tail -30 "$work/serial$z.log"; exit 1; }
  echo -n "${serial[*]}, ZeRO stage $z: "
  compare_losses "$work/$([ $z = 0 ] && echo dp4 || echo dp4zero1).jsonl" "$work/serial$z.jsonl" 0
done
grep -q "overlapped with the forward" "$work/serial1.log" && { echo "--no-overlap-param-gather still overlaps"; exit 1; }
# Exposed communication: the DP and PP groups' time in the line and the metrics (none at one rank, none for PP at DP).
python3 - "$work" <<'PY'
import json, re, sys
w = sys.argv[1]
def timers(name):
    rows = [o for o in map(json.loads, open(f"{w}/{name}.jsonl")) if "lm_loss" in o]
    return [o.get("timer_ms", {}) for o in rows]
assert all("dp-comm" not in t and "pp-comm" not in t for t in timers("ref")), timers("ref")[0]
assert all(t.get("dp-comm", 0) > 0 and "pp-comm" not in t for t in timers("dp4")), timers("dp4")[0]
assert all(t.get("dp-comm", 0) > 0 and t.get("pp-comm", 0) > 0 for t in timers("tp2pp2dp2")), timers("tp2pp2dp2")[0]
line = next(l for l in open(f"{w}/tp2pp2dp2.log") if " iteration " in l and "exposed" in l)
assert re.search(r"\| exposed dp comm \(ms\): [0-9.]+ \| exposed pp comm \(ms\): [0-9.]+ \|$", line.strip()), line
print("exposed communication: dp-comm and pp-comm timed where DP / PP > 1, and in the iteration line")
PY
echo "PASS"
