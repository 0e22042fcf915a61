#!/bin/bash
# --reset-position-ids and --reset-attention-mask (Megatron's document-wise positions and attention masks) in
# megaton train, end to end on data whose 16-token samples span document boundaries (EOD = the tokenizer's 256):
#   * the single-rank run's loss falls, and the flags change it (the mask and the positions are applied);
#   * TP=2 x PP=2, PP=4 (middle stages, which read the samples for the mask only), the interleaved schedule and
#     --checkpoint-activations give the single-rank losses within 1e-5 (fp32); so does TP=2 with ALiBi;
#   * without a tokenizer (no EOD id) the flags are refused, naming them.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work 256  # $work: a scratch directory (removed at exit), the synthetic dataset with EOD 256
make_byte_tokenizer "$work/tok"
common=($(tiny_model_args) $(tiny_lr_args) --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok"
        --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 8 --train-iters 12
        --eod-mask-loss)
flags=(--reset-position-ids --reset-attention-mask)

train() {  # train NAME NP ARGS...
  local name=$1 np=$2
  shift 2
  run_train "$np" "${common[@]}" "$@" --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { tail -30 "$work/$name.log"; exit 1; }
}
train ref 1 "${flags[@]}"
grep -q "iteration       12/      12" "$work/ref.log" || { cat "$work/ref.log"; exit 1; }
loss_decreases "$work/ref.jsonl"
for v in plain positions mask; do
  case $v in
    plain) train plain 1 ;;
    positions) train positions 1 --reset-position-ids ;;
    mask) train mask 1 --reset-attention-mask ;;
  esac
  if compare_losses "$work/ref.jsonl" "$work/$v.jsonl" 1e-4 > /dev/null; then
    echo "the losses with only '$v' equal those with both flags: a flag had no effect"
    exit 1
  fi
done

check() {  # check REF NAME NP FLAGS...: the same losses as the single-rank run REF
  local ref=$1 name=$2
  shift
  train "$@" "${flags[@]}"
  echo -n "$name: "
  compare_losses "$work/$ref.jsonl" "$work/$name.jsonl" 1e-5
}
check ref tp2pp2 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
check ref pp4 4 --pipeline-model-parallel-size 4
check ref interleaved 2 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
check ref recompute 1 --checkpoint-activations
train alibi 1 "${flags[@]}" --position-embedding-type alibi
check alibi alibi-tp2 2 --position-embedding-type alibi --tensor-model-parallel-size 2

# No tokenizer, no EOD id: a usage error naming the flags.
no_tok=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 8 --train-iters 2)
if run_train 1 "${no_tok[@]}" --reset-attention-mask > "$work/notok.log" 2>&1; then
  echo "--reset-attention-mask without a tokenizer was accepted"
  exit 1
fi
grep -q -- "--reset-position-ids / --reset-attention-mask need a tokenizer" "$work/notok.log" ||
  { cat "$work/notok.log"; exit 1; }
echo "PASS"
