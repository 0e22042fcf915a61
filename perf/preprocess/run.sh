#!/bin/bash
# perf/preprocess: `megaton preprocess` throughput with 1, 2 and all workers on the bundled corpus, beside an npm
# GPT-2 encoder (the peer) on the same text in the same run.
#   bash perf/preprocess/run.sh [MEGATON_BINARY] [REPEAT] [PEER...]
# MEGATON_BINARY defaults to build/megaton; the corpus (data/downloaded/corpus/fortunes.jsonl, ~3 MB) is repeated
# REPEAT times (default 4) so start-up costs (loading vocab.json, 0.3 s) stay small; PEER defaults to js-tiktoken
# (add gpt-3-encoder for the slower original port). Prints wall and CPU seconds, MB/s, tokens/s, MB/s per CPU-second
# (per core) and the per-core ratio to the peer; "speedup" is wall-time relative to 1 worker.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-$src/build/megaton}"
repeat="${2:-4}"
shift $(( $# > 2 ? 2 : $# ))
peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(js-tiktoken)
bash "$src/data/fetch_gpt2_tokenizer.sh" >/dev/null
corpus="$src/data/downloaded/corpus/fortunes.jsonl"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for ((i = 0; i < repeat; i++)); do cat "$corpus"; done > "$work/in.jsonl"
bytes=$(stat -c %s "$work/in.jsonl")
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
ncpu=$(nproc)
printf "input: %s x%d = %.1f MB, %d CPUs\n" "$(basename "$corpus")" "$repeat" "$(calc "$bytes/1000000")" "$ncpu"
printf "%-26s %8s %8s %9s %12s %11s %9s %8s\n" run wall_s cpu_s MB/s tokens/s MB/s/core vs_peer speedup

# Peer first (single-threaded Node), so its per-core rate is known for the ratios.
peer_rate=""
for p in "${peers[@]}"; do
  line=$(node "$src/perf/preprocess/peer_encode.js" "$p" "$work/in.jsonl")
  read -r wall cpu tokens < <(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d['wall_s'], d['cpu_s'], d['tokens'])" "$line")
  rate=$(calc "$bytes/1000000/$cpu")
  [ -n "$peer_rate" ] || peer_rate=$rate
  printf "%-26s %8.2f %8.2f %9.2f %12.0f %11.2f %9s %8s\n" "peer $p (node)" "$wall" "$cpu" \
    "$(calc "$bytes/1000000/$wall")" "$(calc "$tokens/$wall")" "$rate" "1.00" "-"
done

base_wall=""
for w in $(printf "%s\n" 1 2 "$ncpu" | awk -v n="$ncpu" '$1 <= n && !seen[$1]++'); do
  rm -f "$work"/out_*
  TIMEFORMAT="%R %U %S"
  t=$( { time "$bin" preprocess --input "$work/in.jsonl" --output-prefix "$work/out" --tokenizer-type GPT2BPETokenizer \
        --vocab-file "$src/data/downloaded/gpt2/vocab.json" --merge-file "$src/data/downloaded/gpt2/merges.txt" \
        --append-eod --workers "$w" --log-interval 0 --log-level warning >/dev/null 2>&1; } 2>&1 )
  read -r wall usr sys <<< "$t"
  cpu=$(calc "$usr+$sys")
  tokens=$(( ($(stat -c %s "$work/out_text_document.bin")) / 2 ))
  rate=$(calc "$bytes/1000000/$cpu")
  [ -n "$base_wall" ] || base_wall=$wall
  printf "%-26s %8.2f %8.2f %9.2f %12.0f %11.2f %9.2f %8.2f\n" "megaton --workers $w" "$wall" "$cpu" \
    "$(calc "$bytes/1000000/$wall")" "$(calc "$tokens/$wall")" "$rate" \
    "$(calc "$rate/$peer_rate")" "$(calc "$base_wall/$wall")"
done
