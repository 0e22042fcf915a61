#!/bin/bash
# perf/gpu/setup.sh — build megaton with CUDA + NCCL on a GPU node whose image has CUDA, a CUDA PyTorch (its LibTorch
# and CMake config), OpenMPI and NCCL, but lacks the Debian -dev packages megaton also needs (Boost.Program_options,
# parallel HDF5, nlohmann-json, PCRE2 headers, GoogleTest, ...). Those come as Debian 12 .deb files fetched on a
# Debian machine with perf/gpu/fetch_debs.sh into .deps/, and are unpacked here with `dpkg -x` into a private prefix
# (never into /). Re-runnable: unpacking is skipped while the .deb set is unchanged, cmake/ninja rebuild only what
# changed.
#
#   bash perf/gpu/setup.sh            # = make gpu: unpack deps, configure, build, write BUILD/env.sh
#   source build-gpu/env.sh           # library paths + MPI/NCCL settings for running what was built
#
# Environment overrides: BUILD (build-gpu), DEPS (.deps), JOBS (nproc), CUDA_ARCH (90),
# TARGETS ("megaton megaton_unit_tests megaton_mpi_tests"), SRC (this checkout), TORCH_CMAKE_PREFIX (asks python3),
# NCCL_HOME (the NCCL that torch loads), SETUP_CONFIGURE_ONLY=1 (stop after cmake's configure step),
# BUILD_TOOL_ARGS (passed to ninja/make, e.g. "-k 0" to see every compile error at once), CMAKE_FLAGS (more -D...).
set -euo pipefail

SRC=${SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$SRC"
BUILD=$(realpath -m "${BUILD:-build-gpu}")
DEPS=$(realpath -m "${DEPS:-.deps}")
JOBS=${JOBS:-$(nproc)}
CUDA_ARCH=${CUDA_ARCH:-90}
TARGETS=${TARGETS:-megaton megaton_unit_tests megaton_mpi_tests}
PFX=$DEPS/prefix            # every .deb in $DEPS/debs, unpacked
FALLBACK=$DEPS/fallback-prefix  # .debs in $DEPS/fallback whose shared libraries this system lacks
ARCH_LIB=lib/x86_64-linux-gnu

say() { echo "[setup.sh $(date +%H:%M:%S)] $*"; }
die() { echo "[setup.sh] error: $*" >&2; exit 1; }

# ~~~ 1. unpack the carried Debian packages into $PFX ~~~
[ -d "$DEPS/debs" ] || die "$DEPS/debs is missing: run perf/gpu/fetch_debs.sh on a Debian 12 machine first \
(it downloads the .deb files), then carry .deps to this machine"
stamp="unpack-v1 $( (cd "$DEPS" && ls -l debs fallback 2>/dev/null) | md5sum | cut -d' ' -f1)"  # bump v1 when the unpacking changes
if [ "$(cat "$PFX/.stamp" 2>/dev/null)" != "$stamp" ]; then
  say "unpacking $(ls "$DEPS"/debs/*.deb | wc -l) .deb files into $PFX"
  rm -rf "$PFX" "$FALLBACK"
  mkdir -p "$PFX" "$FALLBACK"
  pids=()
  for deb in "$DEPS"/debs/*.deb; do dpkg -x "$deb" "$PFX" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || die "dpkg -x failed on one of $DEPS/debs/*.deb"; done

  # Fallbacks: a runtime library (libcurl.so.4 for HDF5, ...) is unpacked only if this system has none of that soname,
  # so Debian's copy never shadows the system's; pkgconf only if there is no pkg-config.
  if [ -d "$DEPS/fallback" ]; then
    syslibs=$(ldconfig -p 2>/dev/null || true)  # (not `ldconfig -p | grep -q`: under pipefail, SIGPIPE reads as "missing")
    for deb in "$DEPS"/fallback/*.deb; do
      sonames=$(dpkg -c "$deb" | grep -oE '[^/ ]+\.so\.[0-9]+( |$)' | tr -d ' ' || true)
      need=0
      for so in $sonames; do grep -q "^[[:space:]]*$so " <<<"$syslibs" || need=1; done
      case $(basename "$deb") in pkgconf*|libpkgconf*) command -v pkg-config >/dev/null || need=1 ;; esac
      if [ $need = 1 ]; then say "fallback: unpacking $(basename "$deb")"; dpkg -x "$deb" "$FALLBACK"; fi
    done
  fi

  # Absolute symlinks (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) are made to point inside the prefix.
  find "$PFX" "$FALLBACK" -type l | while read -r link; do
    target=$(readlink "$link")
    case $target in /*) ;; *) continue ;; esac
    for root in "$PFX" "$FALLBACK"; do
      if [ -e "$root$target" ]; then ln -sfn "$root$target" "$link"; break; fi
    done
  done
  # pkg-config files name /usr: rewrite them to the prefix.
  find "$PFX" "$FALLBACK" -name '*.pc' -print0 | xargs -0 -r sed -i -E \
    -e "s#^prefix=/usr#prefix=$PFX/usr#" -e "s#(-[IL])/usr/#\1$PFX/usr/#g" -e "s#^PluginDir=/usr#PluginDir=$PFX/usr#"
  echo "$stamp" > "$PFX/.stamp"
else
  say "deps already unpacked in $PFX"
fi

# ~~~ 2. what the image provides: LibTorch, CUDA, NCCL, MPI ~~~
if [ -z "${TORCH_CMAKE_PREFIX:-}" ]; then
  TORCH_CMAKE_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') ||
    die "python3 cannot import torch: set TORCH_CMAKE_PREFIX to LibTorch's share/cmake folder"
fi
TORCH_LIB=$(realpath -m "$TORCH_CMAKE_PREFIX/../../lib")
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || die "no nvcc on PATH or at /usr/local/cuda/bin: megaton's CUDA build needs the CUDA toolkit"
if [ -z "${NCCL_HOME:-}" ]; then
  # Prefer the NCCL that torch itself loads (the nvidia-nccl wheel), so only one libnccl.so.2 is in the process.
  nccl_h=$(python3 - <<'EOF' 2>/dev/null || true
import os, glob, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for h in sorted(glob.glob(os.path.join(r, "nvidia", "**", "include", "nccl.h"), recursive=True)):
        print(h); raise SystemExit
EOF
)
  [ -n "$nccl_h" ] && NCCL_HOME=$(dirname "$(dirname "$nccl_h")")
fi
export NCCL_HOME=${NCCL_HOME:-}
NCCL_FLAGS=()
if [ -n "$NCCL_HOME" ]; then
  # Named outright: cmake/FindNCCL.cmake would otherwise take a system libnccl.so (found by the name "nccl" before
  # libnccl.so.2 in NCCL_HOME), and megaton would load another NCCL than torch (seen: 2.28.3 beside torch's 2.28.9).
  nccl_lib=$(ls "$NCCL_HOME"/lib/libnccl.so "$NCCL_HOME"/lib/libnccl.so.2 "$NCCL_HOME"/lib64/libnccl.so 2>/dev/null | head -1 || true)
  [ -n "$nccl_lib" ] && NCCL_FLAGS=(-DNCCL_INCLUDE_DIR="$NCCL_HOME/include" -DNCCL_LIBRARY="$nccl_lib")
fi
command -v mpicxx >/dev/null || command -v mpic++ >/dev/null ||
  die "no MPI C++ compiler wrapper (mpicxx) on PATH: megaton needs OpenMPI (libopenmpi-dev)"

# ~~~ 3. environment for the build and for running ~~~
LIBDIRS="$PFX/usr/$ARCH_LIB:$PFX/usr/$ARCH_LIB/hdf5/openmpi:$FALLBACK/usr/$ARCH_LIB:$FALLBACK/$ARCH_LIB:$TORCH_LIB"
[ -n "$NCCL_HOME" ] && LIBDIRS="$LIBDIRS:$NCCL_HOME/lib"
export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:$FALLBACK/usr/bin"
export PKG_CONFIG_PATH="$PFX/usr/$ARCH_LIB/pkgconfig:$PFX/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
mkdir -p "$BUILD"
cat > "$BUILD/env.sh" <<EOF
# Written by perf/gpu/setup.sh: source before running megaton or its tests from $BUILD.
export LD_LIBRARY_PATH="$LIBDIRS\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$BUILD:\$PATH:$FALLBACK/usr/bin"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Never use NVLink multicast on shared hosts (see docs/gpu.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
EOF

# ~~~ 4. configure and build ~~~
# HDF5: FindHDF5 must take Debian's parallel HDF5 from HDF5_ROOT, not an h5cc wrapper of the image (a serial one, or
# Debian's own, which names /usr): a wrapper that fails (/bin/false) makes it search HDF5_ROOT and read H5pubconf.h.
say "torch cmake: $TORCH_CMAKE_PREFIX; nvcc: $NVCC; NCCL_HOME: ${NCCL_HOME:-<system>}; mpicxx: $(command -v mpicxx || command -v mpic++)"
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # CMake 4 refuses configs that ask for < 3.5 (Debian's, torch's)
# torch's CMake config ignores CMAKE_CUDA_ARCHITECTURES and adds its own -gencode flags from TORCH_CUDA_ARCH_LIST
# (else from the GPU it finds, or a long default list on a node without one): make it the same architecture.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$(echo "$CUDA_ARCH" | sed -E 's/^([0-9]+)([0-9])$/\1.\2/')}
# shellcheck disable=SC2046
cmake -S "$SRC" -B "$BUILD" $(command -v ninja >/dev/null && echo -G Ninja) \
  -DCMAKE_BUILD_TYPE=Release -DMEGATON_CUDA=ON -DMEGATON_BENCHMARKS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_PREFIX_PATH="$PFX/usr;$TORCH_CMAKE_PREFIX" \
  -DHDF5_ROOT="$PFX/usr/$ARCH_LIB/hdf5/openmpi" -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON \
  -DHDF5_C_COMPILER_EXECUTABLE=/bin/false \
  -DCMAKE_CXX_FLAGS="-idirafter $PFX/usr/include/$(basename "$ARCH_LIB")" \
  "${NCCL_FLAGS[@]}" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 ${CMAKE_FLAGS:-}
[ "${SETUP_CONFIGURE_ONLY:-0}" = 1 ] && { say "configured $BUILD (SETUP_CONFIGURE_ONLY=1)"; exit 0; }
say "building $TARGETS with -j$JOBS"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j "$JOBS" --target $TARGETS ${BUILD_TOOL_ARGS:+-- $BUILD_TOOL_ARGS}
say "done: source $BUILD/env.sh, then $BUILD/megaton comm-bench --distributed-backend nccl (docs/gpu.md)"
