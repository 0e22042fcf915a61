#!/usr/bin/env bash
# Validates a checkpoint directory against SPEC.md (version 1): tracker files, directory names, no reader-visible
# temporaries, and every published file through `megaton inspect --json` (format, completeness, manifest,
# per-dataset attributes, every CRC-32), plus the manifest rules of §2.2/§3 checked independently in Python.
# Usage: validate.sh SAVE_DIR [MEGATON_BINARY]        exit 0: valid; 1: problems (listed)
set -uo pipefail
DIR=${1:?usage: validate.sh SAVE_DIR [megaton]}
MEGATON=${2:-megaton}
problems=0
bad() { echo "INVALID: $*"; problems=$((problems + 1)); }

[ -d "$DIR" ] || { echo "INVALID: $DIR is not a directory"; exit 1; }
for t in latest latest_checkpointed_iteration.txt; do
  [ -f "$DIR/$t" ] || { bad "missing tracker $t"; continue; }
  txt=$(tr -d '[:space:]' <"$DIR/$t")
  [[ "$txt" =~ ^([0-9]+|release)$ ]] || bad "$t: '$txt' is neither digits nor 'release'"
done
if [ -f "$DIR/latest" ] && [ -f "$DIR/latest_checkpointed_iteration.txt" ]; then
  cmp -s <(tr -d '[:space:]' <"$DIR/latest") <(tr -d '[:space:]' <"$DIR/latest_checkpointed_iteration.txt") ||
    bad "the two tracker files disagree"
fi
latest=$(tr -d '[:space:]' <"$DIR/latest" 2>/dev/null || echo "")
if [[ "$latest" =~ ^[0-9]+$ ]]; then
  printf -v want "iter_%07d" "$((10#$latest))"
  [ -f "$DIR/$want/model_optim.h5" ] || bad "latest names $want but $DIR/$want/model_optim.h5 does not exist"
elif [ "$latest" = release ]; then
  [ -f "$DIR/release/model_optim.h5" ] || bad "latest says release but release/model_optim.h5 does not exist"
fi
for d in "$DIR"/*/; do
  n=$(basename "$d")
  case "$n" in
    release) ;;
    *.tmp-*|*.old-*) echo "note: $n is an interrupted save (ignored by readers)"; continue ;;
    iter_*) [[ "$n" =~ ^iter_[0-9]{7,}$ ]] || bad "$n: not iter_ and 7+ digits" ;;
    *) echo "note: unrelated directory $n"; continue ;;
  esac
  f="$d/model_optim.h5"
  [ -f "$f" ] || { bad "$n has no model_optim.h5"; continue; }
  if ! out=$("$MEGATON" inspect --json "$f" 2>&1); then
    bad "$n: megaton inspect failed: $(echo "$out" | tail -3)"
    continue
  fi
  tmpj=$(mktemp)
  printf '%s' "$out" >"$tmpj"
  python3 - "$n" "$tmpj" <<'PY' || problems=$((problems + 1))
import json, re, sys
name = sys.argv[1]
j = json.load(open(sys.argv[2]))
errs = []
if j["format_version"] != 1: errs.append("format_version %r" % j["format_version"])
it = j["iteration"]
if name == "release" and it != -1: errs.append("release directory holds iteration %d" % it)
if name.startswith("iter_") and int(name[5:]) != it: errs.append("directory says %s, file says %d" % (name, it))
dtypes = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "uint8"}
t = j["tensors"]
for p, r in t.items():
    if not re.match(r"^(model/[^/]+|optim/[^/]+/[^/]+|rng/[^/]+)$", p): errs.append("bad path %s" % p)
    if r.get("dtype") not in dtypes: errs.append("%s: dtype %r" % (p, r.get("dtype")))
    if not isinstance(r.get("crc32"), int) or not 0 <= r["crc32"] < 2**32: errs.append("%s: crc32" % p)
    if not all(isinstance(s, int) and s >= 0 for s in r.get("shape", [None])): errs.append("%s: shape" % p)
    if p.startswith("rng/") and (len(r["shape"]) != 2 or r["shape"][0] != j["saved_layout"]["world"]):
        errs.append("%s: not [world, n]" % p)
    if "padded_rows" in r:
        pad = p + ".vocab_padding"
        if pad not in t: errs.append("%s: padded but %s missing" % (p, pad))
        elif t[pad]["shape"][0] + r["shape"][0] != r["padded_rows"]: errs.append("%s: padding rows do not add up" % p)
    if r.get("role") == "vocab_padding" and p[: -len(".vocab_padding")] not in t: errs.append("%s: orphan padding" % p)
for e in errs: print("INVALID: %s: %s" % (name, e))
sys.exit(1 if errs else 0)
PY
  rm -f "$tmpj"
  echo "ok: $n (iteration $(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["iteration"])'))"
done
[ $problems -eq 0 ] && echo "VALID: $DIR" && exit 0
echo "$problems problem(s)"
exit 1
