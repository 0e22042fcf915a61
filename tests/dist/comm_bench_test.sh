#!/bin/bash
# megaton comm-bench at 2 ranks on the CPU: every collective checked (the "# OK" line), and --overlap's table: one row
# per op and size, with exposed time = both - compute clamped at 0 and the hidden share in [0, 100] %.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$MPIRUN" --oversubscribe --bind-to none -np 2 "$MEGATON" comm-bench --device cpu --distributed-backend mpi \
  --minbytes 1024 --maxbytes 65536 --iters 3 --warmup 1 --overlap > "$out" 2>&1 || { cat "$out"; exit 1; }
python3 - "$out" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
assert any(l.startswith("# OK: 0 wrong elements") for l in lines), "\n".join(lines)
head = next(i for i, l in enumerate(lines) if l.startswith("# overlap:"))
rows = [l.split() for l in lines[head + 1:] if l.strip() and not l.startswith("#")]
sizes = [1024, 4096, 16384, 65536]
assert [(r[0], int(r[1])) for r in rows] == [(op, s) for op in ("all_reduce", "reduce_scatter") for s in sizes], rows
for op, _, comm, compute, both, exposed, hidden in rows:
    comm, compute, both, exposed, hidden = map(float, (comm, compute, both, exposed, hidden.rstrip("%")))
    assert comm > 0 and compute > 0 and both > 0, (op, comm, compute, both)
    assert abs(exposed - max(0.0, both - compute)) < 0.11, (op, exposed, both, compute)
    assert 0 <= hidden <= 100, (op, hidden)
print(f"comm-bench --overlap: {len(rows)} rows, all collectives correct")
PY
echo PASS
