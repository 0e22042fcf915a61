#!/usr/bin/env bash
# Checkpoint save/load throughput at several rank counts, beside torch::save/torch::load of the same tensors.
# Usage: perf/checkpoint/run.sh BUILD_DIR [HIDDEN] [LAYERS] [RANKS...]     (defaults: 1024 8 "1 2 4")
# Prints a table and keeps it in ${TMPDIR:-/tmp}/megaton-checkpoint-results-<host>.txt (data go there too).
set -euo pipefail
B=${1:?usage: run.sh BUILD_DIR [HIDDEN] [LAYERS] [RANKS...]}
H=${2:-1024}
L=${3:-8}
shift $(( $# > 3 ? 3 : $# ))
RANKS=${*:-1 2 4}
BIN=$B/perf/bench_checkpoint
OUT=${TMPDIR:-/tmp}/megaton-checkpoint-results-$(hostname).txt
MPIRUN=${MPIRUN:-mpirun}
{
  echo "# bench_checkpoint hidden=$H layers=$L on $(hostname), $(nproc --all) cores, $(date -u +%FT%TZ)"
  for n in $RANKS; do
    tp=$(( n >= 2 ? 2 : 1 ))
    pp=$(( n / tp ))
    echo "## $n ranks: TP=$tp PP=$pp"
    OMP_NUM_THREADS=1 "$MPIRUN" --oversubscribe --allow-run-as-root -np "$n" "$BIN" --hidden="$H" --layers="$L" \
      --tp=$tp --pp=$pp --dir="${TMPDIR:-/tmp}/megaton_bench_ckpt" --benchmark_counters_tabular=true --benchmark_color=false 2>&1 |
      grep -E "^(checkpoint|torch|Benchmark|---)" || true
  done
} | tee "$OUT"
