#!/bin/bash
# perf/gpu/kernel_check.sh OUTDIR [BUDGET_S=240] — the shortest useful device call, for a session with little device
# time left: build the unit tests and the benchmarks named in BENCHES (perf/gpu/setup.sh), run the kernel tests of
# KERNEL_FILTER (default Kernels*) and those benchmarks (their cases matching BENCH_FILTER), every line appended to
# OUTDIR/summary.txt as it comes, so a call cut short by the device's limit still returns what ran.
#   run(command="KERNEL_FILTER='KernelsLmHeadLoss*' BENCHES=bench_cross_entropy BENCH_FILTER=LossGradVariants
#                bash perf/gpu/kernel_check.sh $OUT 240", carry=[".deps/debs", ".deps/fallback", ".deps/src.tar"])
set -uo pipefail
OUT=$(realpath -m "${1:?usage: kernel_check.sh OUTDIR [BUDGET_S]}")
BUDGET_S=${2:-240}
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # OUT, left, stamp, SRC, BUILD, build_megaton
TARGETS="megaton_unit_tests ${BENCHES:-}" build_megaton $(($(left) - 20))
"$BUILD/tests/megaton_unit_tests" --gtest_filter="${KERNEL_FILTER:-Kernels*}" 2>&1 |
  grep --line-buffered -E '^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|Value of' | tee -a "$OUT/summary.txt"
for b in ${BENCHES:-}; do
  [ -x "$BUILD/perf/$b" ] || { stamp "$b not built (build.log)"; continue; }
  "$BUILD/perf/$b" --benchmark_filter="${BENCH_FILTER:-.}" --benchmark_min_time=0.2 2>&1 | tee -a "$OUT/summary.txt"
done
stamp done
