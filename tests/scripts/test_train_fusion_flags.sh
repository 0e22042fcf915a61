#!/bin/bash
# Training with and without each fusion whose numbers must not change, on 4 ranks: TP=2 x DP=2 with 2 micro-batches per
# step (accumulation across micro-batches, DP bucket readiness with overlap) and TP=2 x PP=2 (the 1F1B schedule, the
# loss on the last stage). fp32: the losses must agree to 1e-5 over every iteration.
#   --no-gradient-accumulation-fusion  autograd's weight gradients, added by DataParallel's hooks, against the default
#                                      (linear layers write or add weight gradients straight into the fp32 main grads)
#   --fused-lm-head-loss               the LM head and its loss as one op (the logits' gradient written over the logits
#                                      in the forward, the per-token loss gradient applied in the head's backward GEMMs)
#                                      against the default (logits, then the vocabulary-parallel cross-entropy)
#   --no-qkv-grad-fusion               unbind's stack and the QKV linear's own bias gradient against the default
#                                      (ops::split_qkv: the bias added without autograd, its gradient from the split)
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/scripts/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --train-iters 6 --tensor-model-parallel-size 2)
for flag in --no-gradient-accumulation-fusion --fused-lm-head-loss --no-qkv-grad-fusion; do
  same_losses_per_layout "" "$flag" "--global-batch-size 8" "--global-batch-size 4 --pipeline-model-parallel-size 2"
done
echo PASS
