#!/bin/bash
# The prompt objectives on the GPU: finetune-t0's segments through the variable-length flash kernel, the bidirectional
# prefixes of finetune-t0-non-causal and pretrain-prefix-lm through SDPA with their mask.
#   * examples/finetune_t0 on the GPU in bf16 learns its task (>= 90% of held-out prompts);
#   * bf16 finetune-t0: the variable-length kernel's losses and grad norms equal the masked kernel's
#     (--no-varlen-attention) within BF16_TOL relative (printed beside the spread under another --seed);
#   * fp32, each objective: the GPU's losses equal the CPU's within 1e-4 relative and its grad norms within 1e-3
#     (printed beside megaton train's own GPU-vs-CPU differences: the devices sum in other orders), and TP=2 x PP=2
#     (four ranks on the one GPU, --distributed-backend mpi) equals one rank within 1e-5.
# Prints a table. Skipped (exit 77) without a CUDA build and a GPU; run it on the GPU machine:
#   bash tests/train/gpu_prompt_test.sh build-gpu .
set -euo pipefail
BUILD=$1 SRC=$2
grep -q "MEGATON_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null && nvidia-smi -L > /dev/null 2>&1 || {
  echo "SKIP: needs a CUDA build and a GPU"; exit 77; }
source "$SRC/tests/support/train_lib.sh"
setup_work 256
BF16_TOL=${BF16_TOL:-2e-2}
out=$(MEGATON="$MEGATON" DEVICE=cuda bash "$SRC/examples/finetune_t0/run.sh" "$work/ex" --bf16) || { echo "$out"; exit 1; }
echo "examples/finetune_t0 on the GPU, bf16: $out"
acc=$(echo "$out" | sed -n 's/^accuracy: \([0-9.]*\) .*/\1/p')
python3 -c "import sys; sys.exit(0 if $acc >= 0.9 else 1)" || { echo "FAIL: accuracy below 0.9"; exit 1; }

ex=$work/ex
model=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 --max-position-embeddings 128
       --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$ex/tok" --make-vocab-size-divisible-by 128
       --hidden-dropout 0 --attention-dropout 0 --init-method-std 0.02 --seed 1234 --weight-decay 0.01 --clip-grad 1.0
       --adam-beta2 0.95 --log-interval 1 --eval-interval 1000 --eval-iters 1 --split 95,5,0 --lr 3e-4 --min-lr 3e-5
       --lr-decay-style cosine --lr-warmup-iters 5 --micro-batch-size 2 --global-batch-size 8 --train-iters 20
       --distributed-backend mpi)
mtf=(--data-path "$ex/rev" --loss-on-targets-only)
plm=(--data-path "$work/synth_text_document" --reset-attention-mask --loss-on-targets-only)
train() {  # train NAME COMMAND NP ARGS...
  local name=$1 cmd=$2 np=$3
  shift 3
  if ! "$MPIRUN" --oversubscribe --bind-to none -np "$np" "$MEGATON" "$cmd" "${model[@]}" "$@" \
       --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1; then
    echo "FAIL: $name"; tail -25 "$work/$name.log"; return 1
  fi
}
compare() {  # compare A B TOL[:GNORM_TOL] -> "worst loss rel, worst grad-norm rel"; fails beyond them
  python3 - "$work/$1.jsonl" "$work/$2.jsonl" "$3" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o and "valid_lm_loss" not in o}
a, b = load(sys.argv[1]), load(sys.argv[2])
tol, gtol = (float(x) for x in (sys.argv[3] + ":" + sys.argv[3]).split(":")[:2])
its = sorted(set(a) & set(b))
if len(its) < 10:
    sys.exit(f"only {len(its)} common iterations")
rel = lambda x, y: abs(x - y) / max(abs(x), 1e-12)
wl = max(rel(a[i]["lm_loss"], b[i]["lm_loss"]) for i in its)
wg = max(rel(a[i]["grad_norm"], b[i]["grad_norm"]) for i in its)
print(f"{wl:.2e} {wg:.2e}")
sys.exit(0 if wl <= tol and wg <= gtol else 1)
PY
}
status=0
row() {  # row WHAT A B TOL
  local r res
  if r=$(compare "$2" "$3" "$4"); then res=ok; else res="OVER $4"; status=1; fi
  printf "%-48s %-10s %-10s %s\n" "$1" $r "$res" >> "$work/table.txt"
}
printf "%-48s %-10s %-10s %s\n" comparison "loss rel" "gnorm rel" result > "$work/table.txt"
train varlen finetune-t0 1 "${mtf[@]}" --device cuda --bf16
train masked finetune-t0 1 "${mtf[@]}" --device cuda --bf16 --no-varlen-attention
train seed finetune-t0 1 "${mtf[@]}" --device cuda --bf16 --seed 4321
row "finetune-t0 bf16: other seed (spread)" varlen seed 1e9
row "finetune-t0 bf16: varlen vs masked kernel" varlen masked "$BF16_TOL"
train train_cpu train 1 "${plm[@]}" --device cpu
train train_gpu train 1 "${plm[@]}" --device cuda
row "train fp32: GPU vs CPU (for scale)" train_cpu train_gpu 1e9
for objective in "finetune-t0:mtf" "finetune-t0-non-causal:mtf" "pretrain-prefix-lm:plm"; do
  IFS=: read -r cmd data <<< "$objective"
  declare -n flags=$data
  train "${cmd}_cpu" "$cmd" 1 "${flags[@]}" --device cpu
  train "${cmd}_gpu" "$cmd" 1 "${flags[@]}" --device cuda
  train "${cmd}_tp2pp2" "$cmd" 4 "${flags[@]}" --device cuda --tensor-model-parallel-size 2 \
    --pipeline-model-parallel-size 2
  row "$cmd fp32: GPU vs CPU" "${cmd}_cpu" "${cmd}_gpu" 1e-4:1e-3
  row "$cmd fp32: TP2 x PP2 vs one rank (GPU)" "${cmd}_gpu" "${cmd}_tp2pp2" 1e-5
done
cat "$work/table.txt"
[ $status = 0 ] && echo PASS
exit $status
