#!/bin/bash
# install-modulefiles.sh PREFIX [VERSION] — writes megaton's modulefiles for an installation under PREFIX:
#   PREFIX/modules/megaton/VERSION.lua   Lmod (from modules/megaton.lua)
#   PREFIX/modules/megaton/VERSION       Tcl, environment-modules (from modules/megaton.tcl)
# so that `module use PREFIX/modules; module load megaton` puts PREFIX/bin on PATH with either module system (Lmod
# prefers the .lua file when both are present; environment-modules only reads files starting with #%Module).
# VERSION defaults to what PREFIX/bin/megaton --version reports, else to CMakeLists.txt's project version.
# Honours DESTDIR like `cmake --install`: files go under $DESTDIR$PREFIX but name PREFIX.
# Called by `make install PREFIX=...` after `cmake --install`.
set -euo pipefail

usage() {
  echo "usage: $0 PREFIX [VERSION]" >&2
  exit 2
}
[[ $# -ge 1 && $# -le 2 && -n "$1" ]] || usage
src_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=$1
[[ "$prefix" == /* ]] || prefix="$PWD/$prefix"
prefix=$(realpath -m "$prefix")
bad_chars='[][{}|&"'\''\\$`[:space:]]'
if [[ "$prefix" =~ $bad_chars ]]; then
  echo "install-modulefiles.sh: PREFIX '$prefix' contains a quote, brace, bracket, backslash, \$ or space;" \
    "modulefiles cannot name it safely: choose another PREFIX" >&2
  exit 2
fi
destroot="${DESTDIR:-}$prefix"

version=${2:-}
if [[ -z "$version" && -x "$destroot/bin/megaton" ]]; then
  version=$("$destroot/bin/megaton" --version 2>/dev/null | awk '{print $2}') || version=""
fi
if [[ -z "$version" ]]; then
  version=$(sed -n 's/^project(megaton VERSION \([0-9][0-9.]*\).*/\1/p' "$src_dir/../CMakeLists.txt")
fi
[[ "$version" =~ ^[0-9A-Za-z._+-]+$ ]] || {
  echo "install-modulefiles.sh: cannot tell megaton's version (got '$version'); pass it: $0 PREFIX VERSION" >&2
  exit 2
}

out="$destroot/modules/megaton"
mkdir -p "$out"
substitute() {  # substitute TEMPLATE OUTPUT
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" "$1" >"$2.tmp"
  if grep -q '@[A-Z]*@' "$2.tmp"; then
    echo "install-modulefiles.sh: unsubstituted placeholder left in $2" >&2
    exit 1
  fi
  chmod 644 "$2.tmp"
  mv "$2.tmp" "$2"
  echo "-- Installing: $2"
}
substitute "$src_dir/megaton.lua" "$out/$version.lua"
substitute "$src_dir/megaton.tcl" "$out/$version"
echo "modulefiles for megaton $version: module use $prefix/modules && module load megaton"
