#!/bin/bash
# dev/gpu/crash_report.sh OUTFILE PROGRAM [ARGS...] — a crashing test on the GPU node, explained: the program under
# gdb (a backtrace of every thread at the signal) when the node has gdb, else run plainly with glibc's backtrace on
# SIGSEGV through the LD_PRELOADed libSegFault where it exists. Run after perf/gpu/setup.sh built
# the tree (source "$BUILD/env.sh" first for LibTorch's libraries), e.g. after a unit test died with "Segmentation fault":
#   bash dev/gpu/crash_report.sh /tmp/crash.txt build-gpu/tests/megaton_unit_tests --gtest_filter=X.Y
set -uo pipefail
out=${1:?usage: crash_report.sh OUTFILE PROGRAM [ARGS...]}
shift
{
  echo "# $*"
  if command -v gdb > /dev/null; then
    timeout 300 gdb -batch -ex 'set pagination off' -ex run -ex 'thread apply all bt 30' --args "$@" 2>&1
  else
    echo "(no gdb on this node)"
    seg=$(ls /usr/lib/x86_64-linux-gnu/libSegFault.so /lib/x86_64-linux-gnu/libSegFault.so 2> /dev/null | head -1)
    if [ -n "$seg" ]; then LD_PRELOAD=$seg timeout 300 "$@" 2>&1; else timeout 300 "$@" 2>&1; fi
    echo "[exit code $?]"
  fi
} > "$out"
tail -40 "$out"
