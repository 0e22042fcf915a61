#!/bin/bash
# test_dry_run_templates.sh BUILD_DIR SOURCE_DIR — every SLURM template under slurm/ resolves with
# `DRY_RUN=1 bash TEMPLATE` (no SLURM needed: megaton train --dry-run --world-size NNODES x GPUS_PER_NODE), so each
# flag it passes is one megaton train accepts and validates. For each template it checks the printed parallel layout
# against the reference run's, recomputes the model FLOPs per iteration from the sizes the reference gives
# (72 B s l h^2 (1 + s/6h + V/12lh)), and checks that the #SBATCH header agrees with the template's NNODES and
# GPUS_PER_NODE defaults. Then the failure paths: a bad size, no SLURM, no binary.
set -euo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
SRC=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
export MEGATON_BIN="$BUILD/megaton"
[[ -x "$MEGATON_BIN" ]] || { echo "FAIL: $MEGATON_BIN not built" >&2; exit 1; }
unset SLURM_JOB_ID SLURM_NTASKS SLURM_PROCID
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"   # templates default their work directories to $PWD
fails=0
fail() {
  echo "FAIL: $*" >&2
  fails=$((fails + 1))
}

# check_template FILE LAYOUT B S L H V [EXTRA_GREP...]
check_template() {
  local file=$1 layout=$2 B=$3 S=$4 L=$5 H=$6 V=$7
  shift 7
  local t="$SRC/slurm/$file" out
  bash -n "$t" || { fail "$file: bash syntax error"; return; }
  if ! out=$(DRY_RUN=1 bash "$t" 2>&1); then
    fail "$file: DRY_RUN=1 failed:"
    echo "$out" >&2
    return
  fi
  echo "--- $file"
  echo "$out"
  grep -qF "parallel layout: $layout" <<<"$out" || fail "$file: expected 'parallel layout: $layout'"
  grep -q '^memory per GPU (busiest rank' <<<"$out" || fail "$file: no memory-per-GPU line"
  local printed expected
  printed=$(sed -n 's/^model FLOPs per iteration: \([0-9.e+]*\) .*/\1/p' <<<"$out")
  expected=$(python3 -c "B,s,l,h,V=$B,$S,$L,$H,$V; print(72*B*s*l*h*h*(1+s/(6*h)+V/(12*l*h)))")
  python3 -c "import sys; p,e=float('${printed:-0}'),$expected; sys.exit(0 if abs(p-e)<=1e-3*e else 1)" ||
    fail "$file: model FLOPs per iteration printed '${printed}', expected $expected (B=$B s=$S l=$L h=$H V=$V)"
  local pattern
  for pattern in "$@"; do
    grep -qF -- "$pattern" <<<"$out" || fail "$file: expected '$pattern' in the dry run"
  done
  # The #SBATCH header and the DRY_RUN defaults must describe the same job.
  local nodes tpn gres nnodes gpn
  nodes=$(sed -n 's/^#SBATCH --nodes=\([0-9]*\).*/\1/p' "$t")
  tpn=$(sed -n 's/^#SBATCH --ntasks-per-node=\([0-9]*\).*/\1/p' "$t")
  gres=$(sed -n 's/^#SBATCH --gres=gpu:\([0-9]*\).*/\1/p' "$t")
  nnodes=$(sed -n 's/^: "${NNODES:=\([0-9]*\)}".*/\1/p' "$t")
  gpn=$(sed -n 's/^: "${GPUS_PER_NODE:=\([0-9]*\)}".*/\1/p' "$t")
  [[ -n "$nodes" && "$nodes" == "$nnodes" ]] || fail "$file: #SBATCH --nodes=$nodes but NNODES defaults to $nnodes"
  [[ -n "$tpn" && "$tpn" == "$gpn" && "$gres" == "$gpn" ]] ||
    fail "$file: --ntasks-per-node=$tpn, --gres=gpu:$gres and GPUS_PER_NODE=$gpn must agree"
  for pattern in '--requeue' '--signal=B:USR1@' '--open-mode=append'; do
    grep -q "^#SBATCH $pattern" "$t" || fail "$file: no '#SBATCH $pattern'"
  done
}

# tr1-13B: 32 nodes x 4 V100 during ramp-up, TP 2 x PP 4 -> DP 16; vocab 50257 padded to 128 x TP = 256 -> 50432.
check_template tr1-13B.slurm "TP=2 x PP=4 x DP=16 = 128 ranks, ZeRO-1 over DP" 1024 2048 40 5120 50432 \
  "model: 40 layers, hidden 5120, 32 heads, ffn 20480, seq 2048, vocab 50257 (padded 50432), absolute positions" \
  "batch: micro 1, global 1024, 64 micro-batches per iteration per pipeline (at full batch; ramp-up on)"
# GPT-3 175B: 128 nodes x 8, TP 8 x PP 16 -> DP 8; vocab padded to 128 x 8 = 1024 -> 51200.
check_template gpt3_175B.slurm "TP=8 x PP=16 x DP=8 = 1024 ranks" 1536 2048 96 12288 51200 \
  "model: 96 layers, hidden 12288, 96 heads, ffn 49152, seq 2048, vocab 50257 (padded 51200), absolute positions" \
  "batch: micro 1, global 1536, 192 micro-batches per iteration per pipeline (at full batch; ramp-up on)"
# BLOOM: 48 nodes x 8, TP 4 x PP 12 -> DP 8; vocab 250680 padded to exactly 250880; ALiBi, embedding LayerNorm.
check_template tr11-176B-bloom.slurm "TP=4 x PP=12 x DP=8 = 384 ranks, ZeRO-1 over DP" 2048 2048 70 14336 250880 \
  "model: 70 layers, hidden 14336, 112 heads, ffn 57344, seq 2048, vocab 250680 (padded 250880), alibi positions, embedding LayerNorm" \
  "batch: micro 2, global 2048, 128 micro-batches per iteration per pipeline (at full batch; ramp-up on)"

# smoke: 1 node x 4 tasks on CPU (no gres), TP 2 x PP 2.
t="$SRC/slurm/smoke.slurm"
if out=$(DRY_RUN=1 bash "$t" 2>&1); then
  echo "--- smoke.slurm"
  echo "$out"
  grep -qF "parallel layout: TP=2 x PP=2 x DP=1 = 4 ranks" <<<"$out" || fail "smoke.slurm: wrong layout"
else
  fail "smoke.slurm: DRY_RUN=1 failed: $out"
fi

# Sizes come from the environment: a smaller 13B-style model and a full-batch (no ramp-up) 128-node round 3.
out=$(NLAYERS=8 NNODES=2 GPUS_PER_NODE=4 DRY_RUN=1 bash "$SRC/slurm/tr1-13B.slurm" 2>&1) ||
  fail "tr1-13B.slurm with NLAYERS=8 NNODES=2: $out"
grep -qF "TP=2 x PP=4 x DP=1 = 8 ranks" <<<"$out" && grep -qF "model: 8 layers" <<<"$out" ||
  fail "tr1-13B.slurm did not take NLAYERS=8 NNODES=2 from the environment: $out"
out=$(RAMPUP_BATCH_SIZE='' NNODES=128 DRY_RUN=1 bash "$SRC/slurm/tr1-13B.slurm" 2>&1) ||
  fail "tr1-13B.slurm round 3 (128 nodes, no ramp-up): $out"
grep -qF "TP=2 x PP=4 x DP=64 = 512 ranks" <<<"$out" || fail "tr1-13B.slurm round 3: wrong layout: $out"
# ... and megaton validates them: ramp-up start 16 is not a multiple of micro x DP = 64 at 128 nodes.
if out=$(NNODES=128 DRY_RUN=1 bash "$SRC/slurm/tr1-13B.slurm" 2>&1); then
  fail "tr1-13B.slurm accepted a ramp-up from 16 at DP 64"
else
  grep -q -- "--rampup-batch-size START (16)" <<<"$out" || fail "ramp-up error does not name the flag: $out"
fi
if out=$(NHEADS=33 DRY_RUN=1 bash "$SRC/slurm/tr1-13B.slurm" 2>&1); then
  fail "tr1-13B.slurm accepted NHEADS=33 (not divisible by TP 2 nor hidden 5120)"
else
  grep -q -- "--num-attention-heads" <<<"$out" || fail "NHEADS=33 error does not name --num-attention-heads: $out"
fi

# Outside SLURM without DRY_RUN=1 the templates refuse, naming the way out.
if out=$(bash "$SRC/slurm/gpt3_175B.slurm" 2>&1); then
  fail "gpt3_175B.slurm ran outside SLURM without DRY_RUN=1"
else
  grep -q "not inside a SLURM allocation" <<<"$out" || fail "unclear outside-SLURM error: $out"
fi
if out=$(MEGATON_BIN=/nonexistent/megaton PATH=/usr/bin:/bin DRY_RUN=1 bash "$SRC/slurm/smoke.slurm" 2>&1); then
  fail "smoke.slurm ran without a megaton binary"
else
  grep -q "module load megaton" <<<"$out" || fail "unclear missing-binary error: $out"
fi

if [[ $fails -gt 0 ]]; then
  echo "test_dry_run_templates: $fails failure(s)"
  exit 1
fi
echo "test_dry_run_templates: PASSED"
