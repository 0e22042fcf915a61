#!/bin/bash
# The prefix-LM and packed-prompt training commands end to end, on examples/finetune_t0's synthetic prompt task
# (reverse a string of 3-6 letters: inputs "abc=", targets "cba" + EOD):
#   * finetune-t0 with --loss-on-targets-only learns the task (greedy `megaton generate` answers >= 90% of held-out
#     prompts) and without it does not (<= 30%) in the same 500 iterations (the example run twice);
#   * finetune-t0 (with --norm-target-loss), finetune-t0-non-causal and pretrain-prefix-lm give the single-rank losses
#     within 1e-5 at TP=2 x PP=2 and at DP=2 (fp32);
#   * prefix-LM's losses differ from the causal objective's on the same samples, the non-causal decoder's from the
#     causal one's;
#   * pretrain-prefix-lm's checkpoint fine-tunes with --finetune; --reset-progress restarts the iteration count on a
#     loaded state;
#   * a tokenizer without a padding token, and a prefix without PREFIX_inputs_document, are refused by name.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work 256  # $work, and the synthetic pretraining dataset (EOD 256) for the prefix-LM runs

# The example (examples/finetune_t0/run.sh: tokenizer with a pad token, prompt data, preprocess, finetune-t0, generate)
# with and without --loss-on-targets-only.
for v in targets all; do
  loss=""
  [ $v = targets ] && loss=--loss-on-targets-only
  out=$(MEGATON="$MEGATON" LOSS_FLAGS="$loss" bash "$SRC/examples/finetune_t0/run.sh" "$work/ex_$v") ||
    { echo "$out"; exit 1; }
  acc=$(echo "$out" | sed -n 's/^accuracy: \([0-9.]*\) .*/\1/p')
  echo "finetune-t0, loss on $v: $out"
  if [ $v = targets ]; then
    python3 -c "import sys; sys.exit(0 if $acc >= 0.9 else 1)" || { echo "FAIL: below 0.9"; exit 1; }
  else
    python3 -c "import sys; sys.exit(0 if $acc <= 0.3 else 1)" || { echo "FAIL: learned without targets-only"; exit 1; }
  fi
done
ex=$work/ex_targets
tok=(--tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$ex/tok")
model=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 "${tok[@]}")
base=("${model[@]}" --data-path "$ex/rev" --split 95,5,0 --global-batch-size 16 --hidden-dropout 0
      --attention-dropout 0 --init-method-std 0.02 --seed 1234 --weight-decay 0.01 --clip-grad 1.0 --adam-beta2 0.95
      --log-interval 1 --eval-interval 1000 --eval-iters 2 --device cpu --distributed-backend mpi)

# Parity: the same losses at TP=2 x PP=2 and DP=2 as on one rank, for each objective.
parity() {  # parity COMMAND NAME FLAGS...
  local cmd=$1 name=$2
  shift 2
  TRAIN_COMMAND=$cmd run_train 1 "$@" --metrics-file "$work/$name.1.jsonl" > "$work/$name.1.log" 2>&1 ||
    { tail -30 "$work/$name.1.log"; exit 1; }
  loss_decreases "$work/$name.1.jsonl"
  for layout in "4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" "2"; do
    local np=${layout%% *} extra=""
    [ "$np" != "$layout" ] && extra=${layout#* }
    # shellcheck disable=SC2086
    TRAIN_COMMAND=$cmd run_train "$np" "$@" $extra --metrics-file "$work/$name.$np.jsonl" > "$work/$name.$np.log" 2>&1 ||
      { tail -30 "$work/$name.$np.log"; exit 1; }
    echo -n "$cmd, $np ranks ($extra): "
    compare_losses "$work/$name.1.jsonl" "$work/$name.$np.jsonl" 1e-5
  done
}
short=("${base[@]}" --micro-batch-size 2 --train-iters 12 $(tiny_lr_args))
parity finetune-t0 mtf "${short[@]}" --loss-on-targets-only --norm-target-loss
parity finetune-t0-non-causal mtfnc "${short[@]}" --position-embedding-type alibi
plm=("${model[@]}" --data-path "$work/synth_text_document" --split 95,5,0 --micro-batch-size 2 --global-batch-size 8
     --train-iters 12 $(tiny_lr_args) --hidden-dropout 0 --attention-dropout 0 --seed 1234 --log-interval 1
     --eval-interval 1000 --eval-iters 1 --device cpu --distributed-backend mpi)
parity pretrain-prefix-lm plm "${plm[@]}" --reset-attention-mask --reset-position-ids --loss-on-targets-only \
  --eod-mask-loss --save "$work/ck_plm" --save-interval 12

# The objectives change what trains: prefix-LM is not the causal objective on the same samples, the non-causal
# decoder not the causal one.
differs() {  # differs A.jsonl B.jsonl WHAT
  if compare_losses "$1" "$2" 1e-4 > /dev/null; then echo "FAIL: $3 gave the same losses"; exit 1; fi
}
run_train 1 "${plm[@]}" --reset-attention-mask --reset-position-ids --loss-on-targets-only --eod-mask-loss \
  --metrics-file "$work/causal.jsonl" > "$work/causal.log" 2>&1 || { tail -30 "$work/causal.log"; exit 1; }
differs "$work/plm.1.jsonl" "$work/causal.jsonl" "pretrain-prefix-lm and train"
TRAIN_COMMAND=finetune-t0 run_train 1 "${short[@]}" --loss-on-targets-only --position-embedding-type alibi \
  --metrics-file "$work/mtfc.jsonl" > "$work/mtfc.log" 2>&1 || { tail -30 "$work/mtfc.log"; exit 1; }
differs "$work/mtfnc.1.jsonl" "$work/mtfc.jsonl" "finetune-t0-non-causal and finetune-t0"

# The prefix-LM checkpoint fine-tunes (--finetune: weights only, iteration 0); --reset-progress restarts the count.
TRAIN_COMMAND=finetune-t0 run_train 1 "${short[@]}" --load "$work/ck_plm" --finetune --train-iters 5 \
  > "$work/from_plm.log" 2>&1 || { tail -30 "$work/from_plm.log"; exit 1; }
grep -q "iteration        5/       5" "$work/from_plm.log" || { tail "$work/from_plm.log"; exit 1; }
TRAIN_COMMAND=finetune-t0 run_train 1 "${short[@]}" --load "$ex/checkpoints" --reset-progress --train-iters 5 \
  > "$work/reset.log" 2>&1 || { tail -30 "$work/reset.log"; exit 1; }
grep -q -- "--reset-progress: iteration and consumed samples start at 0" "$work/reset.log" &&
  grep -q "iteration        5/       5 | consumed samples:           80 " "$work/reset.log" ||
  { echo "FAIL: --reset-progress did not restart at 0"; tail "$work/reset.log"; exit 1; }

# Refusals, by name.
make_byte_tokenizer "$work/nopad"
if TRAIN_COMMAND=finetune-t0 run_train 1 "${short[@]}" --tokenizer-name-or-path "$work/nopad" > "$work/nopad.log" 2>&1; then
  echo "FAIL: a tokenizer without a padding token was accepted"; exit 1
fi
grep -q "no padding token" "$work/nopad.log" || { tail "$work/nopad.log"; exit 1; }
if TRAIN_COMMAND=finetune-t0 run_train 1 "${short[@]}" --data-path "$work/synth_text_document" > "$work/noin.log" 2>&1; then
  echo "FAIL: a prefix without _inputs_document was accepted"; exit 1
fi
grep -q "synth_text_document_inputs_document" "$work/noin.log" || { tail "$work/noin.log"; exit 1; }
echo "PASS"
