#!/bin/bash
# Shared start of the one-call GPU batches (gpu_batch.sh, session_batch.sh, sweep_batch.sh, profile_accum.sh,
# train_step_batch.sh; sourced, not run). After
#   OUT=$(realpath -m "$1"); BUDGET_S=...; source "$(dirname "$0")/batch_lib.sh"
# OUT exists; `left` prints the seconds of BUDGET_S left and `stamp MSG` prints a timestamped line (also appended to
# OUT/summary.txt); NVLink multicast is off and mpirun may run as root; REPO is the working directory, DEPS the folder
# of fetch_debs.sh's .deb files (default REPO/.deps), SRC is REPO or, when DEPS/src.tar (a `git archive` snapshot)
# exists, /tmp/megaton-src made equal to it (sync_tree.py: only changed files are rewritten, so on a warm machine the
# build of an earlier call stays and ninja rebuilds what the new snapshot changed), so edits in progress cannot break
# the build; BUILD is SRC/build-gpu.
#   build_megaton SECONDS   builds $TARGETS (default `megaton`) with perf/gpu/setup.sh (-> OUT/build.log), stamps the
#                           exit code and the compiler errors, and sources BUILD/env.sh
#   synth_dataset PREFIX; SYNTH_DATA, TRAIN_BASE, MODEL_DIMS, MICRO_BATCH   the issue-9 training runs' data and flags
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((T0 + BUDGET_S - $(date +%s))); }
stamp() { echo "[+$(($(date +%s) - T0))s] $*" | tee -a "$OUT/summary.txt"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
REPO=$PWD
DEPS=$(realpath -m "${DEPS:-$REPO/.deps}")
SRC=$REPO
if [ -f "$DEPS/src.tar" ]; then
  SRC=/tmp/megaton-src
  python3 "$REPO/perf/gpu/sync_tree.py" "$DEPS/src.tar" "$SRC" build-gpu >> "$OUT/summary.txt"
  # carried, git-ignored data the unit tests read from the source tree (the GPT-2 vocabulary: TokenizerGpt2.*)
  [ -d "$REPO/data/downloaded" ] && mkdir -p "$SRC/data" && ln -sfn "$REPO/data/downloaded" "$SRC/data/downloaded"
fi
BUILD=$SRC/build-gpu

build_megaton() {
  ( export SRC BUILD JOBS=$(nproc) DEPS TARGETS=${TARGETS:-megaton}
    timeout "$1" bash "$SRC/perf/gpu/setup.sh" ) > "$OUT/build.log" 2>&1
  stamp "build exit code $?"
  grep -E 'error:|FAILED:' "$OUT/build.log" | head -20
  # shellcheck disable=SC1091
  source "$BUILD/env.sh"
}

# synth_dataset PREFIX: a random-token Megatron dataset at PREFIX.bin/.idx (perf/gpu/synth_data.py: 600 documents of
# 2000 uint16 tokens < 50256, each ending in EOD 50256, like GPT-2's vocabulary).
synth_dataset() {
  python3 "$SRC/perf/gpu/synth_data.py" "$1"
}

# The training runs of issue 9's batches (session_batch.sh, profile_accum.sh): TRAIN_BASE, random-token data from
# `synth_dataset "$SYNTH_DATA"`, bf16, on one GPU; MODEL_DIMS, Megatron's dims of GPT-2 124M and GPT 1.3B; MICRO_BATCH,
# the issue's micro-batch of each (the global batch is the caller's).
SYNTH_DATA=/tmp/synth_text_document
TRAIN_BASE=(--vocab-size 50257 --data-path "$SYNTH_DATA" --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5
  --eval-interval 100000 --eval-iters 1 --device cuda --distributed-backend nccl --seed 1234)
declare -A MODEL_DIMS=(
  [124M]="--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --max-position-embeddings 1024"
  [1.3B]="--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048")
declare -A MICRO_BATCH=([124M]=32 [1.3B]=8)
