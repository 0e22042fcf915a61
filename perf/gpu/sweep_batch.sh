#!/bin/bash
# perf/gpu/sweep_batch.sh OUTDIR [BUDGET_S] [CONFIGS] — the perf/sweep sweep on a lent GPU machine, in one device call:
#   1. build `megaton` with CUDA (perf/gpu/setup.sh, TARGETS=megaton; a .deps/src.tar snapshot when present) -> build.log
#   2. perf/sweep/run_sweep.sh CONFIGS (default perf/sweep/configs/h200-1gpu.txt; on several GPUs e.g.
#      perf/sweep/configs/h100-x8.txt) with the PyTorch peer beside each single-GPU configuration -> OUTDIR/sweep/
#   3. `megaton plan --check OUTDIR/sweep/sweep.csv` (the cost model against what was just measured) -> check.txt
# Each configuration has its own timeout (the `timeout=` key); the whole batch stops within BUDGET_S (default 540).
# With this workplace's device tool:
#   git archive --format=tar HEAD > .deps/src.tar
#   run(command="bash perf/gpu/sweep_batch.sh $OUT 540", carry=[".deps/debs", ".deps/fallback", ".deps/src.tar"])
# then copy $OUT/sweep/ to perf/results/<date>-h200/ (sweep.csv, .json, .png, logs) and commit. When the GPU node's
# Python has no matplotlib, sweep.png is missing: `/usr/bin/python3 perf/sweep/sweep.py plot perf/results/<dir>` here.
set -uo pipefail
OUT=$(realpath -m "${1:?usage: sweep_batch.sh OUTDIR [BUDGET_S] [CONFIGS]}")
BUDGET_S=${2:-540}
REPO=$PWD
CONFIGS=$(realpath "${3:-$REPO/perf/sweep/configs/h200-1gpu.txt}")
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((T0 + BUDGET_S - $(date +%s))); }
stamp() { echo "[+$(($(date +%s) - T0))s] $*" | tee -a "$OUT/summary.txt"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SRC=$REPO
if [ -f "$REPO/.deps/src.tar" ]; then  # a `git archive` snapshot: edits in progress cannot break the build
  SRC=/tmp/megaton-src && rm -rf "$SRC" && mkdir -p "$SRC" && tar -xf "$REPO/.deps/src.tar" -C "$SRC"
fi
BUILD=$SRC/build-gpu
( export SRC BUILD JOBS=$(nproc) DEPS="$REPO/.deps" TARGETS=megaton
  timeout 240 bash "$SRC/perf/gpu/setup.sh" ) > "$OUT/build.log" 2>&1
stamp "build exit code $?"
grep -E 'error:|FAILED:' "$OUT/build.log" | head -20
# shellcheck disable=SC1091
source "$BUILD/env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpus.txt" 2>&1
BUILD=$BUILD timeout $(( $(left) > 40 ? $(left) - 20 : 20 )) bash "$SRC/perf/sweep/run_sweep.sh" "$CONFIGS" "$OUT/sweep" \
  > "$OUT/sweep.log" 2>&1
stamp "sweep exit code $?"
grep -E "^sweep:" "$OUT/sweep.log" | tee -a "$OUT/summary.txt"
[ -f "$OUT/sweep/sweep.csv" ] && "$BUILD/megaton" plan --check "$OUT/sweep/sweep.csv" > "$OUT/check.txt" 2>&1
tail -3 "$OUT/check.txt" 2>/dev/null | tee -a "$OUT/summary.txt"
stamp "done"
