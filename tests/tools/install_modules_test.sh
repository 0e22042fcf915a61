#!/bin/bash
# test_install_modules.sh BUILD_DIR SOURCE_DIR — `make install PREFIX=...` and the modulefiles:
#   1. `make install PREFIX=$tmp BUILD=BUILD_DIR` (cmake --install + modules/install-modulefiles.sh) lays out
#      bin/megaton, share/megaton/slurm/{templates, megaton-slurm.sh, local-cluster.sh}, share/doc/megaton/*.md and
#      modules/megaton/VERSION{,.lua}, with PREFIX and VERSION substituted;
#   2. the installed binary runs from its new place (its libraries resolve);
#   3. in a fresh login-like bash: source the module system's init, `module use $tmp/modules; module load megaton;
#      megaton --version` — with Lmod (the .lua file, then the Tcl file alone) and/or environment-modules (Tcl),
#      whichever are installed (as root with neither, Lmod is installed; otherwise SKIPPED); `module unload` undoes it.
set -euo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
SRC=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
WORK=$(mktemp -d /tmp/megaton-install-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() {
  echo "FAIL: test_install_modules: $*" >&2
  exit 1
}
PREFIX="$WORK/prefix"
version=$("$BUILD/megaton" --version | awk '{print $2}')
[[ -n "$version" ]] || fail "cannot read the build's version"

# ~~~ 1. make install ~~~
# The install recipe itself, without its `build` prerequisite (-o build): ctest runs after the build, and the
# megaton target is all an install needs.
make -s -C "$SRC" -o build install PREFIX="$PREFIX" BUILD="$BUILD" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; fail "make install failed"; }
for f in bin/megaton share/megaton/slurm/smoke.slurm share/megaton/slurm/tr1-13B.slurm \
  share/megaton/slurm/gpt3_175B.slurm share/megaton/slurm/tr11-176B-bloom.slurm \
  share/megaton/slurm/megaton-slurm.sh share/megaton/slurm/local-cluster.sh \
  share/doc/megaton/slurm.md share/doc/megaton/install.md \
  "modules/megaton/$version.lua" "modules/megaton/$version"; do
  [[ -f "$PREFIX/$f" ]] || fail "make install did not install $f"
done
[[ -x "$PREFIX/share/megaton/slurm/smoke.slurm" ]] || fail "templates lost their execute bit"
grep -q "@PREFIX@\|@VERSION@" "$PREFIX/modules/megaton/$version.lua" "$PREFIX/modules/megaton/$version" &&
  fail "placeholders left in the installed modulefiles"
grep -qF "local prefix = \"$PREFIX\"" "$PREFIX/modules/megaton/$version.lua" || fail "Lua modulefile lacks PREFIX"
grep -qF "set prefix {$PREFIX}" "$PREFIX/modules/megaton/$version" || fail "Tcl modulefile lacks PREFIX"
head -n 1 "$PREFIX/modules/megaton/$version" | grep -q '^#%Module' || fail "Tcl modulefile lacks the #%Module cookie"

# ~~~ 2. the installed binary runs on its own ~~~
[[ "$(env -i PATH=/usr/bin:/bin "$PREFIX/bin/megaton" --version)" == "megaton $version" ]] ||
  fail "installed megaton does not run: $(env -i "$PREFIX/bin/megaton" --version 2>&1 | tail -n 2)"
# An unsafe PREFIX is refused by name instead of producing a broken modulefile.
if out=$(bash "$SRC/modules/install-modulefiles.sh" "$WORK/bad prefix" 2>&1); then
  fail "install-modulefiles.sh accepted a PREFIX with a space"
else
  grep -q "PREFIX '.*bad prefix' contains" <<<"$out" || fail "unclear error for a bad PREFIX: $out"
fi

# ~~~ 3. module load ~~~
LMOD_INIT=/usr/share/lmod/lmod/init/bash
ENVMOD_INIT=/usr/share/modules/init/bash
if [[ ! -f "$LMOD_INIT" && ! -f "$ENVMOD_INIT" ]]; then
  if [[ "$(id -u)" != 0 ]]; then
    echo "SKIPPED: test_install_modules: module load (neither Lmod nor environment-modules installed; not root)"
    echo "test_install_modules: install layout PASSED"
    exit 0
  fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends lmod \
    >/dev/null 2>&1 || fail "apt-get install lmod failed"
fi

# module_check SYSTEM INIT MODULEPATH EXPECTED_FILE: a clean login-ish shell loads megaton and finds it on PATH.
module_check() {
  local system=$1 init=$2 modpath=$3 expect=$4 out
  out=$(env -i HOME="$WORK" USER=root TERM=dumb PATH=/usr/local/bin:/usr/bin:/bin bash --noprofile --norc -c '
      set -e
      source "$1"
      module use "$2"
      command -v megaton >/dev/null && { echo "megaton already on PATH before module load"; exit 1; }
      module load megaton
      echo "which=$(command -v megaton)"
      megaton --version
      echo "templates=$MEGATON_SLURM_TEMPLATES"
      if [ "$3" = Lmod ]; then echo "location=$(module --location show megaton 2>&1)"; fi
      module unload megaton
      if command -v megaton >/dev/null; then echo "still on PATH after unload"; else echo "unloaded"; fi
    ' _ "$init" "$modpath" "$system" 2>&1) || fail "$system: module load failed: $out"
  echo "--- $system ($modpath)"
  echo "$out"
  grep -qx "which=$PREFIX/bin/megaton" <<<"$out" || fail "$system: megaton not on PATH from $PREFIX/bin"
  grep -qx "megaton $version" <<<"$out" || fail "$system: megaton --version is not $version"
  grep -qx "templates=$PREFIX/share/megaton/slurm" <<<"$out" || fail "$system: MEGATON_SLURM_TEMPLATES not set"
  grep -qx "unloaded" <<<"$out" || fail "$system: module unload left megaton on PATH"
  if [[ "$system" == Lmod ]]; then
    grep -qx "location=$expect" <<<"$out" || fail "Lmod loaded $(grep location= <<<"$out"), expected $expect"
  fi
}
tested=0
if [[ -f "$LMOD_INIT" ]]; then
  module_check Lmod "$LMOD_INIT" "$PREFIX/modules" "$PREFIX/modules/megaton/$version.lua"
  tested=$((tested + 1))
  if command -v tclsh >/dev/null; then  # Lmod reads Tcl modulefiles through tclsh
    mkdir -p "$WORK/tcl-only/megaton"
    cp "$PREFIX/modules/megaton/$version" "$WORK/tcl-only/megaton/"
    module_check Lmod "$LMOD_INIT" "$WORK/tcl-only" "$WORK/tcl-only/megaton/$version"
  fi
fi
if [[ -f "$ENVMOD_INIT" ]]; then
  module_check environment-modules "$ENVMOD_INIT" "$PREFIX/modules" "$PREFIX/modules/megaton/$version"
  tested=$((tested + 1))
fi
[[ $tested -gt 0 ]] || fail "no module system to test"
echo "test_install_modules: PASSED"
