#!/bin/bash
# perf/generate/prepare_model.sh OUTDIR — the model the generation and serving benchmarks decode, as both sides see it:
# a random GPT-2 in safetensors (make_hf_model.py) -> megaton import-hf -> OUTDIR/ckpt, and megaton export-hf of that
# checkpoint -> OUTDIR/hf_export for the transformers peer. Environment: BUILD, LAYERS HIDDEN HEADS SEQ (as run.sh).
set -euo pipefail
OUT=$1
HERE=$(dirname "$(realpath "$0")")
python3 "$HERE/make_hf_model.py" "$OUT/hf_init" --layers "$LAYERS" --hidden "$HIDDEN" --heads "$HEADS" --positions "$SEQ"
"$BUILD/megaton" import-hf --hf "$OUT/hf_init" --save "$OUT/ckpt" > "$OUT/import.log" 2>&1
"$BUILD/megaton" export-hf --load "$OUT/ckpt" --out "$OUT/hf_export" > "$OUT/export.log" 2>&1
