#!/usr/bin/env bash
# export-hf / import-hf round trip on a checkpoint saved by 2 ranks at TP=2: the safetensors file and config.json are
# read back by an independent parser (Python's json + struct), importing gives back every model tensor bit for bit
# (same CRC-32s), and the imported checkpoint loads into the model at TP=1 with the same architecture.
# Usage: test_checkpoint_hf.sh BUILD_DIR SOURCE_DIR   (MPIRUN may name mpirun)
set -euo pipefail
B=$1
source "$(dirname "$0")/../support/ckpt_lib.sh"
ckpt_setup hf
"$M" export-hf --load "$D/a" --out "$D/hf" || fail "export-hf"
python3 - "$D/hf" <<'PY'
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
assert cfg["model_type"] == "gpt2" and cfg["architectures"] == ["GPT2LMHeadModel"], cfg
assert (cfg["n_embd"], cfg["n_layer"], cfg["n_head"], cfg["n_inner"], cfg["vocab_size"], cfg["n_positions"]) == \
    (8, 4, 4, 16, 50, 16), cfg
raw = open(d + "/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
size = {"BF16": 2, "F16": 2, "F32": 4}
end = 0
for k, v in h.items():
    if k == "__metadata__": continue
    b, e = v["data_offsets"]
    numel = 1
    for s in v["shape"]: numel *= s
    assert e - b == numel * size[v["dtype"]], k
    end = max(end, e)
assert 8 + n + end == len(raw), "data size"
keys = set(h) - {"__metadata__"}
assert len(keys) == 2 + 4 * 12 + 2, len(keys)
assert h["transformer.h.3.attn.c_attn.weight"]["shape"] == [8, 24]
assert h["transformer.h.0.mlp.c_proj.weight"]["shape"] == [16, 8]
assert h["transformer.wte.weight"]["shape"] == [50, 8] and h["transformer.wte.weight"]["dtype"] == "BF16"
# Conv1D transpose: c_fc.weight [in=8, out=16]; its bias [16].
assert h["transformer.h.2.mlp.c_fc.weight"]["shape"] == [8, 16] and h["transformer.h.2.mlp.c_fc.bias"]["shape"] == [16]
print("safetensors OK:", len(keys), "tensors")
PY
set +e
"$M" export-hf --load "$D/a" --out "$D/bloom" --arch bloom >"$D/e.txt" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || { cat "$D/e.txt"; fail "export-hf --arch bloom of an absolute-position model exited $rc"; }
grep -q "BLOOM needs alibi" "$D/e.txt" || fail "bloom refusal message"

"$M" import-hf --hf "$D/hf" --save "$D/b" || fail "import-hf"
"$M" inspect --json "$D/a" >"$D/a.json"
"$M" inspect --json "$D/b" >"$D/b.json"
python3 - "$D/a.json" "$D/b.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["tensors"]
b = json.load(open(sys.argv[2]))
assert b["iteration"] == -1 and b["problems"] == []
bt = b["tensors"]
model_a = {k: v for k, v in a.items() if k.startswith("model/") and "role" not in v}
assert set(bt) == set(model_a), set(bt) ^ set(model_a)
for k, v in model_a.items():
    assert bt[k]["crc32"] == v["crc32"] and bt[k]["shape"] == v["shape"] and bt[k]["dtype"] == v["dtype"], k
print("import-hf gives back", len(bt), "tensors bit for bit")
PY
"$MPIRUN" --oversubscribe -np 1 "$PROBE" load "$D/b" 1 -1 | grep -q "LOADED OK iteration -1" || fail "load imported"
# A damaged safetensors file is refused with a data error (exit 3) naming it.
head -c 1000 "$D/hf/model.safetensors" >"$D/hf/cut" && mv "$D/hf/cut" "$D/hf/model.safetensors"
set +e
"$M" import-hf --hf "$D/hf" --save "$D/c" >"$D/i.txt" 2>&1
rc=$?
set -e
[ $rc -eq 3 ] || { cat "$D/i.txt"; fail "import of a truncated file exited $rc, expected 3"; }
grep -q "model.safetensors" "$D/i.txt" || fail "message names the file"
# config.json is checked before the weights are read: an unsupported model_type is reported, not the damaged file.
sed 's/"model_type": *"gpt2"/"model_type": "llama"/' "$D/hf/config.json" > "$D/hf/config2" && mv "$D/hf/config2" "$D/hf/config.json"
grep -q '"llama"' "$D/hf/config.json" || fail "the test could not edit config.json"
set +e
"$M" import-hf --hf "$D/hf" --save "$D/c" >"$D/i.txt" 2>&1
rc=$?
set -e
[ $rc -eq 3 ] && grep -q "model_type 'llama' is not supported" "$D/i.txt" ||
  { cat "$D/i.txt"; fail "a bad config.json next to damaged weights: exit $rc, expected the config error first"; }
echo "PASS"
