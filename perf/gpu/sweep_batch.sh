#!/bin/bash
# perf/gpu/sweep_batch.sh OUTDIR [BUDGET_S] [CONFIGS] — the perf/sweep sweep on a lent GPU machine, in one device call:
#   1. build `megaton` with CUDA (perf/gpu/setup.sh, TARGETS=megaton; a .deps/src.tar snapshot when present) -> build.log
#   2. perf/sweep/run_sweep.sh CONFIGS (default perf/sweep/configs/h200-1gpu.txt; on several GPUs e.g.
#      perf/sweep/configs/h100-x8.txt) with the PyTorch peer beside each single-GPU configuration -> OUTDIR/sweep/
#   3. `megaton plan --check OUTDIR/sweep/sweep.csv` (the cost model against what was just measured) -> check.txt
# Each configuration has its own timeout (the `timeout=` key); the whole batch stops within BUDGET_S (default 540).
# With this workplace's device tool:
#   git archive --format=tar HEAD -- . ':(exclude)perf/gpu/results' > .deps/src.tar
#   run(command="bash perf/gpu/sweep_batch.sh $OUT 540", carry=[".deps/debs", ".deps/fallback", ".deps/src.tar"])
# then unpack $OUT/sweep.tgz (the folder sweep/: the device tool returns at most 8 files) into perf/results/<date>-h200/ (sweep.csv, .json, .png, logs) and commit. When the GPU node's
# Python has no matplotlib, sweep.png is missing: `/usr/bin/python3 perf/sweep/sweep.py plot perf/results/<dir>` here.
set -uo pipefail
OUT=$(realpath -m "${1:?usage: sweep_batch.sh OUTDIR [BUDGET_S] [CONFIGS]}")
BUDGET_S=${2:-540}
CONFIGS=$(realpath "${3:-$PWD/perf/sweep/configs/h200-1gpu.txt}")
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # OUT, left, stamp, REPO, SRC, BUILD, build_megaton
build_megaton 240
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpus.txt" 2>&1
BUILD=$BUILD timeout $(( $(left) > 40 ? $(left) - 20 : 20 )) bash "$SRC/perf/sweep/run_sweep.sh" "$CONFIGS" "$OUT/sweep" \
  > "$OUT/sweep.log" 2>&1
stamp "sweep exit code $?"
grep -E "^sweep:" "$OUT/sweep.log" | tee -a "$OUT/summary.txt"
[ -f "$OUT/sweep/sweep.csv" ] && "$BUILD/megaton" plan --check "$OUT/sweep/sweep.csv" > "$OUT/check.txt" 2>&1
tail -3 "$OUT/check.txt" 2>/dev/null | tee -a "$OUT/summary.txt"
# The device tool returns at most 8 files: the sweep folder goes back as one archive (with sweep.csv beside it).
mv "$OUT/gpus.txt" "$OUT/sweep/" 2>/dev/null
[ -f "$OUT/sweep/sweep.csv" ] && cp "$OUT/sweep/sweep.csv" "$OUT/"
[ -d "$OUT/sweep" ] && tar -czf "$OUT/sweep.tgz" -C "$OUT" sweep && rm -rf "$OUT/sweep"
stamp "done"
