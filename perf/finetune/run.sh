#!/bin/bash
# perf/finetune: the attention of packed prompt rows on a GPU, bf16, a 350M GPT (24 x 1024, seq 2048, micro-batch 4,
# global batch 16, 40 iterations) on synthetic prompt pairs of two shapes:
#   long:  inputs of 50-900 characters, targets of 10-300 (xP3-like: a few pairs per row)
#   short: examples/finetune_t0's 3-6 letter reversals (about 170 pairs per row)
# For each: finetune-t0 through the variable-length flash kernel (the default), the same through SDPA with the
# segments' [b, 1, s, s] mask (--no-varlen-attention), finetune-t0-non-causal (bidirectional inputs: the mask path),
# and `megaton train` on the long inputs as unpacked causal samples (no segments), the baseline of the ratios.
# Prints seconds per iteration (the run's summary line: all 40 iterations) and the ratio to the baseline.
#   bash perf/finetune/run.sh [BUILD_DIR (build-gpu)]
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build=$(realpath -m "${1:-$src/build-gpu}")
megaton="$build/megaton"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
MEGATON="$megaton" DEVICE=cuda bash "$src/examples/finetune_t0/run.sh" "$work/short" > /dev/null
tok=(--tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/short/tok")
python3 - "$work/long.jsonl" <<'PY'
import json, random, sys
rng = random.Random(3)
with open(sys.argv[1], "w") as f:
    for _ in range(4000):
        text = lambda lo, hi: "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(lo, hi)))
        f.write(json.dumps({"inputs": text(50, 900), "targets": text(10, 300)}) + "\n")
PY
for k in inputs targets; do
  "$megaton" preprocess --input "$work/long.jsonl" --output-prefix "$work/long" --json-keys $k "${tok[@]}" > /dev/null
done
model=(--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048
       "${tok[@]}" --micro-batch-size 4 --global-batch-size 16 --train-iters 40 --lr 1e-4 --bf16 --device cuda
       --log-interval 10 --eval-interval 1000 --eval-iters 1 --split 100,0,0 --loss-on-targets-only)
seconds() {  # seconds COMMAND ARGS...: the run's seconds per iteration
  "$megaton" "$@" "${model[@]}" > "$work/run.log" 2>&1 || { tail -20 "$work/run.log"; exit 1; }
  sed -n 's/.*summary: .* (\([0-9.]*\) s\/iteration.*/\1/p' "$work/run.log"
}
base=$(seconds train --data-path "$work/long_inputs_document")
printf "%-52s %10s %8s\n" run s/iter ratio
printf "%-52s %10s %8s\n" "train, unpacked causal samples (baseline)" "$base" 1.00
for data in long short; do
  prefix=$work/long
  [ $data = short ] && prefix=$work/short/rev
  for v in "finetune-t0" "finetune-t0 --no-varlen-attention" "finetune-t0-non-causal"; do
    # shellcheck disable=SC2086
    t=$(seconds $v --data-path "$prefix")
    printf "%-52s %10s %8s\n" "$data prompts: $v" "$t" "$(awk "BEGIN { printf \"%.2f\", $base / $t }")"
  done
done
