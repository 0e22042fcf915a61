#!/bin/bash
# End-to-end: the sample index megaton train caches (doc_idx, sample_idx, shuffle_idx .npy files) is byte-identical to
# what Megatron-DeepSpeed's gpt_dataset.py writes, computed by an independent NumPy implementation of the fork's
# algorithm (fork_gpt_indices.py), in every regime: one epoch, several epochs with a full last epoch or one over 95% full, a last epoch
# between 80% and 95% full (shuffled separately: the fork's cutoff is 0.95) and one below 80%.
#   $1 = build dir, $2 = source dir
set -euo pipefail
build="$1"
src="$2"
megaton="$build/megaton"
PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3  # a pyenv python3 without NumPy ahead on PATH
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# 61 documents of 3..40 tokens (ids < 100).
$PY - "$work/corpus_text_document" <<'PY'
import random, struct, sys
rng = random.Random(7)
docs = [[rng.randrange(100) for _ in range(rng.randrange(3, 41))] for _ in range(61)]
with open(sys.argv[1] + ".bin", "wb") as f:
    for d in docs:
        f.write(struct.pack("<%dH" % len(d), *d))
with open(sys.argv[1] + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
    f.write(struct.pack("<%di" % len(docs), *[len(d) for d in docs]))
    offsets = [0]
    for d in docs[:-1]:
        offsets.append(offsets[-1] + 2 * len(d))
    f.write(struct.pack("<%dq" % len(docs), *offsets))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
PY
tokens=$($PY -c "import struct,sys; f=open('$work/corpus_text_document.idx','rb'); f.read(26); n=struct.unpack('<Q',f.read(8))[0]-1; print(sum(struct.unpack('<%di'%n,f.read(4*n))))")
seq=16
per_epoch=$(( (tokens - 1) / seq ))
before_last2=$(( (2 * tokens - 1) / seq ))  # samples from two whole epochs
# name  num_samples  expected "epochs E separate S"
cases=(
  "one-epoch $(( per_epoch / 2 )) 1 0"
  "last-epoch-full $(( before_last2 + per_epoch )) 3 0"
  "last-epoch-96pct $(( before_last2 + per_epoch * 96 / 100 )) 3 0"
  "last-epoch-88pct $(( before_last2 + per_epoch * 88 / 100 )) 3 1"
  "last-epoch-30pct $(( before_last2 + per_epoch * 30 / 100 )) 3 1"
)
for c in "${cases[@]}"; do
  read -r name samples epochs separate <<< "$c"
  ref=$($PY "$src/tests/data/fork_gpt_indices.py" "$work/corpus_text_document" "$samples" "$seq" 1234 "$work/ref_$name")
  [ "$ref" = "epochs $epochs separate $separate" ] || fail "$name: the reference says '$ref', the case expects epochs $epochs separate $separate"
  cache="$work/cache_$name"
  "$megaton" train --num-layers 1 --hidden-size 8 --num-attention-heads 1 --seq-length "$seq" --micro-batch-size 1 \
    --train-samples "$samples" --exit-interval 1 --lr 1e-3 --seed 1234 --device cpu --vocab-size 128 \
    --data-path "$work/corpus_text_document" --split 100,0,0 --data-cache-path "$cache" --log-level warning \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; fail "$name: megaton train failed"; }
  for kind in doc sample shuffle; do
    ours=$(ls "$cache"/*_train_indexmap_"${samples}"ns_"${seq}"sl_1234s_*_${kind}_idx.npy 2>/dev/null | head -n 1)
    [ -n "$ours" ] || fail "$name: megaton wrote no train ${kind}_idx in $cache: $(ls "$cache")"
    cmp -s "$ours" "$work/ref_${name}_${kind}_idx.npy" || fail "$name: ${kind}_idx differs from the fork's ($ours)"
  done
  echo "ok: $name ($samples samples of $seq tokens, $ref): doc_idx, sample_idx, shuffle_idx byte-identical"
done
