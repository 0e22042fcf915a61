#!/bin/bash
# perf/dp_scaling/run.sh [BUILD_DIR (build-gpu)] — data-parallel weak scaling of `megaton train` with the gradient
# reduction overlapped with backward (the default) and not (--no-overlap-grad-reduce), one rank per GPU over NCCL:
# GPT 1.3B (24 x 2048, seq 2048, micro-batch 8, 2 micro-batches per rank: global batch 16 x DP), bf16, random tokens,
# 30 iterations, the median of the log lines after iteration 10. Prints tokens/s per GPU and its efficiency against
# one GPU (goal: 97% at 8 GPUs with overlap), plus the exposed DP communication the log reports.
# Environment: GPUS (the counts to run, default "1 2 4 8", those above the node's GPU count skipped), MODES ("on off"),
# ITERS (30), LAYERS HIDDEN HEADS SEQ MBS ACC (24 2048 16 2048 8 2), MPIRUN (mpirun), DEVICE BACKEND (cuda nccl),
# ZERO (0; 1: --zero-stage 1, whose parameter all-gather the "off" mode also stops overlapping:
# --no-overlap-param-gather).
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build=$(realpath -m "${1:-$src/build-gpu}")
[ -f "$build/env.sh" ] && source "$build/env.sh"
GPUS=${GPUS:-1 2 4 8} MODES=${MODES:-on off} ITERS=${ITERS:-30} MPIRUN=${MPIRUN:-mpirun}
LAYERS=${LAYERS:-24} HIDDEN=${HIDDEN:-2048} HEADS=${HEADS:-16} SEQ=${SEQ:-2048} MBS=${MBS:-8} ACC=${ACC:-2}
have=${HAVE:-$(nvidia-smi -L 2> /dev/null | wc -l)}  # HAVE: rank slots where there is no GPU (a CPU check)
DEVICE=${DEVICE:-cuda} BACKEND=${BACKEND:-nccl} ZERO=${ZERO:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$src/perf/gpu/synth_data.py" "$work/synth_text_document" > /dev/null
printf "%-5s %-8s %14s %12s %12s %22s\n" GPUs overlap "ms/iteration" "tokens/s/GPU" efficiency "exposed dp comm (ms)"
base=""
for n in $GPUS; do
  if [ "$n" -gt "$have" ]; then echo "($n GPUs: this node has $have; skipped)"; continue; fi
  for mode in $MODES; do
    flags=(--zero-stage "$ZERO")
    [ "$mode" = off ] && flags+=(--no-overlap-grad-reduce --no-overlap-param-gather)
    log="$work/dp${n}_$mode.log"
    $MPIRUN -np "$n" --bind-to none "$build/megaton" train --vocab-size 50257 --data-path "$work/synth_text_document" \
      --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5 --eval-interval 100000 --eval-iters 1 --device "$DEVICE" \
      --distributed-backend "$BACKEND" --seed 1234 --hidden-dropout 0 --attention-dropout 0 --train-iters "$ITERS" \
      --log-interval 5 --num-layers "$LAYERS" --hidden-size "$HIDDEN" --num-attention-heads "$HEADS" \
      --seq-length "$SEQ" --max-position-embeddings "$SEQ" --micro-batch-size "$MBS" \
      --global-batch-size $((MBS * ACC * n)) "${flags[@]}" > "$log" 2>&1 || { tail -20 "$log"; exit 1; }
    read -r ms tps dp < <(python3 - "$log" "$n" $((MBS * ACC * n * SEQ)) <<'PY'
import re, statistics, sys
tps, dp = [], []
for line in open(sys.argv[1]):
    m = re.search(r" iteration +(\d+)/.*tokens per second: ([0-9.]+)", line)
    if m and int(m.group(1)) > 10:
        tps.append(float(m.group(2)))
        d = re.search(r"exposed dp comm \(ms\): ([0-9.]+)", line)
        dp.append(float(d.group(1)) if d else 0.0)
t = statistics.median(tps)
print(f"{1e3 * int(sys.argv[3]) / t:.1f} {t / int(sys.argv[2]):.0f} {statistics.median(dp):.1f}")
PY
)
    [ -z "$base" ] && base=$tps
    eff=$(awk "BEGIN { printf \"%.1f%%\", 100 * $tps / $base }")
    printf "%-5s %-8s %14s %12s %12s %22s\n" "$n" "$mode" "$ms" "$tps" "$eff" "$dp"
  done
done
