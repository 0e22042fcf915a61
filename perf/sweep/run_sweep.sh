#!/bin/bash
# perf/sweep/run_sweep.sh CONFIGS [OUTDIR] — run `megaton train` over the configurations listed in CONFIGS (one per
# line, key=value; see perf/sweep/README.md), beside the PyTorch peer when torch with CUDA is importable, and write
# OUTDIR/sweep.{csv,json,png} (default OUTDIR: /tmp/megaton-sweep-<date>-<machine>). Environment:
#   BUILD    build directory holding megaton (default: build, or build-gpu when it exists and has a CUDA megaton)
#   MACHINE  name in the results (default: the GPU's name, e.g. h200, else cpu-<cores>core)
#   MPIRUN   launcher for multi-rank configurations (default mpirun; --oversubscribe is added)
#   DATA     a Megatron dataset prefix (default: random tokens in a temporary directory)
#   PEER     the peer script (default perf/gpu/torch_gpt_bench.py); PEER_PYTHON the Python with torch (python3)
#   PYTHON   the Python running sweep.py (default python3, or /usr/bin/python3 when only it has matplotlib)
set -euo pipefail
CONFIGS=$(realpath "${1:?usage: run_sweep.sh CONFIGS [OUTDIR]}")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
if [ -z "${MACHINE:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    MACHINE=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200|a100|b200|l40s|v100' |
      tr 'A-Z' 'a-z' || true)
    MACHINE=${MACHINE:-gpu}
    n=$(nvidia-smi -L | wc -l)
    [ "$n" -gt 1 ] && MACHINE="$MACHINE-x$n"
  else
    MACHINE="cpu-$(nproc)core"
  fi
fi
OUT=$(realpath -m "${2:-/tmp/megaton-sweep-$(date +%F)-$MACHINE}")
BUILD=${BUILD:-$ROOT/build}
[ -x "$BUILD/megaton" ] || { echo "run_sweep.sh: no $BUILD/megaton (build it, or set BUILD)" >&2; exit 2; }
export MEGATON="$BUILD/megaton" MACHINE MPIRUN="${MPIRUN:-mpirun}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mkdir -p "$OUT"
cp "$CONFIGS" "$OUT/configs.txt"
{ echo "date: $(date -u +%FT%TZ)"; echo "machine: $MACHINE ($(uname -n), $(nproc) cores)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "megaton: $("$MEGATON" --version)"; } > "$OUT/env.txt"
# The peer runs with the python3 on PATH (torch); the sweep itself with one that has matplotlib when there is one.
export PEER_PYTHON="${PEER_PYTHON:-$(command -v python3)}"
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import matplotlib' 2>/dev/null && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  PYTHON=/usr/bin/python3
fi
"$PYTHON" "$HERE/sweep.py" run "$CONFIGS" "$OUT"
