#!/bin/bash
# perf/gpu/train_step_batch.sh OUTDIR [BUDGET_S] — issue 4/9 measurement on one GPU, in one device call:
#   1. build `megaton` with CUDA (perf/gpu/setup.sh, TARGETS=megaton)                         -> OUTDIR/build.log
#   2. a random-token Megatron dataset (vocab 50257, like GPT-2), written with numpy           -> /tmp/synth_text_document.*
#   3. `megaton train` bf16, 1.3B (24 x 2048, 16 heads, seq 2048, micro-batch 8) and GPT-2 124M (12 x 768, seq 1024,
#      micro-batch 32), a few iterations each, log every iteration                           -> OUTDIR/train_*.log/.jsonl
#   4. the peer (perf/gpu/torch_gpt_bench.py, plain PyTorch eager, SDPA) on the same dims, same GPU, after ours -> OUTDIR/peer.log
# Prints a summary last. Model FLOPs: Megatron's 72 B s l h^2 (1 + s/6h + V/12lh), as both report.
set -uo pipefail
OUT=$(realpath -m "${1:?usage: train_step_batch.sh OUTDIR [BUDGET_S]}")
BUDGET_S=${2:-240}
# shellcheck source=batch_lib.sh
source "$(dirname "$0")/batch_lib.sh"  # OUT, left, stamp, REPO, SRC, BUILD, build_megaton
build_megaton 200
synth_dataset /tmp/synth_text_document
stamp "synthetic data written"
common="--vocab-size 50257 --data-path /tmp/synth_text_document --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5
  --hidden-dropout 0 --attention-dropout 0 --log-interval 1 --eval-interval 100000 --eval-iters 1
  --device cuda --distributed-backend nccl --seed 1234"
# shellcheck disable=SC2086
timeout $(( $(left) > 100 ? 90 : 45 )) "$BUILD/megaton" train $common --num-layers 24 --hidden-size 2048 \
  --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 8 \
  --global-batch-size 8 --train-iters 8 --metrics-file "$OUT/train_1.3B.jsonl" > "$OUT/train_1.3B.log" 2>&1
stamp "megaton 1.3B exit code $?"
tail -4 "$OUT/train_1.3B.log"
# shellcheck disable=SC2086
timeout 40 "$BUILD/megaton" train $common --num-layers 12 --hidden-size 768 --num-attention-heads 12 \
  --seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 32 --global-batch-size 32 --train-iters 8 \
  --metrics-file "$OUT/train_124M.jsonl" > "$OUT/train_124M.log" 2>&1
stamp "megaton 124M exit code $?"
tail -3 "$OUT/train_124M.log"
PYTHONUNBUFFERED=1 timeout $(( $(left) > 20 ? $(left) - 5 : 15 )) python3 "$SRC/perf/gpu/torch_gpt_bench.py" 1.3B 124M > "$OUT/peer.log" 2>&1
stamp "peer exit code $?"
cat "$OUT/peer.log" | grep -E "TFLOP|Error" | tee -a "$OUT/summary.txt"
grep -hE "TFLOP" "$OUT"/train_*.log | tail -4 | tee -a "$OUT/summary.txt"
stamp "done"
