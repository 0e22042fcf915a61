#!/bin/bash
# perf/fp8/run.sh [OUTDIR]: FP8 training against bf16 on one GPU, in one command (docs/fp8.md, docs/performance.md).
#   build   perf/gpu/setup.sh (megaton, the unit tests, bench_fp8_gemm)                       -> OUTDIR/build.log
#   tests   the FP8 unit tests on the GPU (Fp8*: casts, GEMMs, the linear layer against its CPU emulation)
#                                                                                               -> OUTDIR/tests.log
#   gemm    perf/bench_fp8_gemm: each FP8 GEMM of a layer beside the bf16 one                   -> OUTDIR/gemm.log
#   speed   `megaton train` on random tokens, bf16, then FP8 (--fp8-format hybrid, delayed scaling, amax history
#           1024, max), then FP8 with --no-fp8-cast-fusion (each cast a pass of its own), 30 iterations, a log line
#           every 5, for each of CONFIGS: 1.3B (24 x 2048, seq 2048, micro-batch 8) and 2.7B (32 x 2560, seq 2048,
#           micro-batch 2); the median ms/iteration after iteration 10 and the peak memory -> OUTDIR/speed_*.jsonl
#   peer    torch.compile's bf16 step on the same dims (perf/gpu/torch_gpt_bench.py, megaton's sustained protocol)
#                                                                                               -> OUTDIR/peer.log
#   numerics  GPT-2 124M (seq 1024, global batch 8; NUMERICS_MODEL=1.3B: GPT 1.3B, seq 2048, global batch 2) on
#           NUMERICS_CORPUS (a .jsonl or .jsonl.xz of {"text": ..}; the bundled fortunes corpus by default, or
#           data/make_docs_corpus.py's ~10M tokens of documentation) with GPT-2 BPE, NUMERICS_ITERS (2000)
#           iterations: bf16 with seeds 1234 and 4321 (the run-to-run spread) and FP8 with seed 1234 (NUMERICS_RUNS
#           picks some: "bf16:1234 fp8:1234 bf16:4321"); with all three, the largest |FP8 - bf16| of the smoothed
#           training loss against the largest |bf16 - bf16'| (perf/fp8/compare_losses.py)  -> OUTDIR/numerics_*.jsonl
# Model FLOPs are counted with the bf16 formula, 72 B s l h^2 (1 + s/6h + V/12lh), for both precisions.
# Environment: PHASES ("build tests gemm speed peer numerics"), CONFIGS ("1.3B 2.7B"), BUILD (build-gpu),
# FP8_FLAGS (the FP8 run's flags), NUMERICS_MODEL (124M), NUMERICS_ITERS (2000), NUMERICS_CORPUS, NUMERICS_RUNS.
set -uo pipefail
OUT=$(realpath -m "${1:-/tmp/megaton-fp8-run}")
mkdir -p "$OUT"
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$(realpath -m "${BUILD:-$SRC/build-gpu}")
PHASES=${PHASES:-build tests gemm speed peer numerics}
CONFIGS=${CONFIGS:-1.3B 2.7B}
FP8_FLAGS=${FP8_FLAGS:---fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max}
NUMERICS_ITERS=${NUMERICS_ITERS:-2000}
wants() { [[ " $PHASES " == *" $1 "* ]]; }
say() { echo "[fp8/run.sh $(date +%H:%M:%S)] $*"; }

if wants build; then
  say "building (setup.sh) -> $OUT/build.log"
  (export BUILD TARGETS="megaton megaton_unit_tests bench_fp8_gemm" && bash "$SRC/perf/gpu/setup.sh") \
    > "$OUT/build.log" 2>&1 || { say "build failed:"; tail -30 "$OUT/build.log"; exit 1; }
fi
# shellcheck disable=SC1091
source "$BUILD/env.sh"

if wants tests; then
  "$BUILD/tests/megaton_unit_tests" --gtest_filter='Fp8*' > "$OUT/tests.log" 2>&1
  say "FP8 tests exit code $?: $(grep -c '^\[       OK \]' "$OUT/tests.log") passed," \
    "$(grep -c '^\[  FAILED  \] [A-Z]' "$OUT/tests.log") failed"
  grep -B5 '^\[  FAILED  \] [A-Z]' "$OUT/tests.log" | head -60
fi
if wants gemm; then
  "$BUILD/perf/bench_fp8_gemm" --benchmark_min_time=0.2 > "$OUT/gemm.log" 2>&1
  say "bench_fp8_gemm exit code $?"
  grep -E '^BM_' "$OUT/gemm.log"
fi

declare -A dims=(
  [1.3B]="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 8 --global-batch-size 8"
  [2.7B]="--num-layers 32 --hidden-size 2560 --num-attention-heads 32 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 2")
if wants speed; then
  python3 "$SRC/perf/gpu/synth_data.py" /tmp/megaton_synth_text_document > /dev/null
  common=(--vocab-size 50257 --data-path /tmp/megaton_synth_text_document --split 99,1,0 --bf16 --lr 1e-4
          --min-lr 1e-5 --eval-interval 100000 --eval-iters 1 --device cuda --distributed-backend nccl --seed 1234
          --hidden-dropout 0 --attention-dropout 0 --train-iters 30 --log-interval 5)
  for c in $CONFIGS; do
    for p in bf16 fp8 fp8-unfused; do
      extra=()
      # shellcheck disable=SC2206
      [ $p = fp8 ] && extra=($FP8_FLAGS)
      # shellcheck disable=SC2206
      [ $p = fp8-unfused ] && extra=($FP8_FLAGS --no-fp8-cast-fusion)
      rm -f "$OUT/speed_${p}_$c.jsonl"
      # shellcheck disable=SC2086
      "$BUILD/megaton" train "${common[@]}" ${dims[$c]} "${extra[@]}" --metrics-file "$OUT/speed_${p}_$c.jsonl" \
        > "$OUT/speed_${p}_$c.log" 2>&1 || { say "$p $c: exit code $?"; tail -15 "$OUT/speed_${p}_$c.log"; }
    done
  done
  # Where an FP8 step's time goes: its kernels over iterations 21-22 of the first config (the summary table only).
  c=${CONFIGS%% *}
  # shellcheck disable=SC2086,SC2206
  "$BUILD/megaton" train "${common[@]}" ${dims[$c]} $FP8_FLAGS --train-iters 22 --profile --profile-step-start 20 \
    --profile-step-end 22 --profile-dir /tmp/megaton_fp8_profile > "$OUT/profile_fp8_$c.log" 2>&1 &&
    cp /tmp/megaton_fp8_profile/rank0.summary.txt "$OUT/profile_fp8_$c.summary.txt"
fi
if wants peer; then
  peers=()
  for c in $CONFIGS; do peers+=("$c-compile"); done
  say "torch.compile bf16 baseline: ${peers[*]} -> peer.log"
  PEER_SUSTAINED=1 PYTHONUNBUFFERED=1 python3 "$SRC/perf/gpu/torch_gpt_bench.py" "${peers[@]}" > "$OUT/peer.log" 2>&1 ||
    tail -20 "$OUT/peer.log"
fi
if wants speed || wants peer; then
  python3 - "$OUT" $CONFIGS <<'PY'
import json, os, re, statistics, sys
out, configs = sys.argv[1], sys.argv[2:]
dims = {"1.3B": (24, 2048, 2048, 8), "2.7B": (32, 2560, 2048, 2)}
def tflops(c, ms):
    l, h, s, b = dims[c]
    return 72 * b * s * l * h * h * (1 + s / (6 * h) + 50304 / (12 * l * h)) / (ms * 1e-3) / 1e12
def rows(path):
    return [json.loads(x) for x in open(path)] if os.path.exists(path) else []
def median_ms(path):
    r = [o["elapsed_ms_per_iteration"] for o in rows(path) if "elapsed_ms_per_iteration" in o and o["iteration"] > 10]
    return statistics.median(r) if r else None
def peak_gib(path):
    m = [o["mem_max_allocated_mib"] for o in rows(path) if "mem_max_allocated_mib" in o]
    return m[-1] / 1024 if m else None
peer = {}
if os.path.exists(f"{out}/peer.log"):
    for line in open(f"{out}/peer.log"):
        m = re.match(r"sustained gpt-([\d.]+B) compile=True .*: ([\d.]+) ms/it, .* mem ([\d.]+) GiB", line)
        if m: peer[m.group(1)] = (float(m.group(2)), float(m.group(3)))
f = lambda v, fmt: format(v, fmt) if v is not None else "-"
print(f"{'model':5} {'bf16 ms':>8} {'TFLOP/s':>7} {'GiB':>5} | {'FP8 ms':>7} {'TFLOP/s':>7} {'GiB':>5} {'FP8/bf16':>8} | "
      f"{'compile ms':>10} {'TFLOP/s':>7} {'GiB':>5} {'FP8/compile':>11} | {'unfused ms':>10} {'fused/unfused':>13}")
for c in configs:
    b, q = median_ms(f"{out}/speed_bf16_{c}.jsonl"), median_ms(f"{out}/speed_fp8_{c}.jsonl")
    p = peer.get(c, (None, None))
    u = median_ms(f"{out}/speed_fp8-unfused_{c}.jsonl")
    print(f"{c:5} {f(b, '8.1f')} {f(b and tflops(c, b), '7.0f')} {f(peak_gib(f'{out}/speed_bf16_{c}.jsonl'), '5.1f')} | "
          f"{f(q, '7.1f')} {f(q and tflops(c, q), '7.0f')} {f(peak_gib(f'{out}/speed_fp8_{c}.jsonl'), '5.1f')} "
          f"{f(b and q and b / q, '7.2f')}x | {f(p[0], '10.1f')} {f(p[0] and tflops(c, p[0]), '7.0f')} "
          f"{f(p[1], '5.1f')} {f(p[0] and q and p[0] / q, '10.2f')}x | {f(u, '10.1f')} {f(u and q and u / q, '12.2f')}x")
PY
fi

if wants numerics; then
  input=$(realpath -m "${NUMERICS_CORPUS:-$SRC/data/downloaded/corpus/fortunes.jsonl}")
  corpus=/tmp/megaton_numerics_$(basename "${input%%.*}")
  if [[ $input == *.xz ]]; then
    xz -dc "$input" > /tmp/megaton_numerics_corpus.jsonl || { say "cannot decompress $input"; exit 1; }
    input=/tmp/megaton_numerics_corpus.jsonl
  fi
  [ -f "${corpus}_text_document.idx" ] ||
  "$BUILD/megaton" preprocess --input "$input" --output-prefix "$corpus" \
    --json-keys text --tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/data/downloaded/gpt2/vocab.json" \
    --merge-file "$SRC/data/downloaded/gpt2/merges.txt" --append-eod --workers 8 > "$OUT/preprocess.log" 2>&1 ||
    { say "preprocess failed"; tail "$OUT/preprocess.log"; exit 1; }
  case ${NUMERICS_MODEL:-124M} in
    124M) model=(--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024
                 --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 8 --lr 6e-4 --min-lr 6e-5) ;;
    1.3B) model=(--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
                 --max-position-embeddings 2048 --micro-batch-size 2 --global-batch-size 2 --lr 2e-4 --min-lr 2e-5) ;;
    *) say "NUMERICS_MODEL: expected 124M or 1.3B, got '$NUMERICS_MODEL'"; exit 2 ;;
  esac
  gpt2=("${model[@]}" --bf16 --lr-decay-style cosine
        --lr-warmup-iters 100 --lr-decay-iters "$NUMERICS_ITERS" --train-iters "$NUMERICS_ITERS" --weight-decay 0.1
        --clip-grad 1.0 --adam-beta2 0.95 --data-path "${corpus}_text_document" --split 98,2,0
        --tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/data/downloaded/gpt2/vocab.json"
        --merge-file "$SRC/data/downloaded/gpt2/merges.txt" --log-interval 10 --eval-interval 250 --eval-iters 10
        --device cuda --distributed-backend nccl)
  for run in ${NUMERICS_RUNS:-bf16:1234 fp8:1234 bf16:4321}; do
    set -- ${run/:/ }
    extra=()
    # shellcheck disable=SC2206
    [ "$1" = fp8 ] && extra=($FP8_FLAGS)
    rm -f "$OUT/numerics_$1_$2.jsonl"
    "$BUILD/megaton" train "${gpt2[@]}" --seed "$2" "${extra[@]}" \
      --metrics-file "$OUT/numerics_$1_$2.jsonl" > "$OUT/numerics_$1_$2.log" 2>&1 ||
      { say "numerics $1 seed $2: exit code $?"; tail -15 "$OUT/numerics_$1_$2.log"; }
  done
  [ -f "$OUT/numerics_bf16_1234.jsonl" ] && [ -f "$OUT/numerics_bf16_4321.jsonl" ] &&
    [ -f "$OUT/numerics_fp8_1234.jsonl" ] &&
    python3 "$SRC/perf/fp8/compare_losses.py" "$OUT/numerics_bf16_1234.jsonl" "$OUT/numerics_bf16_4321.jsonl" \
      "$OUT/numerics_fp8_1234.jsonl"
fi
