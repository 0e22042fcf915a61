#!/bin/bash
# Sourced by perf/generate/run.sh and perf/serve/run.sh (after OUT and DTYPE are set): the settings they share, the
# checks of what they need, and the model both sides decode. Writes a random GPT-2 in safetensors
# (make_hf_model.py; its summary in OUT/model.txt) -> megaton import-hf -> OUT/ckpt, and megaton export-hf of that
# checkpoint -> OUT/hf_export for the transformers peer; sets GEN (this folder) and `model`, megaton's flags for it.
# Environment: BUILD (build-gpu), VOCAB_DIR (data/downloaded/gpt2), LAYERS HIDDEN HEADS SEQ (24 1024 16 1024),
# NEW (256 new tokens), BATCHES ("1 8 32").
BUILD=${BUILD:-build-gpu}
VOCAB_DIR=${VOCAB_DIR:-data/downloaded/gpt2}
LAYERS=${LAYERS:-24} HIDDEN=${HIDDEN:-1024} HEADS=${HEADS:-16} SEQ=${SEQ:-1024} NEW=${NEW:-256}
BATCHES=${BATCHES:-1 8 32}
GEN=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
mkdir -p "$OUT"
[ -f "$BUILD/env.sh" ] && source "$BUILD/env.sh"
python3 -c "import transformers" 2>/dev/null || { echo "python3 has no transformers: the HF peer cannot run" >&2; exit 2; }
[ -f "$VOCAB_DIR/vocab.json" ] || { echo "no $VOCAB_DIR/vocab.json (GPT-2 tokenizer files)" >&2; exit 2; }

python3 "$GEN/make_hf_model.py" "$OUT/hf_init" --layers "$LAYERS" --hidden "$HIDDEN" --heads "$HEADS" \
  --positions "$SEQ" > "$OUT/model.txt"
"$BUILD/megaton" import-hf --hf "$OUT/hf_init" --save "$OUT/ckpt" > "$OUT/import.log" 2>&1
"$BUILD/megaton" export-hf --load "$OUT/ckpt" --out "$OUT/hf_export" > "$OUT/export.log" 2>&1
prec=()
[ "$DTYPE" = bf16 ] && prec=(--bf16)
[ "$DTYPE" = fp16 ] && prec=(--fp16)
model=(--num-layers "$LAYERS" --hidden-size "$HIDDEN" --num-attention-heads "$HEADS" --seq-length "$SEQ"
       --max-position-embeddings "$SEQ" --openai-gelu --tokenizer-type GPT2BPETokenizer
       --vocab-file "$VOCAB_DIR/vocab.json" --merge-file "$VOCAB_DIR/merges.txt" --device cuda
       --distributed-backend nccl "${prec[@]}")
