#!/bin/bash
# import-hf of a BLOOM-shaped model whose embedding has more rows than its tokenizer has tokens (the hub's BLOOMs:
# 250880 rows, 250680 tokens; here 264 rows, 257 tokens): the checkpoint records the tokenizer's vocabulary and keeps
# the extra rows as vocabulary padding, and `megaton generate` runs from it with no model flags (the architecture,
# tokenizer and padding from the checkpoint), sampling what the same weights without the extra rows sample.
#   $1 = build dir, $2 = source dir
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work 256  # the synthetic dataset, EOD = 256 (the byte tokenizer's <|endoftext|>)
make_byte_tokenizer "$work/tok"  # 257 tokens
fail() { echo "FAIL: $*" >&2; exit 1; }

bloom=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16
       --position-embedding-type alibi --embed-layernorm --openai-gelu --make-vocab-size-divisible-by 8
       --hidden-dropout 0 --attention-dropout 0 --seed 1234 --tokenizer-type PretrainedFromHF
       --tokenizer-name-or-path "$work/tok" --distributed-backend mpi --device cpu)
run_train 1 "${bloom[@]}" $(tiny_lr_args) --train-iters 4 --micro-batch-size 2 --global-batch-size 4 \
  --data-path "$work/synth_text_document" --split 95,5,0 --eval-iters 1 --eval-interval 1000 \
  --save "$work/ckpt" --save-interval 4 > "$work/train.log" 2>&1 || { tail -20 "$work/train.log"; fail "train"; }
"$BUILD/megaton" export-hf --load "$work/ckpt" --out "$work/hf257" --arch bloom > "$work/export.log" 2>&1 ||
  { cat "$work/export.log"; fail "export-hf"; }

# The same model with 7 zero rows appended to its embedding and config.json's vocab_size 264, as the hub's BLOOMs
# are shaped, with the tokenizer beside it.
python3 - "$work/hf257" "$work/hf264" "$work/tok/tokenizer.json" <<'PY'
import json, os, shutil, struct, sys
src, dst, tok = sys.argv[1:]
os.makedirs(dst)
cfg = json.load(open(src + "/config.json"))
assert cfg["model_type"] == "bloom" and cfg["vocab_size"] == 257, cfg
raw = open(src + "/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
key = next(k for k in header if k.endswith("word_embeddings.weight"))
size = {"BF16": 2, "F16": 2, "F32": 4}
out, blobs, offset = {}, [], 0
for k, v in sorted(((k, v) for k, v in header.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
    b, e = v["data_offsets"]
    blob = data[b:e]
    shape = list(v["shape"])
    if k == key:
        row = shape[1] * size[v["dtype"]]
        blob += bytes(7 * row)
        shape[0] += 7
    out[k] = {"dtype": v["dtype"], "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
cfg["vocab_size"] = 264
json.dump(cfg, open(dst + "/config.json", "w"))
shutil.copy(tok, dst + "/tokenizer.json")
PY

"$BUILD/megaton" import-hf --hf "$work/hf264" --save "$work/imp264" > "$work/imp264.log" 2>&1 ||
  { cat "$work/imp264.log"; fail "import-hf of the 264-row model"; }
grep -q "vocabulary 257 of the embedding's 264 rows" "$work/imp264.log" || { cat "$work/imp264.log"; fail "no note"; }
"$BUILD/megaton" inspect --json "$work/imp264" > "$work/imp264.json"
python3 - "$work/imp264.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["problems"] == [], j["problems"]
t = j["tensors"]
emb = "model/embedding.word_embeddings.weight"
assert t[emb]["shape"] == [257, 32] and t[emb]["padded_rows"] == 264, t[emb]
assert t[emb + ".vocab_padding"]["shape"] == [7, 32] and t[emb + ".vocab_padding"]["role"] == "vocab_padding"
print("imported: 257 vocabulary rows + 7 padding rows")
PY

# Generate from the import with no model or tokenizer flags, and from the 257-row import with the model flags and
# --pad-vocab-size-to 264 (its padding rows load as zeros, as the appended rows are): the same greedy samples.
"$BUILD/megaton" import-hf --hf "$work/hf257" --save "$work/imp257" > "$work/imp257.log" 2>&1 ||
  { cat "$work/imp257.log"; fail "import-hf of the 257-row model"; }
greedy=(--greedy --num-samples 2 --micro-batch-size 2 --out-seq-length 12 --device cpu)
"$BUILD/megaton" generate --load "$work/imp264" "${greedy[@]}" --genfile "$work/g264.jsonl" > "$work/g264.log" 2>&1 ||
  { cat "$work/g264.log"; fail "generate from the 264-row import without model flags"; }
"$BUILD/megaton" generate "${bloom[@]}" --pad-vocab-size-to 264 --load "$work/imp257" "${greedy[@]}" \
  --genfile "$work/g257.jsonl" > "$work/g257.log" 2>&1 || { cat "$work/g257.log"; fail "generate from the 257-row import"; }
cmp "$work/g264.jsonl" "$work/g257.jsonl" || { head "$work/g264.jsonl" "$work/g257.jsonl"; fail "samples differ"; }
echo "PASS: generate from the padded import equals the unpadded one"
