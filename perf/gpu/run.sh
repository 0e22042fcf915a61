#!/bin/bash
# perf/gpu/run.sh [OUTDIR] — everything worth measuring on a GPU node, in one command, ending with one table:
#   1. build megaton, the unit tests and the kernel benchmarks (perf/gpu/setup.sh)             -> OUTDIR/build.log
#   2. the CUDA kernel tests (Kernels*: every fused kernel against ATen on the GPU)              -> OUTDIR/kernels.log
#   3. the kernel benchmarks (perf/bench_*: each fused kernel beside the ATen ops it replaces)   -> OUTDIR/benches.log
#   4. `megaton train` bf16 on random tokens, GPT-2 124M (micro-batch 32, seq 1024) and GPT 1.3B (24 x 2048,
#      micro-batch 8, seq 2048), 30 iterations, a log line every 5: the median ms/iteration of the lines after
#      iteration 10 (the GPU settled at its power limit)                                        -> OUTDIR/train_*.log
#   5. the PyTorch baseline on the same dims, right after (perf/gpu/torch_gpt_bench.py: eager, SDPA, fused AdamW)
#                                                                                                -> OUTDIR/peer.log
# Model FLOPs are Megatron's 72 B s l h^2 (1 + s/6h + V/12lh) for both (docs/performance.md).
# Environment: CONFIGS ("124M 1.3B"), SKIP (words of: build kernels benches peer), BUILD (build-gpu),
# BENCH_MIN_TIME (each benchmark case's --benchmark_min_time, 0.3),
# COMPARE (a second megaton binary, e.g. an older build: its step runs right after megaton's, same flags, and the
# table shows both; ratio = compared / megaton).
set -uo pipefail
OUT=$(realpath -m "${1:-/tmp/megaton-gpu-run}")
mkdir -p "$OUT"
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(realpath -m "${BUILD:-$SRC/build-gpu}")
CONFIGS=${CONFIGS:-124M 1.3B}
SKIP=${SKIP:-}
wants() { [[ " $SKIP " != *" $1 "* ]]; }
say() { echo "[run.sh $(date +%H:%M:%S)] $*"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # NVLink multicast stays off

benches=$(cd "$SRC/perf" && ls bench_*.cpp | sed 's/\.cpp$//' | grep -v -E '^bench_(checkpoint|model_step|optim_step|tokenizer)$')
if wants build; then
  say "building (setup.sh) -> $OUT/build.log"
  ( export BUILD TARGETS="megaton megaton_unit_tests $(echo $benches)" BUILD_TOOL_ARGS="-k 0"
    bash "$SRC/perf/gpu/setup.sh" ) > "$OUT/build.log" 2>&1 || say "build exit code $? (see build.log)"
fi
# shellcheck disable=SC1091
source "$BUILD/env.sh"

if wants kernels; then
  "$BUILD/tests/megaton_unit_tests" --gtest_filter='Kernels*' > "$OUT/kernels.log" 2>&1
  say "kernel tests exit code $?: $(grep -c '^\[       OK \]' "$OUT/kernels.log") passed, $(grep -c '^\[  FAILED  \] [A-Z]' "$OUT/kernels.log") failed"
fi
if wants benches; then
  for b in $benches; do
    [ -x "$BUILD/perf/$b" ] && "$BUILD/perf/$b" --benchmark_min_time="${BENCH_MIN_TIME:-0.3}" >> "$OUT/benches.log" 2>&1
  done
  say "kernel benchmarks: $(grep -c '^BM_' "$OUT/benches.log") rows -> benches.log"
fi

python3 "$SRC/perf/gpu/synth_data.py" /tmp/megaton_synth_text_document
common=(--vocab-size 50257 --data-path /tmp/megaton_synth_text_document --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5
        --eval-interval 100000 --eval-iters 1 --device cuda --distributed-backend nccl --seed 1234
        --hidden-dropout 0 --attention-dropout 0 --train-iters 30 --log-interval 5)
declare -A dims=(
  [124M]="--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 32 --global-batch-size 32"
  [1.3B]="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 8 --global-batch-size 8")
train() {  # BINARY NAME CONFIG
  # shellcheck disable=SC2086
  "$1" train "${common[@]}" ${dims[$3]} --metrics-file "$OUT/train_$2_$3.jsonl" > "$OUT/train_$2_$3.log" 2>&1 ||
    say "$2 $3: exit code $? (train_$2_$3.log)"
}
for c in $CONFIGS; do
  rm -f "$OUT"/train_*_"$c".jsonl
  train "$BUILD/megaton" megaton "$c"
  [ -n "${COMPARE:-}" ] && train "$COMPARE" compared "$c"
done
if wants peer; then
  say "the PyTorch baseline -> peer.log"
  PYTHONUNBUFFERED=1 python3 "$SRC/perf/gpu/torch_gpt_bench.py" $CONFIGS > "$OUT/peer.log" 2>&1
fi

python3 - "$OUT" $CONFIGS <<'PY'
import json, os, re, statistics, sys
out, configs = sys.argv[1], sys.argv[2:]
flops = {"124M": (12, 768, 1024, 32), "1.3B": (24, 2048, 2048, 8)}
def model_tflops(c, ms):
    l, h, s, b = flops[c]
    v = 50304
    return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)) / (ms * 1e-3) / 1e12
def median_ms(path):
    if not os.path.exists(path): return None
    rows = [o for o in map(json.loads, open(path)) if "elapsed_ms_per_iteration" in o and o["iteration"] > 10]
    return statistics.median(o["elapsed_ms_per_iteration"] for o in rows) if rows else None
def peak_gib(path):
    if not os.path.exists(path): return None
    m = [o.get("mem_max_allocated_mib") for o in map(json.loads, open(path)) if "mem_max_allocated_mib" in o]
    return m[-1] / 1024 if m else None
peer = {}
if os.path.exists(f"{out}/peer.log"):
    for line in open(f"{out}/peer.log"):
        m = re.match(r"(gpt2-124M|gpt-1\.3B) compile=False .*B=(\d+) S=(\d+): .* ([\d,]+) tok/s, .* mem ([\d.]+) GiB", line)
        if m:
            name = "124M" if "124M" in m.group(1) else "1.3B"
            tok = float(m.group(4).replace(",", ""))
            peer[name] = (int(m.group(2)) * int(m.group(3)) / tok * 1e3, float(m.group(5)))
print(f"{'model':6} {'megaton ms':>10} {'TFLOP/s':>8} {'GiB':>6} | {'compared ms':>11} {'ratio':>6} | "
      f"{'PyTorch ms':>10} {'TFLOP/s':>8} {'GiB':>6} | {'speedup':>7}")
for c in configs:
    ms = median_ms(f"{out}/train_megaton_{c}.jsonl")
    cmp_ms = median_ms(f"{out}/train_compared_{c}.jsonl")
    p = peer.get(c)
    f = lambda v, fmt: format(v, fmt) if v is not None else "-"
    print(f"{c:6} {f(ms, '10.1f')} {f(ms and model_tflops(c, ms), '8.0f')} {f(peak_gib(f'{out}/train_megaton_{c}.jsonl'), '6.1f')} | "
          f"{f(cmp_ms, '11.1f')} {f(cmp_ms and ms and cmp_ms / ms, '6.3f')} | "
          f"{f(p and p[0], '10.1f')} {f(p and model_tflops(c, p[0]), '8.0f')} {f(p and p[1], '6.1f')} | "
          f"{f(p and ms and p[0] / ms, '6.2f')}x")
PY
