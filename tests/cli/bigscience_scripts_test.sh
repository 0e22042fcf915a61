#!/bin/bash
# End-to-end: BigScience's pretrain_gpt.py command lines (the train/ scripts of bigscience-workshop/bigscience, their
# variables filled in) run unchanged through `megaton train --dry-run` (tr13's finetune_t0.py line through
# `megaton finetune-t0 --dry-run`), and every flag of Megatron-DeepSpeed's
# megatron/arguments.py is recognised: accepted, or refused by name with the reason where megaton would run differently.
#   $1 = build dir, $2 = source dir
set -euo pipefail
build="$1"
megaton="$build/megaton"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The DeepSpeed JSONs the scripts write (tr11: bf16, ZeRO stage 0; tr1/tr8/tr3m: fp16, ZeRO stage 1).
ds_json() {  # MICRO GLOBAL STAGE PRECISION_BLOCK
  printf '{\n  "train_micro_batch_size_per_gpu": %s,\n  "train_batch_size": %s,\n  "gradient_clipping": 1.0,\n  "zero_optimization": {\n    "stage": %s\n  },\n  %s,\n  "steps_per_print": 2000,\n  "wall_clock_breakdown": false\n}\n' "$1" "$2" "$3" "$4"
}
fp16='"fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1, "initial_scale_power": 12}'
ds_json 2 2048 0 '"bf16": {"enabled": true}' > "$work/ds_tr11.json"
ds_json 1 2048 0 '"bf16": {"enabled": true}' > "$work/ds_tr13.json"
ds_json 1 1024 1 "$fp16" > "$work/ds_tr1.json"
ds_json 1 2048 1 "$fp16" > "$work/ds_tr8.json"
ds_json 1 512 1 "$fp16" > "$work/ds_tr3m.json"
ds_json 32 512 1 "$fp16" > "$work/ds_tr14.json"
ck="$work/checkpoints" tb="$work/tensorboard"

# World sizes are chosen so that each ramp-up's batch sizes divide by micro-batch x DP (the fork asserts that at the
# first iteration; megaton refuses it up front).
dry_run() {  # NAME WORLD EXPECT ARGS...: exit 0, and the layout line EXPECT in the output (COMMAND: not train)
  local name="$1" world="$2" expect="$3"
  shift 3
  if ! "$megaton" "${COMMAND:-train}" --dry-run --world-size "$world" "$@" > "$work/$name.out" 2>&1; then
    cat "$work/$name.out" >&2
    fail "$name: megaton ${COMMAND:-train} --dry-run refused the script's command line"
  fi
  grep -qF "$expect" "$work/$name.out" || { cat "$work/$name.out" >&2; fail "$name: expected '$expect'"; }
  echo "ok: $name"
}

# train/tr11-176B-ml/tr11-176B-ml.slurm (BLOOM-176B).
dry_run tr11-176B-ml 384 "parallel layout: TP=4 x PP=12 x DP=8 = 384 ranks" \
  --tensor-model-parallel-size 4 --pipeline-model-parallel-size 12 \
  --pp-partition-method 'type:transformer|embedding' --num-layers 70 --hidden-size 14336 --num-attention-heads 112 \
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 2 --rampup-batch-size 192 16 9_765_625 \
  --global-batch-size 2048 --train-samples 220_000_000 --tokenizer-type PretrainedFromHF \
  --tokenizer-name-or-path bigscience-catalogue-data-dev/byte-level-bpe-tokenizer-no-norm-250k-whitespace-and-eos-regex-alpha-v3-dedup-lines-articles \
  --init-method-std 0.0048 --embed-layernorm --sync-tp-duplicated-parameters --bf16 --seed 42 \
  --position-embedding-type alibi --checkpoint-activations --abort-on-unmet-fused-kernel-constraints \
  --kill-switch-path "$work/kill-switch-tr11-176B-exp1" --pad-vocab-size-to 250880 \
  --optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 6e-5 --min-lr 6e-6 --lr-decay-style cosine \
  --lr-decay-samples 200_000_000 --lr-warmup-samples 183_105 --clip-grad 1.0 --weight-decay 1e-1 \
  --exit-duration-in-mins 5990 \
  --log-interval 1 --save-interval 100 --eval-interval 1000 --eval-iters 1 --tensorboard-dir "$tb" \
  --tensorboard-queue-size 5 --log-timers-to-tensorboard --log-batch-size-to-tensorboard \
  --log-validation-ppl-to-tensorboard \
  --save "$ck" --load "$ck" --train-weighted-split-paths-path "$work/train-splits.txt" \
  --valid-weighted-split-paths-path "$work/valid-splits.txt" --num-workers 2 --valid-num-workers 0 --data-impl mmap \
  --distributed-backend nccl --deepspeed --deepspeed_config "$work/ds_tr11.json" --zero-stage 0 \
  --deepspeed-activation-checkpointing

# train/tr13-mtf (BLOOMZ: BLOOM-176B fine-tuned on xP3 with finetune_t0.py), 36 nodes of 8 GPUs.
COMMAND=finetune-t0 dry_run tr13-176B-ml-xp3 288 "parallel layout: TP=1 x PP=72 x DP=4 = 288 ranks" \
  --universal-checkpoint --tensor-model-parallel-size 1 --pipeline-model-parallel-size 72 \
  --pp-partition-method 'type:transformer|embedding' --num-layers 70 --hidden-size 14336 --num-attention-heads 112 \
  --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 2048 \
  --train-samples 6_348_800 --tokenizer-type PretrainedFromHF --tokenizer-name-or-path bigscience/tokenizer \
  --init-method-std 0.0048 --embed-layernorm --sync-tp-duplicated-parameters --bf16 --seed 42 \
  --position-embedding-type alibi --checkpoint-activations --abort-on-unmet-fused-kernel-constraints \
  --kill-switch-path "$work/kill-switch-tr13-176B-mtf" --pad-vocab-size-to 250880 \
  --optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 2e-5 --lr-decay-style constant \
  --lr-warmup-samples 0 --clip-grad 1.0 --weight-decay 1e-4 --no-load-optim --norm-target-loss --reset-progress \
  --exit-duration-in-mins 5990 --log-interval 1 --save-interval 5 --eval-interval 250 --eval-iters 1 \
  --tensorboard-dir "$tb" --tensorboard-queue-size 5 --log-timers-to-tensorboard --log-batch-size-to-tensorboard \
  --log-validation-ppl-to-tensorboard --save "$ck" --load "$ck" \
  --train-weighted-split-paths-path "$work/xp3_train.txt" --valid-weighted-split-paths-path "$work/xp3_valid.txt" \
  --dataloader-type single --data-impl mmap --distributed-backend nccl \
  --deepspeed --deepspeed_config "$work/ds_tr13.json" --zero-stage 0 --deepspeed-activation-checkpointing

# train/tr1-13B-base/tr1-13B-round1.slurm: --clip-grad given twice (the last wins); --codecarbon-dir.
dry_run tr1-13B-round1 128 "parallel layout: TP=2 x PP=4 x DP=16 = 128 ranks" \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 \
  --num-layers 40 --hidden-size 5120 --ffn-hidden-size 20480 --num-attention-heads 32 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --rampup-batch-size 16 16 5_000_000 --global-batch-size 1024 \
  --train-samples 300_000_000 --vocab-file "$work/gpt2-vocab.json" --merge-file "$work/gpt2-merges.txt" \
  --loss-scale 12 --clip-grad 1.0 --fp16 --checkpoint-activations --seed 42 \
  --optimizer adam --adam-beta1 0.9 --adam-beta2 0.999 --adam-eps 1e-8 --lr 1e-4 --min-lr 1e-5 \
  --lr-decay-style cosine --lr-decay-samples 126_953_125 --lr-warmup-samples 216_320 --clip-grad 1.0 \
  --weight-decay 1e-1 --exit-duration-in-mins 1190 \
  --log-interval 10 --save-interval 1500 --eval-interval 1000 --eval-iters 5 --codecarbon-dir "$work/codecarbon" \
  --tensorboard-dir "$tb" --tensorboard-queue-size 5 --log-timers-to-tensorboard --log-batch-size-to-tensorboard \
  --log-validation-ppl-to-tensorboard \
  --save "$ck" --load "$ck" --data-path "$work/meg-gpt2_text_document" --data-impl mmap --split 949,50,1 \
  --distributed-backend nccl --deepspeed --deepspeed_config "$work/ds_tr1.json" --zero-stage 1 \
  --deepspeed-activation-checkpointing
[ ! -e "$work/codecarbon" ] || fail "tr1-13B-round1: a dry run created the --codecarbon-dir"

# train/tr8-104B-wide/tr8-104B.slurm, and train/tr8b-104B/tr8b-104B-bnb.slurm: the same with bitsandbytes' 8-bit Adam
# instead of --embed-layernorm (the flag adds the embedding LayerNorm, as the fork does).
tr8=(--tensor-model-parallel-size 4 --pipeline-model-parallel-size 32
  --num-layers 64 --hidden-size 11600 --num-attention-heads 80 --seq-length 2048 --max-position-embeddings 2048
  --micro-batch-size 1 --rampup-batch-size 16 16 6_000_000 --global-batch-size 2048 --train-samples 300_000_000
  --vocab-file "$work/gpt2-vocab.json" --merge-file "$work/gpt2-merges.txt" --loss-scale 12 --init-method-std 0.006
  --fp16 --checkpoint-activations --seed 43
  --optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr 6e-5 --min-lr 6e-6
  --lr-decay-style cosine --lr-decay-samples 126_953_125 --lr-warmup-samples 216_320 --clip-grad 1.0
  --weight-decay 1e-1 --exit-duration-in-mins 1190
  --log-interval 1 --save-interval 300 --eval-interval 1000 --eval-iters 5 --tensorboard-dir "$tb"
  --tensorboard-queue-size 5 --log-timers-to-tensorboard --log-batch-size-to-tensorboard
  --log-validation-ppl-to-tensorboard
  --save "$ck" --load "$ck" --data-path "$work/meg-gpt2_text_document" --data-impl mmap --split 949,50,1
  --distributed-backend nccl --deepspeed --deepspeed_config "$work/ds_tr8.json" --zero-stage 1
  --deepspeed-activation-checkpointing)
dry_run tr8-104B 2048 "parallel layout: TP=4 x PP=32 x DP=16 = 2048 ranks" "${tr8[@]}" --embed-layernorm
dry_run tr8b-104B-bnb 2048 "parallel layout: TP=4 x PP=32 x DP=16 = 2048 ranks" "${tr8[@]}" --use-bnb-optimizer
grep -qF "embedding LayerNorm" "$work/tr8b-104B-bnb.out" || fail "tr8b-104B-bnb: no embedding LayerNorm"

# train/tr14-mup/tr14-39M-grid-search-mup.slurm (its MUP_ARGS: lr 6e-3, init 0.1, multipliers 10).
dry_run tr14-39M-mup 8 "parallel layout: TP=1 x PP=1 x DP=8 = 8 ranks" \
  --lr 6e-3 --min-lr 6e-4 --init-method-std 0.1 --mup --mup-input-mult 10 --mup-output-mult 10 --mup-attn-mult 10 \
  --optimizer adam --adam-beta1 0.9 --adam-beta2 0.95 --adam-eps 1e-8 --lr-decay-style cosine \
  --lr-decay-samples 1_953_125 --lr-warmup-samples 183_105 --clip-grad 1.0 --weight-decay 1e-1 \
  --exit-duration-in-mins 1190 --pp-partition-method 'type:transformer' --num-layers 32 --hidden-size 256 \
  --num-attention-heads 8 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 32 \
  --global-batch-size 512 --train-samples 1_953_125 --vocab-file "$work/gpt2-vocab.json" \
  --merge-file "$work/gpt2-merges.txt" --embed-layernorm --fp16 --seed 42 --position-embedding-type alibi \
  --checkpoint-activations --abort-on-unmet-fused-kernel-constraints --pad-vocab-size-to 51200 \
  --log-interval 10 --save-interval 1000 --eval-interval 1000 --eval-iters 100 --tensorboard-dir "$tb" \
  --tensorboard-queue-size 5 --log-timers-to-tensorboard --log-batch-size-to-tensorboard \
  --log-validation-ppl-to-tensorboard --save "$ck" --load "$ck" --data-path "$work/meg-gpt2_text_document" \
  --data-impl mmap --split 949,50,1 --distributed-backend nccl --tensor-model-parallel-size 1 \
  --pipeline-model-parallel-size 1 --deepspeed --deepspeed_config "$work/ds_tr14.json" --zero-stage 1 \
  --deepspeed-activation-checkpointing

# train/tr3-1B3-baseline/tr3m-1B3-emb-norm-pile.slurm: --log-level with --log-level-replica.
dry_run tr3m-1B3-emb-norm-pile 32 "parallel layout: TP=1 x PP=1 x DP=32 = 32 ranks" \
  --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --ffn-hidden-size 8192 --seq-length 2048 \
  --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 512 --rampup-batch-size 32 32 2_000_000 \
  --train-samples 146_484_375 --vocab-file "$work/gpt2-vocab.json" --merge-file "$work/gpt2-merges.txt" \
  --loss-scale 12 --clip-grad 1.0 --checkpoint-activations --fp16 --embed-layernorm --seed 1234 \
  --log-interval 1 --save-interval 1500 --eval-interval 1000 --eval-iters 100 --tensorboard-dir "$tb" \
  --tensorboard-queue-size 5 --log-timers-to-tensorboard --log-batch-size-to-tensorboard \
  --log-validation-ppl-to-tensorboard --log-level info --log-level-replica error \
  --deepspeed --deepspeed_config "$work/ds_tr3m.json" --zero-stage 1 --deepspeed-activation-checkpointing \
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --save "$ck" --load "$ck" \
  --data-path "$work/pile_text_document" --data-impl mmap --split 949,50,1 --distributed-backend nccl

# Every flag of megatron/arguments.py over a small valid command line, each with a value its own checks take: all the
# accepted ones in one command line (the parser names the first flag it does not know before any other check), each
# refused one alone.
base=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 1 --train-iters 10
      --vocab-size 128 --dry-run)
refused="--batch-size --warmup --model-parallel-size"
n=0
accepted=()
while read -r flag value; do
  n=$((n + 1))
  args=("$flag")
  [ -z "$value" ] || read -r -a vals <<< "$value"
  [ -z "$value" ] || args+=("${vals[@]}")
  if [[ " $refused " == *" $flag "* ]]; then
    out=$("$megaton" train "${base[@]}" "${args[@]}" 2>&1) || true
    echo "$out" | grep -qF -- "$flag is not supported:" || fail "$flag should be refused with its reason: $out"
  else
    accepted+=("${args[@]}")
  fi
done <<'FLAGS'
--num-layers 1
--hidden-size 1
--ffn-hidden-size 1
--num-attention-heads 1
--kv-channels 1
--max-position-embeddings 1
--make-vocab-size-divisible-by 1
--pad-vocab-size-to 1
--layernorm-epsilon 0.5
--sync-tp-duplicated-parameters
--apply-residual-connection-post-layernorm
--embed-layernorm
--openai-gelu
--onnx-safe True
--bert-no-binary-head
--position-embedding-type alibi
--glu-activation geglu
--kill-switch-path x
--log-level info
--log-level-replica error
--log-params-norm
--log-num-zeros-in-grad
--tensorboard-log-interval 1
--tensorboard-queue-size 1
--log-timers-to-tensorboard
--log-batch-size-to-tensorboard
--no-log-learnig-rate-to-tensorboard
--no-log-loss-scale-to-tensorboard
--log-validation-ppl-to-tensorboard
--attention-dropout 0.5
--hidden-dropout 0.5
--weight-decay 0.5
--clip-grad 0.5
--adam-beta1 0.5
--adam-beta2 0.5
--adam-eps 0.5
--sgd-momentum 0.5
--micro-batch-size 1
--batch-size 1
--global-batch-size 1
--rampup-batch-size 1 1 1
--checkpoint-activations
--distribute-checkpointed-activations
--checkpoint-num-layers 1
--train-iters 1
--train-samples 1
--train-tokens 1
--log-interval 1
--exit-interval 1
--exit-duration-in-mins 1
--tensorboard-dir x
--no-masked-softmax-fusion
--no-bias-gelu-fusion
--no-bias-dropout-fusion
--optimizer adam
--use-bnb-optimizer
--dataloader-type single
--cpu-optimizer
--cpu_torch_adam
--codecarbon-dir x
--eval-only True
--skip-train-iteration-range 1-2
--inference
--abort-on-unmet-fused-kernel-constraints
--pp-partition-method type:transformer|embedding
--seed 1
--init-method-std 0.5
--init-method-xavier-uniform
--lr 0.5
--lr-decay-style cosine
--lr-decay-iters 1
--lr-decay-samples 1
--lr-decay-tokens 1
--lr-warmup-fraction 0.5
--lr-warmup-iters 1
--lr-warmup-samples 1
--warmup 1
--min-lr 0.5
--override-lr-scheduler
--use-checkpoint-lr-scheduler
--universal-checkpoint
--save x
--save-interval 1
--no-save-optim
--no-save-rng
--load x
--no-load-optim
--no-load-rng
--finetune
--fp16
--bf16
--loss-scale 0.5
--initial-loss-scale 0.5
--min-loss-scale 0.5
--loss-scale-window 0.5
--hysteresis 1
--fp32-residual-connection
--no-query-key-layer-scaling
--attention-softmax-in-fp32
--accumulate-allreduce-grads-in-fp32
--fp16-lm-cross-entropy
--tensor-model-parallel-size 1
--pipeline-model-parallel-size 1
--model-parallel-size 1
--num-layers-per-virtual-pipeline-stage 1
--distributed-backend mpi
--DDP-impl torch
--use-contiguous-buffers-in-ddp
--no-scatter-gather-tensors-in-pipeline
--local_rank 1
--lazy-mpu-init True
--use-cpu-initialization
--eval-iters 1
--eval-interval 1
--data-path x
--split 949,50,1
--train-weighted-split-paths "TRAIN: 1 0:1 x"
--valid-weighted-split-paths x
--test-weighted-split-paths x
--train-weighted-split-paths-path x
--valid-weighted-split-paths-path x
--test-weighted-split-paths-path x
--log-path x
--vocab-file x
--merge-file x
--vocab-extra-ids 1
--seq-length 1
--encoder-seq-length 1
--decoder-seq-length 1
--retriever-seq-length 1
--sample-rate 0.5
--mask-prob 0.5
--short-seq-prob 0.5
--mmap-warmup
--num-workers 1
--valid-num-workers 1
--tokenizer-type GPT2BPETokenizer
--tokenizer-name-or-path x
--data-impl mmap
--reset-position-ids
--reset-attention-mask
--eod-mask-loss
--loss-on-targets-only
--reweight-loss-based-on-position-frequency
--noise-density 0.5
--mean-noise-span-length 1
--adlr-autoresume
--adlr-autoresume-interval 1
--ict-head-size 1
--biencoder-projection-dim 1
--biencoder-shared-query-context-model
--ict-load x
--bert-load x
--titles-data-path x
--query-in-block-prob 0.5
--use-one-sent-docs
--evidence-data-path x
--retriever-report-topk-accuracies 1
--retriever-score-scaling
--block-data-path x
--embedding-path x
--indexer-batch-size 1
--indexer-log-interval 1
--num-classes 1
--img-dim 1
--num-channels 1
--patch-dim 1
--zero-stage 1
--zero-reduce-scatter
--zero-contigious-gradients
--zero-reduce-bucket-size 1
--zero-allgather-bucket-size 1
--remote-device none
--use-pin-memory
--scattered-embeddings
--split-transformers
--memory-centric-tiled-linear
--tile-factor 1
--deepspeed-activation-checkpointing
--partition-activations
--contigious-checkpointing
--checkpoint-in-cpu
--synchronize-each-layer
--profile-backward
FLAGS
out=$("$megaton" train "${base[@]}" "${accepted[@]}" 2>&1) || true
if echo "$out" | grep -q "unrecognised option"; then fail "$out"; fi
[ "$n" -eq 184 ] || fail "expected the 184 flags of megatron/arguments.py, read $n"
echo "ok: all $n flags of Megatron-DeepSpeed's megatron/arguments.py recognised"
