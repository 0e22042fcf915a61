#!/bin/bash
# Training with and without each fusion whose numbers must not change, on 4 ranks: TP=2 x DP=2 with 2 micro-batches per
# step (accumulation across micro-batches, DP bucket readiness with overlap) and TP=2 x PP=2 (the 1F1B schedule, the
# loss on the last stage). fp32: the losses must agree to 1e-5 over every iteration.
#   --no-gradient-accumulation-fusion  autograd's weight gradients, added by DataParallel's hooks, against the default
#                                      (linear layers write or add weight gradients straight into the fp32 main grads)
#   --no-fused-lm-head-loss            logits, then the vocabulary-parallel cross-entropy, against the default (the LM
#                                      head and its loss as one op: the logits' gradient written over the logits in the
#                                      forward, the per-token loss gradient applied in the head's backward GEMMs)
#   --no-qkv-grad-fusion               unbind's stack and the QKV linear's own bias gradient against the default
#                                      (ops::split_qkv: the bias added without autograd, its gradient from the split)
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --train-iters 6 --tensor-model-parallel-size 2)
for flag in --no-gradient-accumulation-fusion --no-fused-lm-head-loss --no-qkv-grad-fusion; do
  same_losses_per_layout "" "$flag" "--global-batch-size 8" "--global-batch-size 4 --pipeline-model-parallel-size 2"
done
# --fused-lm-head-loss (the default, asked for) with --no-fused-lm-head-loss is a usage error.
if run_train 1 $(tiny_model_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 2 \
  --train-iters 1 --fused-lm-head-loss --no-fused-lm-head-loss > "$work/both.log" 2>&1; then
  echo "FAIL: --fused-lm-head-loss and --no-fused-lm-head-loss both accepted"; exit 1
fi
grep -q -- "--fused-lm-head-loss and --no-fused-lm-head-loss contradict each other" "$work/both.log" ||
  { echo "FAIL: no usage error for both flags"; tail -5 "$work/both.log"; exit 1; }
# --dropout-layernorm-fusion (the default, asked for) with --no-dropout-layernorm-fusion is a usage error too.
if run_train 1 $(tiny_model_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --global-batch-size 2 \
  --train-iters 1 --dropout-layernorm-fusion --no-dropout-layernorm-fusion > "$work/both_dropout.log" 2>&1; then
  echo "FAIL: --dropout-layernorm-fusion and --no-dropout-layernorm-fusion both accepted"; exit 1
fi
grep -q -- "--dropout-layernorm-fusion and --no-dropout-layernorm-fusion contradict each other" "$work/both_dropout.log" ||
  { echo "FAIL: no usage error for both dropout flags"; tail -5 "$work/both_dropout.log"; exit 1; }
echo PASS
