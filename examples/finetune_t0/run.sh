#!/bin/bash
# Multitask prompt fine-tuning end to end, the way BigScience fine-tuned BLOOM into BLOOMZ, on a toy task that a CPU
# learns in a minute: reverse a string of 3-6 letters (inputs "abc=", targets "cba").
#   1. a byte-level tokenizer with end-of-text and padding tokens (tokenizer.json + tokenizer_config.json);
#   2. prompt pairs as JSONL {"inputs": ..., "targets": ...}: 3000 to train on, 100 held out;
#   3. `megaton preprocess` into WORK/rev_inputs_document and WORK/rev_targets_document (the targets end with EOD);
#   4. `megaton finetune-t0` (the fork's finetune_t0.py) on rows of 32 tokens packed with prompt pairs;
#   5. `megaton generate --greedy` answers the held-out prompts; the share answered right is printed.
#
# usage: examples/finetune_t0/run.sh WORK_DIR [more finetune-t0 flags]
#   MEGATON=path/to/megaton (default: megaton on PATH); LOSS_FLAGS (default --loss-on-targets-only) are the loss flags;
#   DEVICE=cuda trains and generates on the GPU (default cpu).
set -euo pipefail
work=${1:?usage: run.sh WORK_DIR [finetune-t0 flags]}
shift
MEGATON=${MEGATON:-megaton}
LOSS_FLAGS=${LOSS_FLAGS---loss-on-targets-only}
DEVICE=${DEVICE:-cpu}
mkdir -p "$work/tok"

python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
# GPT-2's byte-to-symbol table: every byte is one token, no merges; 256 = <|endoftext|>, 257 = <pad>.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
vocab.update({"<|endoftext|>": 256, "<pad>": 257})
json.dump({"added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": True},
                            {"id": 257, "content": "<pad>", "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(f"{work}/tok/tokenizer.json", "w"))
json.dump({"eos_token": "<|endoftext|>", "pad_token": "<pad>"}, open(f"{work}/tok/tokenizer_config.json", "w"))
for name, seed, count in (("train", 1, 3000), ("test", 2, 100)):
    rng = random.Random(seed)
    with open(f"{work}/{name}.jsonl", "w") as f:
        for _ in range(count):
            w = "".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 6)))
            f.write(json.dumps({"inputs": w + "=", "targets": w[::-1]}) + "\n")
with open(f"{work}/prompts.txt", "w") as f:
    f.writelines(json.loads(line)["inputs"] + "\n" for line in open(f"{work}/test.jsonl"))
PY

tok=(--tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok")
# Inputs as they are; targets end with the end-of-document token, which stops generation.
"$MEGATON" preprocess --input "$work/train.jsonl" --output-prefix "$work/rev" --json-keys inputs "${tok[@]}" \
  > "$work/preprocess.log" 2>&1
"$MEGATON" preprocess --input "$work/train.jsonl" --output-prefix "$work/rev" --json-keys targets --append-eod \
  "${tok[@]}" >> "$work/preprocess.log" 2>&1

model=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 "${tok[@]}")
# shellcheck disable=SC2086
"$MEGATON" finetune-t0 "${model[@]}" $LOSS_FLAGS --data-path "$work/rev" --split 95,5,0 \
  --micro-batch-size 16 --global-batch-size 16 --train-iters 500 \
  --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine --lr-warmup-iters 20 --weight-decay 0.01 --clip-grad 1.0 \
  --adam-beta2 0.95 --hidden-dropout 0 --attention-dropout 0 --init-method-std 0.02 --seed 1234 \
  --log-interval 100 --eval-interval 250 --eval-iters 2 --device "$DEVICE" \
  --save "$work/checkpoints" --save-interval 500 "$@" > "$work/finetune.log" 2>&1 ||
  { tail -20 "$work/finetune.log"; exit 1; }

"$MEGATON" generate "${model[@]}" --load "$work/checkpoints" --device "$DEVICE" --greedy --out-seq-length 8 \
  --micro-batch-size 16 --sample-input-file "$work/prompts.txt" --sample-output-file "$work/answers.txt" \
  > "$work/generate.log" 2>&1 || { tail -20 "$work/generate.log"; exit 1; }

python3 - "$work/test.jsonl" "$work/answers.txt" <<'PY'
import json, sys
want = [json.loads(l)["targets"] for l in open(sys.argv[1])]
got = [l[len("Megatron-LM:"):].rstrip("\n") for l in open(sys.argv[2]) if l.startswith("Megatron-LM:")]
assert len(got) == len(want), f"{len(got)} answers for {len(want)} prompts"
right = sum(g == w for g, w in zip(got, want))
print(f"accuracy: {right / len(want):.2f} ({right} of {len(want)} held-out prompts reversed exactly)")
PY
