#!/bin/bash
# perf/gpu/adam_batch.sh OUTDIR [BUDGET_S] — the fused Adam (kernels/adam_kernels.cu) on one GPU, in one device call:
#   1. build megaton, megaton_unit_tests and perf/bench_adam (perf/gpu/setup.sh)           -> OUTDIR/build.log
#   2. unit tests KernelsAdam.* (fused vs ATen on the GPU) and Optim* (the CPU optimizer)  -> OUTDIR/tests.log
#   3. perf/bench_adam: fused vs ATen at 124M and 1.3B parameters, same run             -> OUTDIR/bench_adam.log
#   4. megaton train 1.3B bf16 (24 x 2048, seq 2048, micro-batch 8) on random tokens, fused and --no-fused-adam:
#      ms/iteration and the losses of both                                                  -> OUTDIR/train_*.log
# Like the other batches it builds DEPS/src.tar when that exists (batch_lib.sh); e.g. with the .deb files and the
# snapshot in an ignored folder of the checkout:
#   run(command="mkdir -p /tmp/s && tar -xf D/src.tar -C /tmp/s && DEPS=$PWD/D bash /tmp/s/perf/gpu/adam_batch.sh $OUT",
#       carry=["D"])
set -uo pipefail
OUT=$(realpath -m "${1:?usage: adam_batch.sh OUTDIR [BUDGET_S]}")
BUDGET_S=${2:-540}
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # OUT, left, stamp, REPO, DEPS, SRC, BUILD, build_megaton, synth_dataset
export CMAKE_FLAGS="-DMEGATON_BENCHMARKS=ON"
TARGETS="megaton megaton_unit_tests bench_adam" build_megaton 300

(cd "$BUILD" && timeout 120 tests/megaton_unit_tests --gtest_filter='KernelsAdam.*:Optim*:KernelsCrossEntropy.*') \
  > "$OUT/tests.log" 2>&1
stamp "unit tests exit code $?: $(grep -E '^\[  (PASSED|FAILED)  \]|SKIPPED \]' "$OUT/tests.log" | tr -s ' ' | tr '\n' ';')"
grep -E '^\[ +(OK|FAILED|SKIPPED) +\] (KernelsAdam|KernelsCross)|Failure|Expected|Which is|error' "$OUT/tests.log" |
  head -40 | tee -a "$OUT/summary.txt"

timeout 120 "$BUILD/perf/bench_adam" --benchmark_min_time=0.5 > "$OUT/bench_adam.log" 2>&1
stamp "bench_adam exit code $?"
grep -E 'BM_|Benchmark' "$OUT/bench_adam.log" | tee -a "$OUT/summary.txt"

synth_dataset /tmp/synth_text_document
common="--vocab-size 50257 --data-path /tmp/synth_text_document --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5
  --hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-interval 100000 --eval-iters 1
  --device cuda --distributed-backend nccl --seed 1234 --num-layers 24 --hidden-size 2048 --num-attention-heads 16
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 8 --global-batch-size 8 --train-iters 8"
for variant in fused aten; do
  [ "$(left)" -gt 40 ] || { stamp "no time left for train_$variant"; continue; }
  flag=$([ $variant = aten ] && echo --no-fused-adam)
  # shellcheck disable=SC2086
  timeout $(($(left) > 100 ? 90 : $(left) - 10)) "$BUILD/megaton" train $common $flag \
    --metrics-file "$OUT/train_$variant.jsonl" > "$OUT/train_$variant.log" 2>&1
  stamp "megaton train 1.3B ($variant) exit code $?"
  grep -E ' iteration +[0-9]+/' "$OUT/train_$variant.log" | tail -4 | tee -a "$OUT/summary.txt"
done
stamp "done"
