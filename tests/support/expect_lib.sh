#!/bin/bash
# expect NAME WANT_RC PATTERN COMMAND...: runs COMMAND, prints PASS NAME when it exits WANT_RC and its output (stdout
# and stderr) matches the extended regex PATTERN, else FAIL with the output and sets fail=1. Sourced by the command-line
# test scripts (tests/cli/cli_test.sh, tests/plan/plan_cli_test.sh), which exit $fail at the end.
fail=0
expect() {
  local name=$1 want=$2 pat=$3
  shift 3
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq $want ] && grep -qE -- "$pat" <<<"$out"; then echo "PASS $name"; else
    echo "FAIL $name: exit $rc (wanted $want), output:"; echo "$out" | head -30; fail=1; fi
}
