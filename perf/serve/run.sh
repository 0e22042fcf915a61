#!/bin/bash
# perf/serve/run.sh OUTDIR — `megaton serve` throughput (requests/s, generated tokens/s) beside Hugging Face
# transformers' generate() on the same weights, on one GPU, in the same run (perf/generate builds the model):
#   1. a random GPT-2 (default 345M) -> megaton import-hf -> checkpoint; megaton export-hf -> the HF peer's weights
#   2. for each batch size B: transformers generate() of B rows x NEW tokens (perf/generate/hf_generate.py, best of 3),
#      then megaton serve --max-batch-size B answering 4 x B concurrent HTTP requests of NEW tokens each
#      (load_client.py: greedy, ignore_eos), the server's batches filled by concurrent requests
# Prints both and serve/HF. Needs a GPU build (make gpu), python3 with torch + transformers, GPT-2 vocab.json and
# merges.txt (VOCAB_DIR, default data/downloaded/gpt2). Environment: BUILD (build-gpu), NEW (256), BATCHES ("1 8 32"),
# DTYPE (bf16), LAYERS HIDDEN HEADS SEQ (24 1024 16 1024).
set -euo pipefail
OUT=$(realpath -m "${1:?usage: run.sh OUTDIR}")
DTYPE=${DTYPE:-bf16}
HERE=$(dirname "$(realpath "$0")")
source "$HERE/../generate/bench_model.sh"
echo "model: $(cat "$OUT/model.txt"); $DTYPE; $NEW new tokens a request"
for b in $BATCHES; do
  hf=$(python3 "$GEN/hf_generate.py" "$OUT/hf_export" --batch "$b" --new-tokens "$NEW" --dtype "$DTYPE" 2> "$OUT/hf_b$b.err")
  "$BUILD/megaton" serve "${model[@]}" --load "$OUT/ckpt" --port 0 --max-batch-size "$b" > "$OUT/serve_b$b.log" 2>&1 &
  pid=$!
  url=""
  for _ in $(seq 1 600); do
    url=$(grep -o "on http://[0-9.]*:[0-9]*" "$OUT/serve_b$b.log" | head -1 | cut -c4-) || true
    [ -n "$url" ] && break
    kill -0 $pid 2> /dev/null || { tail -20 "$OUT/serve_b$b.log"; exit 1; }
    sleep 0.5
  done
  sv=$(python3 "$HERE/load_client.py" "$url" ckpt --requests $((4 * b)) --concurrency "$b" --new-tokens "$NEW")
  kill -TERM $pid; wait $pid || true
  hf_tps=$(sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p' <<< "$hf")
  sv_tps=$(sed -n 's/.*tokens_per_s=\([0-9.]*\).*/\1/p' <<< "$sv")
  echo "$hf"
  echo "$sv"
  echo "batch $b: serve/hf tokens/s = $(awk "BEGIN { printf \"%.2f\", $sv_tps / $hf_tps }")"
done
