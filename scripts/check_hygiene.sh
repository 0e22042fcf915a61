#!/bin/bash
# scripts/check_hygiene.sh [REPO]: the repository describes the product as it is. Fails (exit 1) and lists each hit when
#   - a tracked file narrates history: numbered runs ("run 25.1"), ordinal or numbered sessions, issue numbers,
#     instructions tied to one remote-GPU setup, or a date (dates belong in git history, CHANGELOG.md, the dated GPU
#     baseline reports and the provenance header of a measured-data file);
#   - a file under docs/ or perf/ is larger than 1 MiB (raw logs and result dumps are not committed);
#   - a C++/CUDA source is not clang-formatted (clang-format --dry-run -Werror), when clang-format is installed.
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2
fail=0

ordinals='first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth'
ordinals+='|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|twenty-[a-z]+|thirtieth'
history="\\bruns? [0-9]+\\.[0-9]+\\b|\\b($ordinals)( [0-9-]+)? (GPU )?sessions?\\b|\\bsessions? [0-9]+\\b|session[0-9]+"
history+="|\\bissues? #?[0-9]+\\b|\\b(this|next|last|previous|earlier|later) (GPU )?session\\b|device tool|workplace"
history+="|lent (GPU|machine)|run\\(command=|\\b20[0-9]{2}-[01][0-9]-[0-3][0-9](?!T)\\b"  # ISO timestamps in sample output are fine
# Files allowed to carry dates: the user-facing changelog, the dated baseline reports, measured data with provenance.
allowed=(':!CHANGELOG.md' ':!perf/gpu/baselines/*' ':!*.csv' ':!scripts/check_hygiene.sh' ':!data/*.jsonl')
hits=$(git grep -nIiP "$history" -- . "${allowed[@]}")
if [ -n "$hits" ]; then
  echo "hygiene: history narrated in the tree (say it in git log or CHANGELOG.md instead):"
  echo "$hits" | cut -c1-200
  fail=1
fi

big=$(git ls-files -z docs perf | xargs -0 -r stat -c '%s %n' | awk '$1 > 1048576 {print "  " $2 " (" $1 " bytes)"}')
if [ -n "$big" ]; then
  echo "hygiene: files over 1 MiB under docs/ or perf/ (raw results are not committed):"
  echo "$big"
  fail=1
fi

if command -v clang-format > /dev/null; then
  mapfile -t sources < <(git ls-files 'src/*.cpp' 'src/*.h' 'tests/*.cpp' 'tests/*.h' 'perf/*.cpp' 'perf/*.h' \
    'kernels/*.cu' 'kernels/*.cuh' 'kernels/*.h' 'dev/*.cpp')
  if ! clang-format --dry-run -Werror "${sources[@]}" > /tmp/hygiene-format.log 2>&1; then
    echo "hygiene: not clang-formatted (make format):"
    grep -E '^[^ ].*error:' /tmp/hygiene-format.log | cut -d: -f1 | sort -u | sed 's/^/  /'
    fail=1
  fi
else
  echo "hygiene: clang-format not installed; formatting not checked"
fi

[ $fail = 0 ] && echo "hygiene: clean"
exit $fail
