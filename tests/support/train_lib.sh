#!/bin/bash
# Helpers shared by the training scripts (tests/train/*_test.sh and others) (sourced; not a test itself).
#   BUILD=$1 SRC=$2; source "$SRC/tests/support/train_lib.sh"
#   make_synthetic_data DIR [EOD]    -> DIR/synth_text_document.{bin,idx}: 400 documents of learnable token patterns
#                                       (tokens < 120), each ended by EOD (default 127)
#   make_byte_tokenizer DIR          -> DIR/tokenizer.json: byte-level BPE, no merges, <|endoftext|> = 256 (vocab 257)
#   run_train NP ARGS...             -> megaton train on NP ranks (mpirun --oversubscribe; NP=1 runs it directly);
#                                       TRAIN_COMMAND=finetune-t0 (etc.) runs another training command
#   compare_losses A.jsonl B.jsonl TOL [FIRST_ITER]   -> fails unless lm_loss agrees within TOL at every iteration
#   setup_work [EOD]                 -> $work: a scratch directory removed at exit, holding the synthetic dataset
MEGATON="$BUILD/megaton"
MPIRUN="${MPIRUN:-mpirun}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # ranks oversubscribe the cores
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

make_synthetic_data() {
  python3 - "$1/synth_text_document" "${2:-127}" <<'PY'
import struct, sys, random
prefix, eod = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
docs = []
for d in range(400):
    start, step, n = rng.randrange(120), rng.choice([1, 2, 3, 5]), rng.randrange(20, 60)
    docs.append([(start + i * step) % 120 for i in range(n)] + [eod])  # end of document
with open(prefix + ".bin", "wb") as f:
    for d in docs:
        f.write(struct.pack("<%dH" % len(d), *d))
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
    f.write(struct.pack("<%di" % len(docs), *[len(d) for d in docs]))
    off, ptrs = 0, []
    for d in docs:
        ptrs.append(off); off += 2 * len(d)
    f.write(struct.pack("<%dq" % len(docs), *ptrs))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
PY
}

make_byte_tokenizer() {
  mkdir -p "$1"
  python3 - "$1/tokenizer.json" <<'PY'
import json, sys
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
sym = dict(zip(bs, (chr(c) for c in cs)))
vocab = {sym[b]: b for b in range(256)}
vocab["<|endoftext|>"] = 256
json.dump({"added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": True}],
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(sys.argv[1], "w"))
PY
}

setup_work() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  make_synthetic_data "$work" "$@"
}

# A tiny GPT on the synthetic data: 4 layers, hidden 32, seq 16, vocab 128; dropout off so layouts are comparable.
tiny_model_args() {
  echo --num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 \
    --vocab-size 128 --make-vocab-size-divisible-by 8 --hidden-dropout 0 --attention-dropout 0 \
    --init-method-std 0.02 --seed 1234 --weight-decay 0.01 --clip-grad 1.0 --adam-beta2 0.95 --log-interval 1 \
    --eval-interval 1000 --eval-iters 1 --split 95,5,0 --distributed-backend mpi --device cpu --data-impl mmap
}
# The learning-rate flags of the iteration-based tests.
tiny_lr_args() {
  echo --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 2
}

run_train() {
  local np=$1
  shift
  if [ "$np" = 1 ]; then
    "$MEGATON" "${TRAIN_COMMAND:-train}" "$@"
  else
    "$MPIRUN" --oversubscribe --bind-to none -np "$np" "$MEGATON" "${TRAIN_COMMAND:-train}" "$@"
  fi
}

# compare_losses A B TOL [FIRST]: lm_loss of every iteration >= FIRST present in both files must agree within TOL
# (absolute); TOL=0 demands bit-identical values. Also fails when fewer than 5 common iterations exist.
compare_losses() {
  python3 - "$@" <<'PY'
import json, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
first = int(sys.argv[4]) if len(sys.argv) > 4 else 1
def load(p):
    out = {}
    for line in open(p):
        o = json.loads(line)
        if "lm_loss" in o and "valid_lm_loss" not in o:
            out[o["iteration"]] = o["lm_loss"]
    return out
la, lb = load(a), load(b)
common = sorted(i for i in la if i in lb and i >= first)
if len(common) < 5:
    sys.exit(f"only {len(common)} common iterations between {a} and {b}")
worst = max(abs(la[i] - lb[i]) for i in common)
bad = [(i, la[i], lb[i]) for i in common if abs(la[i] - lb[i]) > tol or (tol == 0 and la[i] != lb[i])]
print(f"compared {len(common)} iterations ({common[0]}..{common[-1]}): worst |diff| {worst:.3g} (tol {tol})")
if bad:
    for i, x, y in bad[:5]:
        print(f"  iteration {i}: {x!r} vs {y!r}")
    sys.exit(1)
PY
}

# same_losses_per_layout "FLAGS_A" "FLAGS_B" LAYOUT...: for each LAYOUT (a string of flags), two 4-rank runs with the
# caller's "${common[@]}", the layout and FLAGS_A / FLAGS_B; their losses must agree to 1e-5 at every iteration.
same_losses_per_layout() {
  local a=$1 b=$2 layout
  shift 2
  for layout in "$@"; do
    # shellcheck disable=SC2086
    run_train 4 "${common[@]}" $layout $a --metrics-file "$work/a.jsonl" > "$work/a.log" 2>&1 || { tail "$work/a.log"; exit 1; }
    # shellcheck disable=SC2086
    run_train 4 "${common[@]}" $layout $b --metrics-file "$work/b.jsonl" > "$work/b.log" 2>&1 || { tail "$work/b.log"; exit 1; }
    compare_losses "$work/a.jsonl" "$work/b.jsonl" 1e-5
    rm -f "$work/a.jsonl" "$work/b.jsonl"
  done
}

# loss_decreases FILE: the mean lm_loss of the last 5 logged iterations is below that of the first 5.
loss_decreases() {
  python3 - "$1" <<'PY'
import json, sys
l = [json.loads(x)["lm_loss"] for x in open(sys.argv[1]) if "lm_loss" in json.loads(x)]
first, last = sum(l[:5]) / 5, sum(l[-5:]) / 5
print(f"loss {first:.4f} -> {last:.4f}")
sys.exit(0 if last < first - 0.05 else 1)
PY
}
