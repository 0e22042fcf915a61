#!/bin/bash
# perf/gpu/profile_accum.sh OUTDIR [BUDGET_S=400] — where gradient accumulation's time per micro-batch goes: builds
# megaton (perf/gpu/setup.sh) and runs 124M and 1.3B (session_batch.sh's dims, bf16, dropout 0) with one micro-batch
# per step and with four, 8 iterations each, `--profile` over iterations 6-7 (OUTDIR/<config>_<gbs>.summary.txt: kernels
# summed per step, beside the log's ms per iteration; all but summary.txt come back in OUTDIR/results.tgz). The 2026-12-04 sweeps measured ~1.3-3 % more time per
# micro-batch with four per step than with one (perf/results/2026-12-04-h200-session13-ga/).
set -uo pipefail
OUT=$(realpath -m "${1:?usage: profile_accum.sh OUTDIR [BUDGET_S]}")
BUDGET_S=${2:-400}
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # OUT, left, stamp, SRC, BUILD, build_megaton, synth_dataset
build_megaton 240
synth_dataset "$SYNTH_DATA"
base=("${TRAIN_BASE[@]}" --hidden-dropout 0 --attention-dropout 0 --train-iters 8 --log-interval 1 --profile
  --profile-step-start 5 --profile-step-end 7)
for c in 124M 1.3B; do
  for n in 1 4; do
    mb=${MICRO_BATCH[$c]} gbs=$((n * MICRO_BATCH[$c])) tag=${c}_gbs$((n * MICRO_BATCH[$c]))
    rm -rf /tmp/prof && mkdir -p /tmp/prof
    # shellcheck disable=SC2086
    timeout $(( $(left) > 30 ? $(left) - 20 : 10 )) "$BUILD/megaton" train "${base[@]}" ${MODEL_DIMS[$c]} --micro-batch-size "$mb" --global-batch-size "$gbs" \
      --profile-dir /tmp/prof > "$OUT/$tag.log" 2>&1
    stamp "$tag exit code $?: $(grep -o 'elapsed time per iteration (ms): [0-9.]*' "$OUT/$tag.log" | sed -n '8p')"
    [ -f /tmp/prof/rank0.summary.txt ] && head -60 /tmp/prof/rank0.summary.txt > "$OUT/$tag.summary.txt" &&
      grep -m1 '^# cuda' "$OUT/$tag.summary.txt" | tee -a "$OUT/summary.txt"
    [ "$c" = 124M ] && [ -f /tmp/prof/rank0.trace.json ] && gzip -c /tmp/prof/rank0.trace.json > "$OUT/$tag.trace.json.gz"
  done
done
# The device tool returns at most 8 files: everything but summary.txt as one archive.
# (A console log the caller writes into OUTDIR is left alone: tar would stop at it, "file changed as we read it".)
(cd "$OUT" && tar -czf results.tgz --exclude results.tgz --exclude summary.txt --exclude console.txt .
  [ -s results.tgz ] && find . -type f ! -name results.tgz ! -name summary.txt ! -name console.txt -delete)
stamp "done"
