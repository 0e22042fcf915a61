#!/bin/bash
# perf/gpu/gpu_batch.sh OUTDIR [BUDGET_S] — one complete session on a GPU node, for machines lent by the minute:
#   1. record what the node has (GPU, CUDA, torch, MPI, NCCL, Debian/Ubuntu packages)        -> OUTDIR/discover.txt
#   2. start the PyTorch reference bench (perf/gpu/torch_gpt_bench.py $BENCH_CONFIGS; "none" skips it) in the background
#                                                                                            -> OUTDIR/torch_bench.log
#   3. build with perf/gpu/setup.sh (JOBS = nproc - 2, leaving cores to the bench's Python) -> OUTDIR/build.log
#   4. unit tests, multi-rank MPI tests at -np 1, 2, 4                                        -> OUTDIR/tests.log
#   5. after the bench: perf/bench_cross_entropy (fused kernel vs ATen) -> OUTDIR/bench_kernels.log; megaton comm-bench
#      over NCCL as a singleton, under mpirun -np 1, in bf16, with 2 ranks on the
#      one GPU, and over MPI on the CPU with 2 ranks                                         -> OUTDIR/commbench.log
#   6. a summary table, printed last                                                          -> OUTDIR/summary.txt
# If .deps/src.tar exists (a `git archive` made before the call), that snapshot is built instead of the working tree,
# so edits in progress in a shared checkout cannot break the build. Every step has a time limit derived from
# BUDGET_S (default 400 s), so the whole batch ends inside the lease.
set -uo pipefail
OUT=$(realpath -m "${1:?usage: gpu_batch.sh OUTDIR [BUDGET_S]}")
BUDGET_S=${2:-400}
BENCH_CONFIGS=${BENCH_CONFIGS:-124M 1.3B}
CB_MAXBYTES=${CB_MAXBYTES:-268435456}  # largest comm-bench message on one rank
mkdir -p "$OUT" && : > "$OUT/summary.txt"
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # T0, left, stamp, REPO, DEPS, SRC (the synced snapshot), BUILD; no multicast
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }  # min(wanted, time left)
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # no CMA/ptrace between ranks inside a VM
stamp "source: $SRC ($(cat "$SRC/.snapshot" 2>/dev/null || echo working tree))"

# ~~~ 1. discovery ~~~
{
  set -x
  uname -a; nproc; free -g | head -2; cat /etc/os-release | head -2
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  nvcc --version | tail -2; which nvcc; ls -d /usr/local/cuda*
  g++ --version | head -1; cmake --version | head -1; ninja --version
  python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.utils.cmake_prefix_path, "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI, "nccl", torch.cuda.nccl.version())'
  which mpirun mpicxx mpicc orted prterun pkg-config h5pcc h5cc; mpirun --version 2>&1 | head -2
  ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h
  python3 -c 'import glob,site; [print(p) for r in site.getsitepackages() for p in glob.glob(r+"/nvidia/**/libnccl*", recursive=True)]'
  dpkg -l | awk '/^ii/ {print $2, $3}' | grep -E 'openmpi|hdf5|boost|pcre2|zlib1g|liblzma|nlohmann|simdjson|gtest|pkgconf|pkg-config|libcurl|libssl|libldap'
  ldconfig -p | grep -E 'libcurl\.so\.4|libmpi\.so|libpcre2-8|libnccl|libcrypto\.so\.3|libldap|libsz|libz\.so'
  ls -a "$REPO" | tr '\n' ' '
  set +x
} > "$OUT/discover.txt" 2>&1
stamp "discovery done: $(grep -m1 -E 'H200|H100|NVIDIA' "$OUT/discover.txt" | head -c 120)"

# ~~~ 2. reference bench, in the background (GPU-bound; the build uses the CPUs) ~~~
BENCH_PID=
if [ "$BENCH_CONFIGS" != none ]; then
  # shellcheck disable=SC2086
  (cd "$SRC" && PYTHONUNBUFFERED=1 timeout "$(cap 240)" python3 perf/gpu/torch_gpt_bench.py $BENCH_CONFIGS \
    > "$OUT/torch_bench.log" 2>&1; echo "[torch_gpt_bench.py exit code $?]" >> "$OUT/torch_bench.log") &
  BENCH_PID=$!
fi

# ~~~ 3. build ~~~
JOBS=$(($(nproc) > 4 ? $(nproc) - 2 : 2))
stamp "building with -j$JOBS"
( export SRC BUILD JOBS DEPS BUILD_TOOL_ARGS="-k 0"
  timeout "$(cap 300)" bash "$SRC/perf/gpu/setup.sh" ) > "$OUT/build.log" 2>&1
BUILD_RC=$?
stamp "build exit code $BUILD_RC; $(grep -c -E 'error:' "$OUT/build.log") compiler error lines"
grep -E '^\[setup|\[x\]|\[ \]|CMake Error|error:|FAILED:' "$OUT/build.log" | head -40

# ~~~ 4. tests (CPU) ~~~
# shellcheck disable=SC1091
[ -f "$BUILD/env.sh" ] && source "$BUILD/env.sh"
if [ -x "$BUILD/tests/megaton_unit_tests" ]; then
  {
    echo "=== tests/megaton_unit_tests"; (cd "$BUILD" && timeout "$(cap 90)" tests/megaton_unit_tests); echo "[exit code $?]"
    for np in 1 2 4; do
      echo "=== mpirun -np $np tests/megaton_mpi_tests"
      (cd "$BUILD" && timeout "$(cap 90)" mpirun -np $np tests/megaton_mpi_tests); echo "[exit code $?]"
    done
  } > "$OUT/tests.log" 2>&1
  stamp "unit tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/tests.log" | head -1 | tr -s ' ')"
  for np in 1 2 4; do
    stamp "mpi np$np: $(awk -v h="=== mpirun -np $np " 'index($0,h)==1{f=1;next} /^===/{f=0} f' "$OUT/tests.log" |
      sed 's/\x1b\[[0-9;]*m//g' | grep -E '^\[  (PASSED|FAILED)  \]|exit code' | tr '\n' ' ')"  # (gtest colours)
  done
fi

# ~~~ 5. comm-bench and the kernel benchmarks on the GPU, once the reference bench has released it ~~~
[ -n "$BENCH_PID" ] && { wait "$BENCH_PID"; stamp "torch bench done"; }
# (Google Benchmark comes with .deps since fetch_debs.sh lists libbenchmark-dev; without it the target does not exist.)
timeout "$(cap 120)" cmake --build "$BUILD" --target bench_cross_entropy > "$OUT/build_bench.log" 2>&1 ||
  stamp "bench_cross_entropy not built (see build_bench.log)"
if [ -x "$BUILD/perf/bench_cross_entropy" ]; then  # fused cross-entropy vs ATen (kernels/README.md), same run
  timeout "$(cap 60)" "$BUILD/perf/bench_cross_entropy" --benchmark_min_time=0.5 > "$OUT/bench_kernels.log" 2>&1
  stamp "bench_cross_entropy exit code $?: $(grep -E 'BM_' "$OUT/bench_kernels.log" | tr -s ' ' | tr '\n' ';')"
  stamp "kernel tests: $(grep -E 'KernelsCrossEntropy.*(OK|FAILED|SKIPPED)' "$OUT/tests.log" | tr -s ' ' | tr '\n' ';')"
fi
if [ -x "$BUILD/megaton" ]; then
  stamp "megaton loads: $(ldd "$BUILD/megaton" | grep -E 'nccl|boost|hdf5|libmpi\.' | awk '{print $3}' | tr '\n' ' ')"
  CB="$BUILD/megaton comm-bench"
  {
    echo "=== singleton: megaton comm-bench --distributed-backend nccl --device cuda -e $CB_MAXBYTES"
    NCCL_DEBUG=WARN timeout "$(cap 60)" $CB --distributed-backend nccl --device cuda -e $CB_MAXBYTES; echo "[exit code $?]"
    echo "=== mpirun -np 1 megaton comm-bench --distributed-backend nccl --device cuda -e $CB_MAXBYTES"
    NCCL_DEBUG=WARN timeout "$(cap 60)" mpirun -np 1 $CB --distributed-backend nccl --device cuda -e $CB_MAXBYTES; echo "[exit code $?]"
    echo "=== singleton bf16: megaton comm-bench --distributed-backend nccl --device cuda --dtype bfloat16"
    timeout "$(cap 60)" $CB --distributed-backend nccl --device cuda --dtype bfloat16; echo "[exit code $?]"
    echo "=== mpirun -np 2 megaton comm-bench --distributed-backend nccl --device cuda (2 ranks, 1 GPU)"
    NCCL_DEBUG=WARN timeout "$(cap 60)" mpirun -np 2 $CB --distributed-backend nccl --device cuda -e 16777216; echo "[exit code $?]"
    echo "=== mpirun -np 2 megaton comm-bench --distributed-backend mpi --device cpu"
    timeout "$(cap 60)" mpirun -np 2 $CB --distributed-backend mpi --device cpu -e 16777216; echo "[exit code $?]"
  } > "$OUT/commbench.log" 2>&1
  grep -E '^===|^NCCL version|^# (OK|FAILED)|exit code|Duplicate GPU|NCCL WARN|error' "$OUT/commbench.log" | head -30 |
    tee -a "$OUT/summary.txt"
fi

# ~~~ 6. summary ~~~
if [ -n "$BENCH_PID" ]; then
  echo "--- torch_gpt_bench.py $BENCH_CONFIGS" | tee -a "$OUT/summary.txt"
  grep -E 'compile=|exit code|Error' "$OUT/torch_bench.log" | tee -a "$OUT/summary.txt"
fi
stamp "batch done"
