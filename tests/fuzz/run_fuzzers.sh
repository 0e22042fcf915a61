#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for a bounded time each: run_fuzzers.sh FUZZ_BUILD_DIR [SECONDS]
# (default 60). Each starts from its seed corpus (tests/fuzz/corpus/<target>/, read-only: new inputs go to a scratch
# directory), under ASan and UBSan, with a 2 GiB memory limit and 10 s per input: any crash, sanitizer report, leak,
# timeout or escaping exception fails the run, and the input that caused it is kept in FUZZ_BUILD_DIR/findings/.
set -euo pipefail
B=$(mkdir -p "$1" && cd "$1" && pwd)
SECONDS_EACH=${2:-60}
HERE=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$B/findings"
failed=()
for seeds in "$HERE"/corpus/*/; do
  name=$(basename "$seeds")
  exe="$B/fuzz/${name}_fuzz"
  [ -x "$exe" ] || { echo "FAIL: $exe not built"; exit 1; }
  mkdir -p "$work/$name"
  echo "== $name: ${SECONDS_EACH}s from $(find "$seeds" -type f | wc -l) seeds"
  if ! (cd "$work" && TMPDIR="$work" "$exe" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 \
          -print_final_stats=1 -artifact_prefix="$B/findings/${name}-" "$work/$name" "$seeds" \
          > "$work/$name.log" 2>&1); then
    tail -40 "$work/$name.log"
    failed+=("$name")
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/$name.log" | tr '\n' ' '
  echo
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL: findings in ${failed[*]} (inputs in $B/findings/)"
  exit 1
fi
echo "PASS: no findings"
