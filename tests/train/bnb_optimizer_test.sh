#!/bin/bash
# --use-bnb-optimizer (bitsandbytes' 8-bit Adam) end to end at TP=2 x DP=2 with ZeRO-1: it trains; 20 iterations
# straight give bit-identical losses to 10, save, load, 10 more (the 8-bit state is rebuilt exactly from the
# checkpoint's fp32 moments); the checkpoint loads into fp32 Adam; --dry-run counts 2-byte moments. The same runs
# write --codecarbon-dir: a CodeCarbon CSV per rank and one for the job, a row per save.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
# hidden 64: the MLP and QKV weights (>= 4096 elements per TP shard) get 8-bit moments, the rest fp32 ones.
common=($(tiny_model_args) $(tiny_lr_args) --hidden-size 64 --data-path "$work/synth_text_document"
        --micro-batch-size 2 --global-batch-size 16 --train-iters 20 --tensor-model-parallel-size 2 --zero-stage 1)
fail() { echo "FAIL: $*"; exit 1; }

run_train 4 "${common[@]}" --use-bnb-optimizer --metrics-file "$work/straight.jsonl" --save "$work/straight_ckpt" \
  --save-interval 10 --codecarbon-dir "$work/cc" > "$work/straight.log" 2>&1 || { tail -30 "$work/straight.log"; exit 1; }
loss_decreases "$work/straight.jsonl" || fail "8-bit Adam did not train"

run_train 4 "${common[@]}" --use-bnb-optimizer --save "$work/ckpt" --save-interval 100 --exit-interval 10 \
  > "$work/first.log" 2>&1 || { tail -30 "$work/first.log"; exit 1; }
run_train 4 "${common[@]}" --use-bnb-optimizer --load "$work/ckpt" --metrics-file "$work/second.jsonl" \
  > "$work/second.log" 2>&1 || { tail -30 "$work/second.log"; exit 1; }
echo -n "8-bit Adam resume (bit-identical): "
compare_losses "$work/straight.jsonl" "$work/second.jsonl" 0 11

# fp32 Adam continues from the 8-bit checkpoint (the model keeps the embedding LayerNorm the flag added).
run_train 4 "${common[@]}" --embed-layernorm --load "$work/ckpt" --metrics-file "$work/fp32.jsonl" \
  > "$work/fp32.log" 2>&1 || { tail -30 "$work/fp32.log"; exit 1; }
echo -n "fp32 Adam from the 8-bit checkpoint: "
compare_losses "$work/straight.jsonl" "$work/fp32.jsonl" 1e-3 11

# --dry-run: the optimizer state of a 1.3B model shrinks from 12 to 6 bytes per parameter (bf16 masters stay fp32).
dry=(--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048
     --micro-batch-size 1 --global-batch-size 8 --train-iters 10 --vocab-size 50257 --bf16 --dry-run --world-size 8)
"$MEGATON" train "${dry[@]}" > "$work/dry32.out" 2>&1 || { cat "$work/dry32.out"; exit 1; }
"$MEGATON" train "${dry[@]}" --use-bnb-optimizer > "$work/dry8.out" 2>&1 || { cat "$work/dry8.out"; exit 1; }
python3 - "$work/dry32.out" "$work/dry8.out" <<'PY'
import re, sys
def optimizer_gib(path):
    m = re.search(r"optimizer ([0-9.]+) GiB", open(path).read())
    assert m, open(path).read()
    return float(m.group(1))
a, b = optimizer_gib(sys.argv[1]), optimizer_gib(sys.argv[2])
print(f"dry run optimizer state: fp32 moments {a} GiB, 8-bit moments {b} GiB")
assert 0.45 < b / a < 0.6, (a, b)
PY

# CodeCarbon: a file per rank and the job's, each with the header and a row per save (iterations 10 and 20).
python3 - "$work/cc" <<'PY'
import csv, sys, os
d = sys.argv[1]
files = sorted(os.listdir(d))
assert files == ["emissions-000.csv", "emissions-001.csv", "emissions-002.csv", "emissions-003.csv", "emissions.csv"], files
for f in files:
    rows = list(csv.DictReader(open(os.path.join(d, f))))
    assert len(rows) >= 2, (f, rows)
    last = rows[-1]
    assert float(last["duration"]) > 0 and float(last["ram_energy"]) > 0, last
    assert abs(float(last["energy_consumed"]) - sum(float(last[k]) for k in ("cpu_energy", "gpu_energy", "ram_energy"))) < 1e-12
    assert last["country_iso_code"] == "FRA" and last["tracking_mode"] == "machine", last
    assert float(rows[-1]["duration"]) >= float(rows[0]["duration"]), rows
rank = list(csv.DictReader(open(os.path.join(d, "emissions-000.csv"))))[-1]
job = list(csv.DictReader(open(os.path.join(d, "emissions.csv"))))[-1]
# Four ranks on one host: the job counts the host's memory once, not four times.
assert abs(float(job["ram_total_size"]) - float(rank["ram_total_size"])) < 1e-9, (job, rank)
print("codecarbon: 5 files,", len(rows), "rows in the job's")
PY
echo "PASS"
