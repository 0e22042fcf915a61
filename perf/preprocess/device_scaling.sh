#!/bin/bash
# Worker scaling of `megaton preprocess` on a many-core machine (the GPU machine's 16 CPUs), beside Python peers
# (tiktoken, HF tokenizers; single-threaded) on the same text.  bash perf/preprocess/device_scaling.sh BINARY [REPEAT]
# Needs data/downloaded/{gpt2,corpus,hf/gpt2} (carried). Prints one table; also writes it to $OUT/scaling.txt if set.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$1"
repeat="${2:-16}"
dl="$src/data/downloaded"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for ((i = 0; i < repeat; i++)); do cat "$dl/corpus/fortunes.jsonl"; done > "$work/in.jsonl"
bytes=$(stat -c %s "$work/in.jsonl")
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
ncpu=$(nproc)
{
printf "input: fortunes.jsonl x%d = %.1f MB, %d CPUs (%s)\n" "$repeat" "$(calc "$bytes/1e6")" "$ncpu" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
printf "%-26s %8s %8s %9s %12s %11s %9s %8s\n" run wall_s cpu_s MB/s tokens/s MB/s/core vs_peer speedup
peer_rate=""
for p in tiktoken hf-tokenizers; do
  line=$(python3 "$src/perf/preprocess/peer_python.py" "$p" "$work/in.jsonl" "$dl/gpt2/vocab.json" "$dl/gpt2/merges.txt" "$dl/hf/gpt2/tokenizer.json" 2>/dev/null) || { echo "peer $p: unavailable"; continue; }
  read -r wall cpu tokens < <(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d['wall_s'], d['cpu_s'], d['tokens'])" "$line")
  rate=$(calc "$bytes/1e6/$cpu")
  [ -n "$peer_rate" ] || peer_rate=$rate
  printf "%-26s %8.2f %8.2f %9.2f %12.0f %11.2f %9.2f %8s\n" "peer $p (1 thread)" "$wall" "$cpu" "$(calc "$bytes/1e6/$wall")" "$(calc "$tokens/$wall")" "$rate" "$(calc "$rate/$peer_rate")" "-"
done
base=""
for w in $(printf "%s\n" 1 2 4 8 "$ncpu" | awk -v n="$ncpu" '$1 <= n && !seen[$1]++'); do
  rm -f "$work"/out_*
  TIMEFORMAT="%R %U %S"
  t=$( { time "$bin" preprocess --input "$work/in.jsonl" --output-prefix "$work/out" --tokenizer-type GPT2BPETokenizer \
        --vocab-file "$dl/gpt2/vocab.json" --merge-file "$dl/gpt2/merges.txt" --append-eod --workers "$w" \
        --log-interval 0 --log-level warning >/dev/null 2>&1; } 2>&1 )
  read -r wall usr sys <<< "$t"
  cpu=$(calc "$usr+$sys")
  tokens=$(( $(stat -c %s "$work/out_text_document.bin") / 2 ))
  rate=$(calc "$bytes/1e6/$cpu")
  [ -n "$base" ] || base=$wall
  printf "%-26s %8.2f %8.2f %9.2f %12.0f %11.2f %9.2f %8.2f\n" "megaton --workers $w" "$wall" "$cpu" "$(calc "$bytes/1e6/$wall")" "$(calc "$tokens/$wall")" "$rate" "$(calc "$rate/${peer_rate:-$rate}")" "$(calc "$base/$wall")"
done
} | tee "${OUT:-$work}/scaling.txt"
