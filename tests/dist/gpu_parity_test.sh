#!/bin/bash
# The GPU code under TP, PP and DP, several ranks on one GPU (--distributed-backend mpi stages CUDA tensors through
# host memory; NCCL refuses two ranks on one device). For fp32 and bf16, with the fused kernels at their defaults,
# 20 iterations of a small GPT at TP2, PP2, DP2, TP2 x PP2, DP2 + ZeRO-1 and interleaved PP2 against the one-rank GPU
# run: losses and grad norms within 1e-5 relative in fp32; in bf16 within BF16_TOL (printed beside the spread of the
# one-rank run under another --seed, the scale of run-to-run differences). Then greedy samples at TP2 equal TP1's,
# and a checkpoint saved at TP2 x PP2 resumes at TP1 with the straight run's losses. Prints a table.
# Skipped (exit 77) without a CUDA build and a GPU: CI runs it nowhere; run it on the GPU machine:
#   bash tests/dist/gpu_parity_test.sh build-gpu .
set -euo pipefail
BUILD=$1 SRC=$2
grep -q "MEGATON_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null && nvidia-smi -L > /dev/null 2>&1 || {
  echo "SKIP: needs a CUDA build and a GPU"; exit 77; }
source "$SRC/tests/support/train_lib.sh"
setup_work
# PARITY_OUT=DIR keeps the table and a tarball of every run's log there, whatever the outcome.
[ -n "${PARITY_OUT:-}" ] && trap 'mkdir -p "$PARITY_OUT"; cp "$work/table.txt" "$PARITY_OUT/" 2> /dev/null;
  tar czf "$PARITY_OUT/parity_logs.tgz" -C "$work" $(cd "$work" && ls *.log 2> /dev/null); rm -rf "$work"' EXIT
BF16_TOL=${BF16_TOL:-2e-2}
fail() { echo "FAIL: $*"; exit 1; }
make_byte_tokenizer "$work/tok"
base=(--num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 128 --max-position-embeddings 128
      --hidden-dropout 0 --attention-dropout 0 --init-method-std 0.02 --seed 1234 --weight-decay 0.01 --clip-grad 1.0
      --adam-beta2 0.95 --log-interval 1 --eval-interval 1000 --eval-iters 1 --split 95,5,0 --lr 3e-4 --min-lr 3e-5
      --lr-decay-style cosine --lr-warmup-iters 5 --micro-batch-size 2 --global-batch-size 8 --train-iters 20
      --data-path "$work/synth_text_document" --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok"
      --make-vocab-size-divisible-by 128 --device cuda --distributed-backend mpi)
train() {  # train NAME NP ARGS...
  local name=$1 np=$2
  shift 2
  if ! "$MPIRUN" --oversubscribe --bind-to none -np "$np" "$MEGATON" train "${base[@]}" "$@" \
       --metrics-file "$work/$name.jsonl" > "$work/$name.log" 2>&1; then
    echo "FAIL: $name"; tail -25 "$work/$name.log"; return 1
  fi
}
# compare A B TOL -> prints "worst loss rel, worst grad-norm rel" and fails beyond TOL
compare() {
  python3 - "$work/$1.jsonl" "$work/$2.jsonl" "$3" <<'PY'
import json, sys
def load(p):
    return {o["iteration"]: o for o in map(json.loads, open(p)) if "lm_loss" in o and "valid_lm_loss" not in o}
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
its = sorted(set(a) & set(b))
if len(its) < 10:
    sys.exit(f"only {len(its)} common iterations")
rel = lambda x, y: abs(x - y) / max(abs(x), 1e-12)
wl = max(rel(a[i]["lm_loss"], b[i]["lm_loss"]) for i in its)
wg = max(rel(a[i]["grad_norm"], b[i]["grad_norm"]) for i in its if "grad_norm" in a[i] and "grad_norm" in b[i])
print(f"{wl:.2e} {wg:.2e}")
sys.exit(0 if wl <= tol and wg <= tol else 1)
PY
}
layouts=("tp2:2:--tensor-model-parallel-size 2" "pp2:2:--pipeline-model-parallel-size 2" "dp2:2:"
         "tp2pp2:4:--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2" "dp2zero1:2:--zero-stage 1"
         "pp2interleaved:2:--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1")
status=0
row() { printf "%-16s %-6s %-14s %-14s %s\n" "$@" | tee -a "$work/table.txt"; }  # printed as it goes
row layout dtype "loss rel" "gnorm rel" result
for prec in fp32 bf16; do
  p=(); tol=1e-5
  [ "$prec" = bf16 ] && { p=(--bf16); tol=$BF16_TOL; }
  train "one_$prec" 1 "${p[@]}" || exit 1
  if [ "$prec" = bf16 ]; then
    train "seed_$prec" 1 "${p[@]}" --seed 4321 || exit 1
    r=$(compare "one_$prec" "seed_$prec" 1e9)
    row "(other seed)" "$prec" $r "spread"
  fi
  for l in "${layouts[@]}"; do
    IFS=: read -r name np flags <<< "$l"
    if ! train "${name}_$prec" "$np" "${p[@]}" $flags; then
      row "$name" "$prec" - - "FAILED TO RUN"; status=1; continue
    fi
    if r=$(compare "one_$prec" "${name}_$prec" "$tol"); then res=ok; else res="OVER $tol"; status=1; fi
    row "$name" "$prec" $r "$res"
  done
done

# Greedy samples: TP2 = TP1 (fp32 checkpoint of the one-rank run).
train save_fp32 1 --save "$work/ckpt" --save-interval 20 || exit 1
gen() {
  "$MPIRUN" --oversubscribe --bind-to none -np "$1" "$MEGATON" generate --load "$work/ckpt" --device cuda \
    --distributed-backend mpi --tensor-model-parallel-size "$1" --greedy --num-samples 4 --micro-batch-size 2 \
    --out-seq-length 48 --genfile "$work/gen$1.jsonl" > "$work/gen$1.log" 2>&1 || { tail -20 "$work/gen$1.log"; return 1; }
}
gen 1 && gen 2 || exit 1
if cmp -s "$work/gen1.jsonl" "$work/gen2.jsonl"; then res=ok; else res=DIFFER; status=1; fi
row "generate tp2" fp32 - - "$res"

# A checkpoint saved at TP2 x PP2 (iteration 10) resumes at TP1: the straight one-rank run's last 10 losses.
train half 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --save "$work/ckpt22" --save-interval 10 \
  --exit-interval 10 || exit 1
rm -f "$work/resumed.jsonl"
train resumed 1 --load "$work/ckpt22" || exit 1
if r=$(compare one_fp32 resumed 1e-5); then res=ok; else res="OVER 1e-5"; status=1; fi
row "resume tp2pp2>1" fp32 $r "$res"
[ $status = 0 ] && echo PASS || { echo "FAIL: see the table"; exit 1; }
