#!/bin/bash
# --deepspeed --deepspeed_config FILE trains exactly as the flags the JSON stands for (2 ranks, DP=2): BLOOM's bf16 with
# ZeRO stage 0 (DeepSpeed's bf16 optimizer = megaton's ZeRO-1), gradient_clipping and train_batch_size: same losses,
# bit for bit. The log says what the JSON set; tr1-13B's fp16 section in a dry run (dynamic scaler, 2^12).
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
common=($(tiny_model_args | sed 's/--clip-grad 1.0//') $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2 --train-iters 6)
cat > "$work/bf16.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 0.5,
 "zero_optimization": {"stage": 0}, "bf16": {"enabled": true}, "steps_per_print": 2000}
JSON
run_train 2 "${common[@]}" --deepspeed --deepspeed_config "$work/bf16.json" --zero-stage 0 \
  --metrics-file "$work/ds_bf16.jsonl" > "$work/ds_bf16.log" 2>&1 || { tail -20 "$work/ds_bf16.log"; exit 1; }
run_train 2 "${common[@]}" --bf16 --zero-stage 1 --clip-grad 0.5 --global-batch-size 8 \
  --metrics-file "$work/flags_bf16.jsonl" > "$work/flags_bf16.log" 2>&1 || { tail -20 "$work/flags_bf16.log"; exit 1; }
compare_losses "$work/ds_bf16.jsonl" "$work/flags_bf16.jsonl" 0
grep -q "bf16.jsonl\?: zero_optimization.stage 0 with bf16 -> --zero-stage 1" "$work/ds_bf16.log" &&
  grep -q "ignored: steps_per_print" "$work/ds_bf16.log" || { grep deepspeed "$work/ds_bf16.log"; exit 1; }

cat > "$work/fp16.json" <<'JSON'
{"train_micro_batch_size_per_gpu": 2, "train_batch_size": 8, "gradient_clipping": 1.0, "zero_optimization": {"stage": 1},
 "fp16": {"enabled": true, "loss_scale": 0, "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1,
          "initial_scale_power": 12}}
JSON
# fp16 needs a GPU here (no fp16 GEMM in this LibTorch on the CPU): the dry run shows what the JSON set (the unit
# tests DeepSpeedConfig.* check every field).
"$MEGATON" train "${common[@]}" --deepspeed --deepspeed_config "$work/fp16.json" --loss-scale 12 --dry-run \
  --world-size 2 > "$work/ds_fp16.log" 2>&1 || { tail -20 "$work/ds_fp16.log"; exit 1; }
grep -q "fp16 loss scaler -> dynamic, --initial-loss-scale 4096 (2^12), --loss-scale-window 500" "$work/ds_fp16.log" ||
  { cat "$work/ds_fp16.log"; exit 1; }
echo "deepspeed config: OK"
