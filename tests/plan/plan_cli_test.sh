#!/bin/bash
# megaton plan end to end: the ranked table and its recommendation, limits, the refusal of impossible inputs (exit 2,
# the flag named), --check against the measured H200 points of the built-in calibration and the CPU points,
# --calibration from a CSV, and a tiny sweep (perf/sweep/run_sweep.sh: two configurations of
# `megaton train` on this machine) whose CSV `plan --check` reads.
set -u
BUILD=$1 SRC=$2
megaton=$BUILD/megaton
source "$(dirname "$0")/../support/expect_lib.sh"  # expect NAME WANT_RC PATTERN COMMAND...; fail
m13="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --bf16"
h200=$SRC/src/plan/calibration_h200.csv  # the built-in calibration's points
cpu=$SRC/tests/plan/data/sweep_cpu_2core.csv
expect "help"                 0 "--inter-node-gbps" $megaton plan --help
expect "table"                0 "rank +layout +mb +M +rc +mem GiB +fits +ms/iter" $megaton plan $m13 --global-batch-size 512 --nodes 4
expect "recommendation"       0 "^recommendation: --tensor-model-parallel-size [0-9]+ --pipeline-model-parallel-size [0-9]+" \
  $megaton plan $m13 --global-batch-size 512 --nodes 4
expect "breakdown"            0 "time: compute .* TP all-reduce .* PP bubble .* DP grads .* optimizer" \
  $megaton plan $m13 --global-batch-size 512 --nodes 4
expect "limits"               0 "^ +1 +TP2xPP2xDP2 +4 " $megaton plan $m13 --global-batch-size 64 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --micro-batch-size 4 --recompute off
expect "nothing fits"         0 "recommendation: none" $megaton plan $m13 --global-batch-size 8 --gpus-per-node 1 \
  --gpu-memory-gib 16
# The recommended layout is never one the table marks as not fitting.
out=$($megaton plan $m13 --global-batch-size 64 --gpu-memory-gib 24 --top 0)
rec=$(sed -nE 's/^recommendation: --tensor-model-parallel-size ([0-9]+) --pipeline-model-parallel-size ([0-9]+) \(DP ([0-9]+)\) --micro-batch-size ([0-9]+)( --checkpoint-activations)?:.*/TP\1xPP\2xDP\3 \4 \5/p' <<<"$out")
read -r lay mb rc <<<"$rec"
rcw=$([ -n "$rc" ] && echo on || echo off)
if grep -qE "^ +[0-9]+ +$lay +$mb +[0-9]+ +$rcw +[0-9.]+ +yes " <<<"$out"; then echo "PASS recommended fits ($lay mb$mb rc $rcw)"
else echo "FAIL recommended layout '$rec' is not a fitting row"; echo "$out" | head -20; fail=1; fi

expect "bad TP"               2 "--tensor-model-parallel-size \(3\) must divide --gpus-per-node" \
  $megaton plan $m13 --global-batch-size 64 --tensor-model-parallel-size 3
expect "bad PP"               2 "--num-layers \(24\) must be divisible by --pipeline-model-parallel-size \(5\)" \
  $megaton plan $m13 --global-batch-size 64 --pipeline-model-parallel-size 5
expect "no batch"             2 "--global-batch-size is required" $megaton plan $m13
expect "no layers"            2 "--num-layers is required" $megaton plan --hidden-size 64 --num-attention-heads 4 \
  --seq-length 32 --global-batch-size 8
expect "heads vs hidden"      2 "--hidden-size \(100\) must be divisible by --num-attention-heads \(3\)" \
  $megaton plan --num-layers 2 --hidden-size 100 --num-attention-heads 3 --seq-length 32 --global-batch-size 8
expect "bad nodes"            2 "--nodes must be >= 1" $megaton plan $m13 --global-batch-size 64 --nodes 0
expect "bad memory"           2 "--gpu-memory-gib must be > 0" $megaton plan $m13 --global-batch-size 64 --gpu-memory-gib -1
expect "bad link"             2 "--intra-node-gbps must be > 0" $megaton plan $m13 --global-batch-size 64 --intra-node-gbps 0
expect "bad zero"             2 "--zero-stage: 0 or 1" $megaton plan $m13 --global-batch-size 64 --zero-stage 3
expect "bad recompute"        2 "--recompute: expected both\|on\|off" $megaton plan $m13 --global-batch-size 64 --recompute maybe
expect "indivisible batch"    2 "no layout of 8 GPUs" $megaton plan $m13 --global-batch-size 7 --gpus-per-node 8 \
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1
expect "typo"                 2 "did you mean --peak-tflops" $megaton plan $m13 --global-batch-size 64 --peak-tflop 900
# A whole `megaton train` line: the flags the plan does not depend on are accepted and named, a typo still is not.
expect "train line"           0 "^ignored \(megaton train flags the plan does not depend on\): --data-path, --vocab-file, --lr, --save" \
  $megaton plan $m13 --global-batch-size 64 --data-path /no/such_text_document --vocab-file v.json --lr 1e-4 \
  --save /no/ckpt
expect "train line table"     0 "^recommendation: " $megaton plan $m13 --global-batch-size 64 --data-path x --train-iters 10
expect "train line typo"      2 "did you mean --data-path" $megaton plan $m13 --global-batch-size 64 --data-pth x
expect "missing calibration"  2 "--calibration: cannot open '/nonexistent.csv'" $megaton plan $m13 \
  --global-batch-size 64 --calibration /nonexistent.csv

expect "check h200"           0 "mean \|error\| [0-4]\.[0-9]%, worst [0-9.]+% over 7 point\(s\); leave-one-out mean" \
  $megaton plan --check "$h200"
expect "check h200 rows"      0 "h200 1.3B-mb8-rc TP1xPP1xDP1 mb8 rc +320.1" $megaton plan --check "$h200"
expect "built-in h200"        0 "calibration \(built-in: fitted to src/plan/calibration_h200.csv\)" \
  $megaton plan $m13 --global-batch-size 512 --nodes 4
expect "check h200 refit"     0 "mean \|error\| [0-5]\.[0-9]%, worst [0-9.]+% over 7 point\(s\)" \
  $megaton plan --check "$h200" --calibration "$h200"
expect "check cpu LOO"        0 "leave-one-out mean \|error\|" $megaton plan --check "$cpu"
expect "calibration cpu"      0 "calibration \(fitted to [0-9]+ measured points of .*cpu_2core" \
  $megaton plan --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 64 --vocab-size 512 \
  --make-vocab-size-divisible-by 8 --global-batch-size 8 --gpus-per-node 2 --peak-tflops 0.166 --calibration "$cpu"
expect "check with calibration" 0 "time error" $megaton plan --check "$h200" --calibration "$cpu"

# A tiny sweep on this machine, end to end: CSV, JSON, and plan --check on its output.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/configs.txt" <<'CFG'
defaults device=cpu backend=mpi precision=fp32 vocab=128 divisible_by=8 iters=5 skip=2 peak_tflops=0.166 peer=off
name=a layers=2 hidden=32 heads=4 seq=16 mb=2 gbs=4
name=b layers=2 hidden=32 heads=4 seq=16 mb=2 gbs=4 dp=2 zero=1
CFG
MACHINE=test BUILD=$BUILD MPIRUN=${MPIRUN:-mpirun} bash "$SRC/perf/sweep/run_sweep.sh" "$tmp/configs.txt" "$tmp/out" \
  > "$tmp/sweep.log" 2>&1
if [ $? -eq 0 ] && [ "$(grep -c ',ok,' "$tmp/out/sweep.csv")" = 2 ] && [ -s "$tmp/out/sweep.json" ]; then
  echo "PASS sweep (2 configurations)"
else echo "FAIL sweep:"; cat "$tmp/sweep.log" | tail -20; cat "$tmp/out/sweep.csv" 2>/dev/null; fail=1; fi
expect "check sweep"          0 "test a TP1xPP1xDP1 mb2" $megaton plan --check "$tmp/out/sweep.csv"
exit $fail
