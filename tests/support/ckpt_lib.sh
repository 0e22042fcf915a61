#!/usr/bin/env bash
# Shared start of the checkpoint scripts (tests/checkpoint/*_test.sh) (sourced; not a test itself):
#   B=$1; source "$(dirname "$0")/../support/ckpt_lib.sh"; ckpt_setup NAME
# sets MPIRUN, PROBE (tests/ckpt_probe), M (megaton), D (a scratch directory removed at exit), defines fail(), and
# saves a checkpoint from 2 ranks at TP=2, iteration 5, in $D/a.
MPIRUN=${MPIRUN:-mpirun}
PROBE=$B/tests/ckpt_probe
M=$B/megaton
fail() { echo "FAIL: $*"; exit 1; }

ckpt_setup() {
  D=$(mktemp -d "${TMPDIR:-/tmp}/megaton_$1_XXXXXX")
  trap 'rm -rf "$D"' EXIT
  "$MPIRUN" --oversubscribe -np 2 "$PROBE" save "$D/a" 2 5 >"$D/save.log" 2>&1 || { cat "$D/save.log"; fail "save"; }
}
