#!/bin/bash
# perf/gpu/fetch_debs.sh — run on a Debian 12 (bookworm) amd64 machine with network: downloads the .deb files that
# perf/gpu/setup.sh unpacks on a GPU node whose image lacks megaton's -dev libraries. Nothing is installed here.
#   .deps/debs/      always unpacked into .deps/prefix (headers, CMake configs, libraries the image does not have)
#   .deps/fallback/  unpacked into .deps/fallback-prefix only for sonames the GPU node lacks (HDF5's libcurl.so.4 and
#                    its dependencies; pkgconf when there is no pkg-config)
# About 20 MiB in all. Usage: bash perf/gpu/fetch_debs.sh [DEPS_DIR=.deps]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
DEPS=${1:-.deps}
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || echo "fetch_debs.sh: warning: this is ${PRETTY_NAME:-unknown}, not Debian 12; \
the .deb versions will differ from the ones docs/gpu.md was checked with" >&2

# Boost.Program_options (+ the Boost headers it includes), parallel HDF5 built on OpenMPI (libmpi.so.40),
# JSON, PCRE2, zlib/ISA-L/lzma headers, GoogleTest, cpp-httplib (megaton serve; its header needs OpenSSL's and Brotli's,
# whose runtime libraries the image has); the runtime libraries only where the -dev symlinks point at them.
ALWAYS="libboost-program-options1.74.0 libboost-program-options1.74-dev libboost1.74-dev
  libhdf5-openmpi-103-1 libhdf5-openmpi-dev libaec0 libsz2 libaec-dev
  nlohmann-json3-dev libsimdjson-dev libsimdjson14
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  zlib1g-dev zlib1g libisal-dev libisal2 liblzma-dev liblzma5 libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libbrotli-dev"
# Debian 12's libcurl4 needs OpenLDAP 2.5 (Ubuntu 24.04 has 2.6): carried, used only where missing.
FALLBACK="libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libbrotli1 libldap-2.5-0 libsasl2-2
  pkgconf pkgconf-bin libpkgconf3"

mkdir -p "$DEPS/debs" "$DEPS/fallback"
# apt-get download writes into the current directory; as root it warns that _apt cannot write there (harmless).
(cd "$DEPS/debs" && apt-get download $ALWAYS 2>&1 | grep -v '^Get:' || true)
(cd "$DEPS/fallback" && apt-get download $FALLBACK 2>&1 | grep -v '^Get:' || true)
for p in $ALWAYS; do ls "$DEPS/debs/${p}_"*.deb >/dev/null 2>&1 || { echo "fetch_debs.sh: $p was not downloaded" >&2; exit 1; }; done
for p in $FALLBACK; do ls "$DEPS/fallback/${p}_"*.deb >/dev/null 2>&1 || { echo "fetch_debs.sh: $p was not downloaded" >&2; exit 1; }; done
du -sh "$DEPS/debs" "$DEPS/fallback"
