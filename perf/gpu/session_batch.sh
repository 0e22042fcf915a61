#!/bin/bash
# perf/gpu/session_batch.sh OUTDIR [BUDGET_S=560] — one device call that measures everything issues 6, 7 and 9 wait on:
#   1. build megaton, the unit tests and the kernel benchmarks (perf/gpu/setup.sh, all cores)     -> build.log
#   2. the CUDA kernel tests (fused kernels vs ATen) and their Google Benchmarks                  -> kernels.log
#   3. `megaton train` bf16, 124M and 1.3B (train_step_batch.sh's dims), 8 iterations each, with --profile over
#      iterations 6-7 and TensorBoard events (then read back with TensorBoard's EventAccumulator)  -> train_*.log/jsonl,
#                                                                                                    prof/, tb.log
#      then the A/B runs with and without AB_FLAGS (compare_runs.py: step times, losses)      -> ab_*
#   4. the peer (torch_gpt_bench.py, same dims, same GPU, after ours) with its own profile          -> peer.log
#   5. perf/generate/run.sh: generation tokens/s beside HF transformers, and compare_hf.py         -> generate/
#   5b. both programs under both measurement protocols (short: the peer's; sustained: ours)        -> short_*, peer_sustained.log
#   6. the unit tests through ctest -j (UNIT_FILTER: a ctest -R regex; UNIT_EXCLUDE: -E, default ^Kernels), if time is left -> unit_tests.log
#   7. perf/sweep over perf/sweep/configs/h200-1gpu.txt with the time left, and `megaton plan --check` -> sweep/
# Everything is packed into OUTDIR/results.tgz (the device tool returns at most 8 files) beside OUTDIR/summary.txt.
# Env: BENCHES (default: every kernel benchmark), BENCH_FILTER (--benchmark_filter for each of them; default: all), CONFIGS ("124M 1.3B"), AB_FLAGS ("--no-gemm-epilogue-fusion;--no-fused-layernorm": flag sets, each an A/B against the defaults; empty: none; an empty set is skipped), AB_REPEAT (set: the defaults run again after the B runs, compared too), TRAIN_FLAGS (flags added to the profiled runs, e.g. "--position-embedding-type alibi"), KERNEL_FILTER (the --gtest_filter of the kernel tests, default Kernels*), SKIP ("" or words of: bench dropout (8 iterations of each config with the default dropout, profiled) train (the profiled runs) dropout_ab (30 iterations of each config with the default dropout, without and with DROPOUT_AB_FLAGS, default --no-dropout-layernorm-fusion) ckpt peer protocol generate unit sweep), UNIT_FILTER, GPU_SCRIPT_TESTS (ctest -R of the script tests with a GPU branch run by the unit step, "test_train_overlap_optimizer"), BATCHES (generation batch sizes, "1 8 32").
set -uo pipefail
OUT=$(realpath -m "${1:?usage: session_batch.sh OUTDIR [BUDGET_S]}")
BUDGET_S=${2:-560}
CONFIGS=${CONFIGS:-124M 1.3B}
SKIP=${SKIP:-}
wants() { [[ " $SKIP " != *" $1 "* ]]; }  # wants WORD: WORD is not in SKIP
R=/tmp/session-results
rm -rf "$R" && mkdir -p "$R"
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # OUT, left, stamp, REPO, SRC, BUILD
pack() { cp "$OUT/summary.txt" "$R/" 2>/dev/null; tar -czf "$OUT/results.tgz" -C "$R" . ; }
trap pack EXIT
capped() { local want=$1; shift; local l; l=$(( $(left) - 20 )); timeout $(( want < l ? want : (l > 5 ? l : 5) )) "$@"; }

( export SRC BUILD JOBS=$(nproc) DEPS="$REPO/.deps" TARGETS="megaton megaton_unit_tests" BUILD_TOOL_ARGS="-k 0"
  timeout 260 bash "$SRC/perf/gpu/setup.sh" ) > "$R/build.log" 2>&1
stamp "build exit code $? ($(grep -c 'error:' "$R/build.log") error lines)"
grep -E 'error:|FAILED:' "$R/build.log" | head -20 | tee -a "$OUT/summary.txt"
benches=""
wants bench && benches=${BENCHES:-$(cd "$SRC/perf" && ls bench_*.cpp | sed 's/\.cpp$//' | grep -v -E 'bench_(checkpoint|model_step|optim_step|tokenizer)$')}
for b in $benches; do  # Google Benchmark programs: absent when a kernel or the library is missing
  [ -f "$SRC/perf/$b.cpp" ] && { timeout 120 cmake --build "$BUILD" -j "$(nproc)" --target "$b" >> "$R/build.log" 2>&1 ||
    stamp "$b not built (build.log)"; }
done
# shellcheck disable=SC1091
source "$BUILD/env.sh"

{
  capped 120 "$BUILD/tests/megaton_unit_tests" --gtest_filter="${KERNEL_FILTER:-Kernels*}"; echo "[kernel tests exit code $?]"
  for b in $benches; do
    [ -x "$BUILD/perf/$b" ] && { capped 90 "$BUILD/perf/$b" --benchmark_min_time=0.3 \
      ${BENCH_FILTER:+--benchmark_filter="$BENCH_FILTER"}; echo "[$b exit code $?]"; }
  done
} > "$R/kernels.log" 2>&1
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|exit code|^BM_' "$R/kernels.log" | sed 's/ ms / ms /' | tee -a "$OUT/summary.txt"

# The GPU's SM clock, power and temperature every 250 ms from here on, with a line per phase (gpu_clocks.py sums them
# up at the end): a sustained bf16 training step runs the H200 at its power cap, where it lowers the SM clock.
CLOCKS=$R/gpu_clocks.csv
phase() { echo "PHASE $*" >> "$CLOCKS"; }
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 250 >> "$CLOCKS" 2>/dev/null &
  CLOCKS_PID=$!
  trap 'kill $CLOCKS_PID 2>/dev/null; pack' EXIT
fi
phase idle after the kernel benchmarks
# A kernel whose GPU test failed must not decide the training numbers: fall back to ATen for it then.
ln_flag=()
if grep -q 'FAILED .*KernelsLayerNorm\.' "$R/kernels.log"; then
  ln_flag+=(--no-fused-layernorm)
  stamp "the fused LayerNorm failed its GPU tests: training below runs with --no-fused-layernorm"
fi
# The mixed kernels (--fp32-residual-connection) run only in A/B runs that ask for that flag.
grep -q 'FAILED .*KernelsLayerNormMixed' "$R/kernels.log" &&
  stamp "the fp32-residual LayerNorm kernels failed their GPU tests: --fp32-residual-connection runs below use them anyway"
synth_dataset "$SYNTH_DATA"
base=("${TRAIN_BASE[@]}")
dropout_kernels_failed=$(grep -c 'FAILED .*KernelsDropoutAddLayerNorm' "$R/kernels.log")
if [ "$dropout_kernels_failed" -gt 0 ]; then  # the default hidden dropout's kernels
  base+=(--no-dropout-layernorm-fusion)
  stamp "the dropout in the LayerNorm kernels failed its GPU tests: training below runs with --no-dropout-layernorm-fusion"
fi
common=("${base[@]}" --hidden-dropout 0 --attention-dropout 0)
prof=(--train-iters 8 --log-interval 1 --profile --profile-step-start 5 --profile-step-end 7 --profile-dir "$R/prof")
declare -A dims  # batch_lib.sh's models, one micro-batch per step
for c in "${!MODEL_DIMS[@]}"; do
  dims[$c]="${MODEL_DIMS[$c]} --micro-batch-size ${MICRO_BATCH[$c]} --global-batch-size ${MICRO_BATCH[$c]}"
done
# Megatron's default dropout (0.1 on the hidden states and the attention probabilities) once on the GPU: every other
# run here passes 0, which is how a deadlock in the fused attention's dropout went unseen until 2026-12-04
# (docs/gpu.md, twelfth session).
if wants dropout; then
  for c in $CONFIGS; do  # 8 iterations, the last two profiled (prof/megaton_dropout_<c>.summary.txt)
    phase "megaton $c with the default dropout (8 iterations)"
    # shellcheck disable=SC2086
    capped 90 "$BUILD/megaton" train "${base[@]}" "${ln_flag[@]}" ${dims[$c]} "${prof[@]}" \
      --metrics-file "$R/dropout_$c.jsonl" > "$R/dropout_$c.log" 2>&1
    stamp "megaton $c default dropout exit code $? (124: timed out): $(grep -c 'lm loss' "$R/dropout_$c.log") log lines, $(
      grep -o 'elapsed time per iteration (ms): [0-9.]*' "$R/dropout_$c.log" | sed -n 5p)"
    [ -f "$R/prof/rank0.summary.txt" ] && mv "$R/prof/rank0.summary.txt" "$R/prof/megaton_dropout_$c.summary.txt"
    rm -f "$R/prof/rank0.trace.json"
  done
fi
for c in $CONFIGS; do
  ! wants train && continue
  phase "megaton $c profiled (8 iterations) ${TRAIN_FLAGS:-}"
  # shellcheck disable=SC2086
  capped 120 "$BUILD/megaton" train "${common[@]}" "${ln_flag[@]}" "${prof[@]}" ${dims[$c]} ${TRAIN_FLAGS:-} --metrics-file "$R/train_$c.jsonl" \
    --tensorboard-dir "$R/tb_$c" --log-timers-to-tensorboard > "$R/train_$c.log" 2>&1
  stamp "megaton $c exit code $?: $(grep -o 'elapsed time per iteration (ms): [0-9.]*\|TFLOPs: [0-9.]*' "$R/train_$c.log" |
    tail -2 | tr '\n' ' ')"
  grep -m1 -o 'memory (MB) .*' "$R/train_$c.log" | tee -a "$OUT/summary.txt"
  for f in "$R"/prof/rank0.summary.txt; do [ -f "$f" ] && mv "$f" "$R/prof/megaton_$c.summary.txt"; done
  [ -f "$R/prof/rank0.trace.json" ] && gzip -c "$R/prof/rank0.trace.json" > "$R/prof/megaton_$c.trace.json.gz" &&
    rm "$R/prof/rank0.trace.json"
  head -25 "$R/prof/megaton_$c.summary.txt" 2>/dev/null
  grep -h '"timer_ms"' "$R/train_$c.jsonl" | tail -1 | python3 -c 'import json,sys; print("timers (ms):", json.loads(sys.stdin.read())["timer_ms"])' 2>&1 |
    tee -a "$OUT/summary.txt"
done
# A/B: the same runs (no profile) with the defaults and with each flag set of AB_FLAGS (';'-separated): the step time
# each way and the losses, which must agree to bf16 rounding (compare_runs.py).
AB_FLAGS=${AB_FLAGS---no-gemm-epilogue-fusion;--no-fused-layernorm}
# --overlap-optimizer-step is only measured when its GPU test (the deferred update, group by group, the same bits) passed.
if [[ "$AB_FLAGS" == *--overlap-optimizer-step* ]] && grep -q 'FAILED .*KernelsAdam.DeferredUpdate' "$R/kernels.log"; then
  AB_FLAGS=$(tr ';' '\n' <<< "$AB_FLAGS" | grep -v -- '--overlap-optimizer-step' | paste -sd';')
  stamp "the deferred update failed its GPU test: no A/B of --overlap-optimizer-step (AB_FLAGS now '$AB_FLAGS')"
fi
ab_common=("${common[@]}")  # the flags every A/B run starts from (the dropout A/B below: Megatron's default dropout)
ab_run() {  # config tag flags...
  local c=$1 tag=$2; shift 2
  phase "megaton $c A/B $tag ${*:-(defaults)}"
  # shellcheck disable=SC2086
  # 30 iterations, a log line every 5: the loop reads the device (losses, grad norm) only at log lines, as a long run
  # does; compare_peer.py takes these defaults runs' medians as the headline numbers.
  capped 90 "$BUILD/megaton" train "${ab_common[@]}" "$@" --train-iters 30 --log-interval 5 ${dims[$c]} \
    --metrics-file "$R/ab_${c}_$tag.jsonl" > "$R/ab_${c}_$tag.log" 2>&1
  stamp "megaton $c ${*:-(defaults)} exit code $?: $(grep -o 'elapsed time per iteration (ms): [0-9.]*\|TFLOPs: [0-9.]*' \
    "$R/ab_${c}_$tag.log" | tail -2 | tr '\n' ' ')"
}
if [ ${#ln_flag[@]} -eq 0 ] && { [ -n "$AB_FLAGS" ] || wants protocol; }; then  # protocol: the defaults runs alone
  ab_sets=()
  [ -n "$AB_FLAGS" ] && IFS=';' read -r -a ab_sets <<< "$AB_FLAGS"
  for c in $CONFIGS; do
    ab_run "$c" base
    for i in "${!ab_sets[@]}"; do
      read -r -a extra <<< "${ab_sets[$i]}"
      ab_run "$c" "b$i" "${extra[@]}"
      echo "A = defaults, B = ${ab_sets[$i]} ($c):" | tee -a "$OUT/summary.txt"
      python3 "$SRC/perf/gpu/compare_runs.py" "$R/ab_${c}_base.jsonl" "$R/ab_${c}_b$i.jsonl" 2>&1 | tail -1 |
        tee -a "$OUT/summary.txt"
    done
    # AB_REPEAT=1: the defaults once more, last, and each B against that run too: the first run after the benchmarks
    # ran ~1% slower than the same code later in the call (docs/gpu.md, sixth session), an order effect this cancels.
    if [ -n "${AB_REPEAT:-}" ]; then
      ab_run "$c" base2
      for i in "${!ab_sets[@]}"; do
        echo "A = defaults again (last), B = ${ab_sets[$i]} ($c):" | tee -a "$OUT/summary.txt"
        python3 "$SRC/perf/gpu/compare_runs.py" "$R/ab_${c}_base2.jsonl" "$R/ab_${c}_b$i.jsonl" 2>&1 | tail -1 |
          tee -a "$OUT/summary.txt"
      done
    fi
  done
fi
# dropout_ab: with Megatron's default dropout (0.1 / 0.1), the defaults against DROPOUT_AB_FLAGS (default
# --no-dropout-layernorm-fusion: ATen's dropout before the add, not in the LayerNorm kernels). The masks differ between the two,
# so the losses agree only statistically (compare_runs.py --tol 0.02).
if [ "$dropout_kernels_failed" -gt 0 ]; then
  stamp "the dropout in the LayerNorm kernels failed its GPU tests: no dropout A/B"
elif [ ${#ln_flag[@]} -eq 0 ] && wants dropout_ab; then
  ab_common=("${base[@]}")
  read -r -a extra <<< "${DROPOUT_AB_FLAGS:---no-dropout-layernorm-fusion}"
  for c in $CONFIGS; do
    ab_run "$c" dropout_base
    ab_run "$c" dropout_b "${extra[@]}"
    echo "A = defaults with dropout 0.1, B = ${extra[*]} ($c):" | tee -a "$OUT/summary.txt"
    python3 "$SRC/perf/gpu/compare_runs.py" --tol 0.02 "$R/ab_${c}_dropout_base.jsonl" "$R/ab_${c}_dropout_b.jsonl" 2>&1 |
      tail -1 | tee -a "$OUT/summary.txt"
  done
  ab_common=("${common[@]}")
fi
# A checkpoint written on the GPU (124M, bf16, with optimizer state) loads and training continues from it.
if wants ckpt; then
# shellcheck disable=SC2086
capped 90 "$BUILD/megaton" train "${common[@]}" ${dims[124M]} --lr-decay-iters 100 --train-iters 4 --log-interval 1 --save /tmp/ckpt124 \
  --save-interval 4 > "$R/save_124M.log" 2>&1
stamp "save exit code $?: $(grep -o 'saved checkpoint.*' "$R/save_124M.log" | tail -1 | head -c 160)"
# shellcheck disable=SC2086
capped 90 "$BUILD/megaton" train "${common[@]}" ${dims[124M]} --lr-decay-iters 100 --train-iters 6 --log-interval 1 --load /tmp/ckpt124 \
  > "$R/resume_124M.log" 2>&1
stamp "resume exit code $?: $(grep -o 'loaded .* at iteration [0-9]*\|iteration *6/.*lm loss: [0-9.E+-]*' "$R/resume_124M.log" | head -c 300)"
rm -rf /tmp/ckpt124
fi
if wants train; then
  first_config=${CONFIGS%% *}  # the profiled runs' TensorBoard directory of the first config run
  python3 "$SRC/perf/gpu/check_tfevents.py" "$R/tb_$first_config" "lm loss" "forward-backward-time" > "$R/tb.log" 2>&1
  stamp "TensorBoard reads megaton's events: exit code $? ($(grep -c . "$R/tb.log") lines)"
fi

if wants peer; then
phase "peer $CONFIGS"
PEER_PROFILE_DIR="$R/prof" PYTHONUNBUFFERED=1 capped 150 python3 "$SRC/perf/gpu/torch_gpt_bench.py" $CONFIGS \
  > "$R/peer.log" 2>&1
stamp "peer exit code $?"
grep -E "TFLOP|Error" "$R/peer.log" | tee -a "$OUT/summary.txt"
python3 "$SRC/perf/gpu/compare_peer.py" "$R" $CONFIGS 2>&1 | tee -a "$OUT/summary.txt"  # medians and the ratio
for f in "$R"/prof/peer_*.summary.txt; do head -25 "$f"; done
fi
# Both programs under both protocols (perf/gpu/protocol_compare.py): megaton as the peer anchor measures itself (15
# iterations, a log line every 5, the mean of iterations 6-15), and the peer as megaton's headline runs measure
# (PEER_SUSTAINED: 30 steps, the median of the windows over steps 11-30). The other halves are the A/B defaults runs
# above and the peer's own run.
if wants protocol; then
  for c in $CONFIGS; do
    phase "megaton $c short protocol (15 iterations)"
    # shellcheck disable=SC2086
    capped 90 "$BUILD/megaton" train "${common[@]}" "${ln_flag[@]}" --train-iters 15 --log-interval 5 ${dims[$c]} \
      --metrics-file "$R/short_$c.jsonl" > "$R/short_$c.log" 2>&1
    stamp "megaton $c short protocol exit code $?"
  done
  phase "peer $CONFIGS sustained protocol"
  PEER_SUSTAINED=1 PYTHONUNBUFFERED=1 capped 150 python3 "$SRC/perf/gpu/torch_gpt_bench.py" $CONFIGS \
    > "$R/peer_sustained.log" 2>&1
  stamp "peer sustained exit code $?"
  python3 "$SRC/perf/gpu/protocol_compare.py" "$R" $CONFIGS 2>&1 | tee -a "$OUT/summary.txt"
fi
phase after
[ -f "$CLOCKS" ] && python3 "$SRC/perf/gpu/gpu_clocks.py" "$CLOCKS" 2>&1 | tee -a "$OUT/summary.txt"

if wants generate; then
  BUILD=$BUILD VOCAB_DIR="$REPO/data/downloaded/gpt2" capped 200 bash "$SRC/perf/generate/run.sh" "$R/generate" \
    > "$R/generate.log" 2>&1
  stamp "generate bench exit code $?"
  cat "$R/generate/summary.txt" 2>/dev/null | tee -a "$OUT/summary.txt"
  rm -rf "$R/generate/ckpt" "$R/generate/hf_init" "$R/generate/hf_export"  # large; rebuilt from the seed
fi
# CheckpointTracker.WritesAtomicallyAndPrunes segfaulted here on 2026-12-02 in libtorch.so's copy of
# std::filesystem::remove_all (CMakeLists.txt now links libstdc++ first): a backtrace if it still does.
wants ckpt && (cd "$BUILD" && capped 60 cuda-gdb -batch -ex run -ex bt --args tests/megaton_unit_tests \
  --gtest_filter='CheckpointTracker.*' > "$R/tracker_gdb.log" 2>&1)
[ -f "$R/tracker_gdb.log" ] && grep -E '^#[0-9]+ ' "$R/tracker_gdb.log" | head -12 | cut -c1-200 | tee -a "$OUT/summary.txt"
# The unit tests (all but Kernels*, run above) through ctest, one process per test and many at once (~11 s on 16
# cores): in one process a hung test (the twelfth session's dropout deadlock) hid every later result. Each test has
# its own timeout; the log is line-buffered, so what ran comes back even when the call's time runs out.
if wants unit && [ "$(left)" -gt 80 ]; then
  (cd "$BUILD" && capped 300 stdbuf -oL ctest -L unit -E "${UNIT_EXCLUDE:-^Kernels}" -R "${UNIT_FILTER:-.}" \
    -j "$(( $(nproc) - 2 ))" --timeout 150 --output-on-failure > "$R/unit_tests.log" 2>&1)
  stamp "unit tests exit code $?: $(grep -E 'tests passed|tests failed' "$R/unit_tests.log" | tail -1)"
  sed -n '/The following tests FAILED/,$p' "$R/unit_tests.log" | head -20 | tee -a "$OUT/summary.txt"
  # Script tests with a GPU branch (bf16 on the device beside the CPU runs).
  (cd "$BUILD" && capped 120 ctest -R "${GPU_SCRIPT_TESTS:-test_train_overlap_optimizer}" -V \
    > "$R/gpu_script_tests.log" 2>&1)
  stamp "GPU script tests exit code $?: $(grep -E 'tests passed|tests failed|GPU:' "$R/gpu_script_tests.log" | tail -2 |
    tr '\n' ' ')"
fi
# 7. the perf/sweep sweep with what time is left (its CSV grows config by config), then the cost model against it.
if wants sweep && [ "$(left)" -gt 60 ]; then
  BUILD=$BUILD timeout $(( $(left) - 25 )) bash "$SRC/perf/sweep/run_sweep.sh" "$SRC/perf/sweep/configs/h200-1gpu.txt" \
    "$R/sweep" > "$R/sweep.log" 2>&1
  stamp "sweep exit code $?"
  grep -E "^sweep:" "$R/sweep.log" | tee -a "$OUT/summary.txt"
  [ -f "$R/sweep/sweep.csv" ] && "$BUILD/megaton" plan --check "$R/sweep/sweep.csv" > "$R/plan_check.txt" 2>&1
  tail -4 "$R/plan_check.txt" 2>/dev/null | tee -a "$OUT/summary.txt"
fi
stamp "done"
