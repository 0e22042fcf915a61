#!/bin/bash
# --gemm-epilogue-fusion (the default, asked for explicitly) where the MLP cannot take it (here: a CPU run, fp32) says
# so on rank 0 and changes nothing: the losses equal those of the run without the flag, bit for bit, and so do those of
# --no-gemm-epilogue-fusion and --no-gemm-dgelu-epilogue; --gemm-epilogue-fusion with --no-gemm-epilogue-fusion is a
# usage error. (The CUDA path itself is checked on a GPU by KernelsGemmEpilogue.*.)
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
common=($(tiny_model_args) $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
        --global-batch-size 4 --train-iters 6)
run_train 1 "${common[@]}" --metrics-file "$work/plain.jsonl" > "$work/plain.log" 2>&1 || { tail "$work/plain.log"; exit 1; }
run_train 1 "${common[@]}" --gemm-epilogue-fusion --metrics-file "$work/flag.jsonl" > "$work/flag.log" 2>&1 ||
  { tail "$work/flag.log"; exit 1; }
grep -q -- "--gemm-epilogue-fusion: not applied (it needs a CUDA device" "$work/flag.log" ||
  { echo "FAIL: no warning that --gemm-epilogue-fusion is not applied"; tail -5 "$work/flag.log"; exit 1; }
grep -q -- "--gemm-epilogue-fusion: not applied" "$work/plain.log" && { echo "FAIL: warning without the flag"; exit 1; }
compare_losses "$work/plain.jsonl" "$work/flag.jsonl" 0
run_train 1 "${common[@]}" --no-gemm-epilogue-fusion --metrics-file "$work/off.jsonl" > "$work/off.log" 2>&1 ||
  { tail "$work/off.log"; exit 1; }
compare_losses "$work/plain.jsonl" "$work/off.jsonl" 0
run_train 1 "${common[@]}" --no-gemm-dgelu-epilogue --metrics-file "$work/no_dgelu.jsonl" > "$work/no_dgelu.log" 2>&1 ||
  { tail "$work/no_dgelu.log"; exit 1; }
compare_losses "$work/plain.jsonl" "$work/no_dgelu.jsonl" 0
for pair in "--gemm-epilogue-fusion --no-gemm-epilogue-fusion"; do
  # shellcheck disable=SC2086
  if run_train 1 "${common[@]}" $pair > "$work/both.log" 2>&1; then
    echo "FAIL: both flags accepted: $pair"; exit 1
  fi
  grep -q -- "${pair% *} and ${pair#* } contradict each other" "$work/both.log" ||
    { echo "FAIL: no usage error for $pair"; tail -5 "$work/both.log"; exit 1; }
done
echo PASS
