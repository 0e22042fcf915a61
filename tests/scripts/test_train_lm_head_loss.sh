#!/bin/bash
# The LM head and its loss as one autograd op (--fused-lm-head-loss: the logits' gradient written over the logits in
# the forward, the per-token loss gradient applied in the head's backward GEMMs) against the default (logits, then the
# vocabulary-parallel cross-entropy), on 4 ranks: TP=2 x DP=2 with 2 micro-batches per step and TP=2 x PP=2 (the loss
# on the last stage of the 1F1B schedule). fp32: the losses must agree to 1e-5 over every iteration.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/scripts/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --train-iters 6 --tensor-model-parallel-size 2)
same_losses_per_layout "" "--fused-lm-head-loss" "--global-batch-size 8" "--global-batch-size 4 --pipeline-model-parallel-size 2"
echo PASS
