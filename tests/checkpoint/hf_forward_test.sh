#!/usr/bin/env bash
# import-hf gives a model that computes what GPT-2 computes: a random Hugging Face GPT-2 directory (written by
# hf_gpt2_reference.py), imported with `megaton import-hf` and decoded greedily by `megaton generate` (KV cache, and
# --recompute), yields the same tokens as an independent NumPy GPT-2 (float64) on the original safetensors file; the
# same after export-hf -> import-hf. (On the GPU node, perf/generate/compare_hf.py checks it against transformers.)
# Usage: test_checkpoint_hf_forward.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
B=$1 S=$2
PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3  # a pyenv python3 without NumPy ahead on PATH
bash "$S/data/fetch_gpt2_tokenizer.sh"  # GPT-2's vocab.json / merges.txt (idempotent)
VOCAB="$S/data/downloaded/gpt2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
$PY "$S/tests/checkpoint/hf_gpt2_reference.py" make "$work/hf"
"$B/megaton" import-hf --hf "$work/hf" --save "$work/ck" > "$work/import.log" 2>&1 || { cat "$work/import.log"; fail import-hf; }
N=16
want=$($PY "$S/tests/checkpoint/hf_gpt2_reference.py" greedy "$work/hf" $N "$VOCAB/vocab.json")
gen() {  # CHECKPOINT OUT [flags]
  local ck=$1 out=$2; shift 2
  "$B/megaton" generate --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 \
    --max-position-embeddings 64 --openai-gelu --tokenizer-type GPT2BPETokenizer --vocab-file "$VOCAB/vocab.json" \
    --merge-file "$VOCAB/merges.txt" --device cpu --load "$ck" --greedy --ignore-eos --num-samples 1 \
    --micro-batch-size 1 --out-seq-length $N --genfile "$out" "$@" > "$out.log" 2>&1 || { cat "$out.log"; fail "generate $*"; }
}
check() {  # GENFILE WHAT
  $PY - "$1" "$want" "$2" <<'PY'
import json, sys
got, want = json.loads(open(sys.argv[1]).readline())["text"], json.loads(sys.argv[2])["text"]
if got != want:
    sys.exit(f"FAIL {sys.argv[3]}: megaton {got!r}\n  reference {want!r}")
print(f"{sys.argv[3]}: {len(want)} characters equal to the NumPy reference")
PY
}
gen "$work/ck" "$work/kv.jsonl"
check "$work/kv.jsonl" "imported, KV cache"
gen "$work/ck" "$work/re.jsonl" --recompute
check "$work/re.jsonl" "imported, --recompute"
"$B/megaton" export-hf --load "$work/ck" --out "$work/hf2" > "$work/export.log" 2>&1 || { cat "$work/export.log"; fail export-hf; }
"$B/megaton" import-hf --hf "$work/hf2" --save "$work/ck2" > "$work/import2.log" 2>&1 || fail "import-hf of the export"
gen "$work/ck2" "$work/rt.jsonl"
check "$work/rt.jsonl" "export-hf -> import-hf"
echo PASS
