#!/bin/bash
# perf/generate/run.sh OUTDIR — generation tokens/s of `megaton generate` (KV cache, greedy, unconditional) beside
# Hugging Face transformers generating from the same weights, batch 1 and batched, on one GPU, in the same run:
#   1. make_hf_model.py: a random GPT-2 (default 345M: 24 x 1024, 16 heads, 1024 positions) in safetensors
#   2. megaton import-hf -> a megaton checkpoint; megaton export-hf of that checkpoint -> the HF peer's weights
#   3. for each batch size: megaton generate --num-samples 2*B --micro-batch-size B (the first batch warms up; the log
#      reports tokens/s over both) and hf_generate.py --batch B (best of 3 after a warm-up)
# Needs: a GPU build (make gpu; source build-gpu/env.sh), python3 with torch + transformers, GPT-2 vocab.json and
# merges.txt (VOCAB_DIR, default data/downloaded/gpt2: `bash data/fetch_gpt2_tokenizer.sh` or carry it).
# Environment: BUILD (build-gpu), LAYERS HIDDEN HEADS SEQ (24 1024 16 1024), NEW (256 new tokens), BATCHES ("1 8 32"),
# DTYPE (fp32 | bf16).
set -euo pipefail
OUT=$(realpath -m "${1:?usage: run.sh OUTDIR}")
DTYPE=${DTYPE:-fp32}
source "$(dirname "$(realpath "$0")")/bench_model.sh"
tee "$OUT/summary.txt" < "$OUT/model.txt"

for b in $BATCHES; do
  # --ignore-eos: fixed-length decoding, as the HF peer's min_new_tokens.
  "$BUILD/megaton" generate "${model[@]}" --load "$OUT/ckpt" --greedy --ignore-eos --num-samples $((2 * b)) \
    --micro-batch-size "$b" --out-seq-length "$NEW" --genfile "$OUT/megaton_b$b.jsonl" > "$OUT/megaton_b$b.log" 2>&1
  echo "megaton batch=$b: $(grep -o 'wrote .*' "$OUT/megaton_b$b.log" | tail -1)" | tee -a "$OUT/summary.txt"
  python3 "$GEN/hf_generate.py" "$OUT/hf_export" --batch "$b" --new-tokens "$NEW" --dtype "$DTYPE" \
    2> "$OUT/hf_b$b.err" | tee -a "$OUT/summary.txt"
done

# The HF export checked in transformers itself: it loads, round-trips the weights, and decodes the text megaton decoded.
python3 "$GEN/compare_hf.py" "$OUT/hf_init" "$OUT/hf_export" "$OUT/megaton_b1.jsonl" --vocab-dir "$VOCAB_DIR" \
  --new-tokens "$NEW" 2>"$OUT/compare_hf.err" | tee -a "$OUT/summary.txt"
