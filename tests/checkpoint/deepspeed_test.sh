#!/bin/bash
# Continuing a Megatron-DeepSpeed run. megaton trains 6 iterations (bf16, TP=1) and saves; `megaton convert --to
# ds-universal` writes that state as a DeepSpeed universal checkpoint; make_deepspeed_fixture.py (torch, following
# DeepSpeed's save code) reads it with torch.load and writes the checkpoint the fork's --deepspeed runs write, at
# TP=2 x PP=2 x DP=2 with the BF16 optimizer's ZeRO-1 partitions. megaton then continues from that checkpoint at
# TP=1 and at TP=2 x DP=2: the next 10 losses equal, bit for bit, those of megaton continuing from its own checkpoint
# at the same layout; so does the fork's Megatron format (no --deepspeed) at TP=2 x PP=2. The fp16 ZeRO optimizer's
# layout and a checkpoint_version 0 Megatron checkpoint convert to the same tensors; damaged and foreign .pt files are
# refused with errors naming them.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
fail() { echo "FAIL: $*"; exit 1; }
# The fixture needs Debian's python3-torch: a python3 earlier on PATH (pyenv, a venv) may lack it.
PY=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import torch, numpy" 2>/dev/null; then PY=$candidate; break; fi
done
[ -n "$PY" ] || fail "no python3 on PATH nor /usr/bin/python3 imports torch and numpy (make deps installs python3-torch)"
make_byte_tokenizer "$work/tok"  # 257 tokens, padded to 264 rows
common=(--num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16
        --hidden-dropout 0 --attention-dropout 0 --init-method-std 0.02 --seed 1234 --weight-decay 0.01 --clip-grad 1.0
        --adam-beta2 0.95 --log-interval 1 --eval-interval 1000 --eval-iters 1 --split 95,5,0 --distributed-backend mpi
        --device cpu --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok" --pad-vocab-size-to 264
        $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 16
        --train-iters 16 --bf16)

run_train 1 "${common[@]}" --save "$work/own" --save-interval 6 --exit-interval 6 > "$work/first.log" 2>&1 ||
  { tail -30 "$work/first.log"; exit 1; }
"$MEGATON" convert --load "$work/own" --save "$work/univ" --to ds-universal --target-tp 2 --target-pp 2 \
  > "$work/to_univ.log" 2>&1 || { cat "$work/to_univ.log"; exit 1; }
[ "$(cat "$work/univ/latest_universal")" = global_step6_universal ] || fail "latest_universal"
"$PY" "$SRC/tests/checkpoint/make_deepspeed_fixture.py" "$work/univ/global_step6_universal" "$work/fork" \
  --tp 2 --pp 2 --dp 2 || fail "fixture"
cp -r "$work/fork" "$work/fork_tp2"

# The fork's checkpoint as --load, directly: converted once into DIR/megaton_import.
run_train 1 "${common[@]}" --load "$work/own" --metrics-file "$work/own_tp1.jsonl" > "$work/own_tp1.log" 2>&1 ||
  { tail -30 "$work/own_tp1.log"; exit 1; }
run_train 1 "${common[@]}" --load "$work/fork" --metrics-file "$work/fork_tp1.jsonl" > "$work/fork_tp1.log" 2>&1 ||
  { tail -30 "$work/fork_tp1.log"; exit 1; }
grep -q "converting it to $work/fork/megaton_import" "$work/fork_tp1.log" || fail "no conversion logged"
echo -n "TP=1 from the fork's TP2 x PP2 x DP2 checkpoint vs from megaton's own: "
compare_losses "$work/own_tp1.jsonl" "$work/fork_tp1.jsonl" 0 7
tp2=(--tensor-model-parallel-size 2)
run_train 4 "${common[@]}" "${tp2[@]}" --load "$work/own" --metrics-file "$work/own_tp2.jsonl" \
  > "$work/own_tp2.log" 2>&1 || { tail -30 "$work/own_tp2.log"; exit 1; }
run_train 4 "${common[@]}" "${tp2[@]}" --load "$work/fork_tp2" --metrics-file "$work/fork_tp2.jsonl" \
  > "$work/fork_tp2.log" 2>&1 || { tail -30 "$work/fork_tp2.log"; exit 1; }
echo -n "TP=2 x DP=2: "
compare_losses "$work/own_tp2.jsonl" "$work/fork_tp2.jsonl" 0 7
# Megatron's own format (the fork without --deepspeed), TP=2 x PP=2: the same continuation.
"$PY" "$SRC/tests/checkpoint/make_deepspeed_fixture.py" "$work/univ/global_step6_universal" "$work/meg" \
  --format megatron --tp 2 --pp 2 > /dev/null || fail "megatron fixture"
run_train 1 "${common[@]}" --load "$work/meg" --metrics-file "$work/meg_tp1.jsonl" > "$work/meg_tp1.log" 2>&1 ||
  { tail -30 "$work/meg_tp1.log"; exit 1; }
echo -n "TP=1 from the fork's Megatron-format TP2 x PP2 checkpoint: "
compare_losses "$work/own_tp1.jsonl" "$work/meg_tp1.jsonl" 0 7
# A second run from the same directory reuses the conversion.
run_train 1 "${common[@]}" --load "$work/fork" --exit-interval 7 > "$work/again.log" 2>&1 ||
  { tail -30 "$work/again.log"; exit 1; }
grep -q "was converted before" "$work/again.log" || fail "the conversion was not reused"

# Every tensor of the conversions equals megaton's own checkpoint (inspect lists each one's CRC-32).
crcs() {
  "$MEGATON" inspect --json "$1" | python3 -c '
import json, sys
t = json.load(sys.stdin)["tensors"]
assert len(t) > 100, len(t)
for k in sorted(t):
    if k.startswith(("model/", "optim/")):
        print(k, t[k]["dtype"], t[k]["shape"], t[k]["crc32"])'
}
"$MEGATON" convert --load "$work/univ" --save "$work/back" > "$work/back.log" 2>&1 || { cat "$work/back.log"; exit 1; }
"$PY" "$SRC/tests/checkpoint/make_deepspeed_fixture.py" "$work/univ/global_step6_universal" "$work/fork16" \
  --tp 2 --pp 1 --dp 2 --optimizer zero > /dev/null || fail "zero fixture"
"$MEGATON" convert --load "$work/fork16" --save "$work/back16" > "$work/back16.log" 2>&1 ||
  { cat "$work/back16.log"; exit 1; }
"$PY" "$SRC/tests/checkpoint/make_deepspeed_fixture.py" "$work/univ/global_step6_universal" "$work/meg0" \
  --format megatron --tp 2 --pp 1 --checkpoint-version 0 > /dev/null || fail "megatron v0 fixture"
"$MEGATON" convert --load "$work/meg0" --save "$work/back0" > "$work/back0.log" 2>&1 || { cat "$work/back0.log"; exit 1; }
for c in own back fork/megaton_import back16 back0; do crcs "$work/$c" > "$work/$(basename "$c").crc" || fail "inspect $c"; done
cmp -s "$work/own.crc" "$work/back.crc" || fail "universal -> megaton differs: $(diff "$work/own.crc" "$work/back.crc" | head -4)"
cmp -s "$work/own.crc" "$work/megaton_import.crc" || fail "fork -> megaton differs"
cmp -s "$work/own.crc" "$work/back16.crc" || fail "ZeRO fp16 layout -> megaton differs"
cmp -s "$work/own.crc" "$work/back0.crc" || fail "Megatron checkpoint_version 0 (QKV rows [3, np, hn]) -> megaton differs"
grep -q "ZeRO optimizer" "$work/back16.log" || fail "$(cat "$work/back16.log")"

# generate (the architecture and tokenizer from the fork's args) and inspect take the fork's directory as it is.
greedy=(--device cpu --greedy --num-samples 2 --micro-batch-size 2 --out-seq-length 12)
"$MEGATON" generate --load "$work/own" "${greedy[@]}" --genfile "$work/own_gen.jsonl" > "$work/gen_own.log" 2>&1 ||
  { tail -20 "$work/gen_own.log"; exit 1; }
"$MEGATON" generate --load "$work/fork" "${greedy[@]}" --genfile "$work/fork_gen.jsonl" > "$work/gen_fork.log" 2>&1 ||
  { tail -20 "$work/gen_fork.log"; exit 1; }
[ -s "$work/own_gen.jsonl" ] && cmp -s "$work/own_gen.jsonl" "$work/fork_gen.jsonl" || fail "generate differs"
"$MEGATON" inspect "$work/fork" > "$work/inspect.log" 2>&1 || { cat "$work/inspect.log"; exit 1; }

# Damaged and foreign files.
mkdir -p "$work/broken/global_step6"
cp "$work/fork/global_step6/"*.pt "$work/broken/global_step6/"
echo global_step6 > "$work/broken/latest"
cp "$work/fork/bad/truncated.pt" "$work/broken/global_step6/mp_rank_00_model_states.pt"
if "$MEGATON" convert --load "$work/broken" --save "$work/x" > "$work/trunc.log" 2>&1; then fail "truncated file read"; fi
grep -q "mp_rank_00_model_states.pt" "$work/trunc.log" || fail "$(cat "$work/trunc.log")"
cp "$work/fork/bad/foreign.pt" "$work/broken/global_step6/mp_rank_00_model_states.pt"
if "$MEGATON" convert --load "$work/broken" --save "$work/x" > "$work/foreign.log" 2>&1; then fail "foreign read"; fi
grep -q "'os_helpers.Evil'" "$work/foreign.log" || fail "$(cat "$work/foreign.log")"
cp "$work/fork/bad/legacy.pt" "$work/broken/global_step6/mp_rank_00_model_states.pt"
if "$MEGATON" convert --load "$work/broken" --save "$work/x" > "$work/legacy.log" 2>&1; then fail "legacy read"; fi
grep -q "legacy" "$work/legacy.log" || fail "$(cat "$work/legacy.log")"
echo "PASS"
