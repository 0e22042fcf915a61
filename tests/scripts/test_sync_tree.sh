#!/bin/bash
# perf/gpu/sync_tree.py makes a folder equal to a `git archive` snapshot while keeping the time stamps of the files it
# leaves unchanged and never touching the kept build folder, so that a warm GPU machine's build of an earlier call
# stays valid (perf/gpu/batch_lib.sh). Checked: the first sync equals a plain unpack; a second sync of the same
# snapshot writes nothing; a changed file is rewritten (newer than the build), a new one added, a removed one deleted,
# a mode change applied, and build-gpu/ and a linked data folder survive.
set -euo pipefail
SRC=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sync() { python3 "$SRC/perf/gpu/sync_tree.py" "$1" "$work/dest" build-gpu; }
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$work/v1/src/ops" "$work/v1/perf" "$work/v1/data" "$work/elsewhere"
echo 'int a;' > "$work/v1/src/ops/a.cpp"
echo 'int b;' > "$work/v1/src/ops/b.cpp"
printf '#!/bin/sh\n' > "$work/v1/perf/run.sh"
echo 'tracked' > "$work/v1/data/README"
tar -cf "$work/v1.tar" -C "$work/v1" .

out=$(sync "$work/v1.tar")
[[ $out == "sync_tree: 4 written, 0 removed, 0 unchanged in "* ]] || fail "first sync: $out"
mkdir -p "$work/plain" && tar -xf "$work/v1.tar" -C "$work/plain"
diff -r "$work/plain" "$work/dest" || fail "the first sync differs from a plain unpack"

mkdir -p "$work/dest/build-gpu" && echo 'object' > "$work/dest/build-gpu/a.o"
ln -s "$work/elsewhere" "$work/dest/data/downloaded"  # what batch_lib.sh links after the sync
touch -d '2020-01-01 00:00' "$work/dest/src/ops/a.cpp" "$work/dest/src/ops/b.cpp" "$work/dest/build-gpu/a.o"
out=$(sync "$work/v1.tar")
[[ $out == "sync_tree: 0 written, 0 removed, 4 unchanged in "* ]] || fail "second sync of the same snapshot: $out"
[ "$(stat -c %Y "$work/dest/src/ops/a.cpp")" = "$(stat -c %Y "$work/dest/build-gpu/a.o")" ] ||
  fail "an unchanged file got a new time stamp"

mkdir -p "$work/v2" && cp -a "$work/v1/." "$work/v2/"
echo 'int a = 1;' > "$work/v2/src/ops/a.cpp"  # changed
rm "$work/v2/src/ops/b.cpp"                   # removed
echo 'int c;' > "$work/v2/src/ops/c.cpp"      # new
chmod +x "$work/v2/perf/run.sh"               # mode only
tar -cf "$work/v2.tar" -C "$work/v2" .
out=$(sync "$work/v2.tar")
[[ $out == "sync_tree: 2 written, 1 removed, 2 unchanged in "* ]] || fail "sync of a changed snapshot: $out"
[ "$(cat "$work/dest/src/ops/a.cpp")" = 'int a = 1;' ] || fail "the changed file was not rewritten"
[ "$(stat -c %Y "$work/dest/src/ops/a.cpp")" -gt "$(stat -c %Y "$work/dest/build-gpu/a.o")" ] ||
  fail "the changed file is not newer than the build"
[ ! -e "$work/dest/src/ops/b.cpp" ] || fail "the removed file is still there"
[ -x "$work/dest/perf/run.sh" ] || fail "the mode change was not applied"
[ "$(cat "$work/dest/build-gpu/a.o")" = 'object' ] || fail "build-gpu was touched"
[ -L "$work/dest/data/downloaded" ] && [ -d "$work/elsewhere" ] || fail "the linked data folder was removed"
diff -r -x build-gpu -x downloaded "$work/v2" "$work/dest" || fail "the synced tree differs from the snapshot"
echo "sync_tree: ok"
