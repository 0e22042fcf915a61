#!/bin/bash
# The megaton binary's command line: usage, per-subcommand --help, unknown flags and inconsistent configurations are
# refused with exit code 2 and a message naming the flag, and --dry-run prints the resolved layout.
set -u
megaton=$1/megaton
source "$(dirname "$0")/../support/expect_lib.sh"  # expect NAME WANT_RC PATTERN COMMAND...; fail
small="--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 2 --train-iters 10"
expect "usage"               2 "usage: megaton <command>" $megaton
expect "unknown command"     2 "unknown command 'trian' \(did you mean 'train'\?\)" $megaton trian
expect "help CMD"            0 "usage: megaton convert" $megaton help convert
expect "help typo"           2 "unknown command 'conver' \(did you mean 'convert'\?\)" $megaton help conver
expect "shortest defaults"   0 "adam-beta1 arg \(=0.9\) " $megaton train --help
expect "None defaults"       0 "num-layers arg \(=None\) " $megaton train --help
expect "train --help"        0 "--tensor-model-parallel-size" $megaton train --help
expect "comm-bench --help"   0 "--maxbytes" $megaton comm-bench --help
expect "unknown flag"        2 "did you mean --num-layers" $megaton train $small --num-layer 3
expect "indivisible batch"   2 "global-batch-size \(6\) must be divisible by --micro-batch-size x data-parallel size \(2 x 2" \
  $megaton train $small --global-batch-size 6 --dry-run --world-size 2
expect "bad value"           2 "num-layers" $megaton train $small --num-layers abc
expect "dry run"             0 "TP=2 x PP=2 x DP=2" $megaton train $small --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --global-batch-size 16 --dry-run --world-size 8
expect "dry run flops"       0 "model FLOPs per iteration" $megaton train $small --dry-run
# --help snapshots: the groups in order (the command's own first, then Megatron's) and generate's own group whole.
# After a deliberate change: `megaton CMD --help | grep -E '^[a-zA-Z].*:$' > tests/cli/help/CMD.sections`.
help_dir=$(dirname "$0")/help
for cmd in train generate eval; do
  if ! diff <($megaton $cmd --help | grep -E '^[a-zA-Z].*:$') "$help_dir/$cmd.sections" > /tmp/megaton_help_$$.diff; then
    echo "FAIL: megaton $cmd --help groups differ from $help_dir/$cmd.sections:"; cat /tmp/megaton_help_$$.diff; fail=1
  fi
done
if ! diff <($megaton generate --help | awk '/^text generation:$/{on=1} on && /^$/{exit} on' | sed 's/[ ]*$//') \
  "$help_dir/generate.own" > /tmp/megaton_help_$$.diff; then
  echo "FAIL: megaton generate --help's own group differs from $help_dir/generate.own:"; cat /tmp/megaton_help_$$.diff
  fail=1
fi
rm -f /tmp/megaton_help_$$.diff
# Hostile sizes are refused by name before anything is allocated.
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
make_byte_tokenizer "$work/tok"
tiny="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --micro-batch-size 1 --train-iters 2 --vocab-size 128
  --data-path $work/synth_text_document --device cpu --distributed-backend mpi"
# shellcheck disable=SC2086
expect "huge positions"      2 "needs .* GiB per rank for its weights.*--max-position-embeddings 2147483647" \
  $megaton train $tiny --seq-length 2147483647 --max-position-embeddings 2147483647
# shellcheck disable=SC2086
expect "huge hidden"         2 "needs .* GiB per rank for its weights.*--hidden-size 4000000" \
  $megaton train $tiny --seq-length 16 --hidden-size 4000000
expect "prompt dir"          2 "sample-input-file $work: is a directory" \
  $megaton generate --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 \
  --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok" --device cpu --distributed-backend mpi \
  --sample-input-file "$work"
# A usage error on 3 ranks is printed once, by rank 0 of the launcher, with the job's size in its tag.
rc=0
out=$("$MPIRUN" --oversubscribe -np 3 $megaton train --num-layer 3 2>&1) || rc=$?
n=$(grep -c "usage error: megaton train: unrecognised option '--num-layer'" <<< "$out")
if [ "$n" != 1 ] || [ "$rc" != 2 ] || ! grep -q "^\[r0/3\] megaton: usage error" <<< "$out"; then
  echo "FAIL: usage error on 3 ranks printed $n times, exit code $rc:"; echo "$out" | head -8; fail=1
fi
# An error found after MPI starts, on every rank (a missing tokenizer file): printed once, every rank ends through
# MPI_Finalize with the data error's code 3, and no MPI_ABORT banner, on 4 ranks and on one.
missing="--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 16 --micro-batch-size 1 --train-iters 2
  --data-path $work/synth_text_document --device cpu --distributed-backend mpi --tokenizer-type GPT2BPETokenizer
  --vocab-file $work/no-vocab.json --merge-file $work/no-merges.txt"
for np in 4 1; do
  rc=0
  # shellcheck disable=SC2086
  out=$("$MPIRUN" --oversubscribe -np $np $megaton train $missing 2>&1) || rc=$?
  # Counted as matches, not lines: mpirun forwards stdout and stderr separately and may splice the error line into
  # one of the arguments dump's.
  n=$(grep -o "megaton: [a-z]* error" <<< "$out" | wc -l)
  if [ "$n" != 1 ] || [ "$rc" != 3 ] || ! grep -q "\[r0/$np\] megaton: data error: cannot open --vocab-file" <<< "$out" ||
    grep -q "MPI_ABORT" <<< "$out"; then
    echo "FAIL: a data error on $np ranks printed $n megaton lines, exit code $rc:"; echo "$out" | grep -v "^  " | head -12
    fail=1
  fi
done
exit $fail
