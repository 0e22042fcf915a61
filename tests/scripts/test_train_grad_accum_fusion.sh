#!/bin/bash
# Gradient accumulation fusion (the default: linear layers add weight gradients straight into the fp32 main grads)
# against --no-gradient-accumulation-fusion (autograd's weight gradients, added by DataParallel's hooks), on 4 ranks:
# TP=2 x DP=2 with 2 micro-batches per step (accumulation across micro-batches, DP bucket readiness with overlap) and
# TP=2 x PP=2 (the 1F1B schedule). fp32: the losses must agree to 1e-5 over every iteration.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/scripts/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --train-iters 6 --tensor-model-parallel-size 2)
same_losses_per_layout "" "--no-gradient-accumulation-fusion" "--global-batch-size 8" "--global-batch-size 4 --pipeline-model-parallel-size 2"
echo PASS
