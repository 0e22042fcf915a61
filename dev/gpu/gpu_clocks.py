#!/usr/bin/env python3
"""gpu_clocks.py CSV: the SM clock, power and temperature the GPU ran at during each phase of a session_batch.sh call.

CSV: `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
--format=csv,noheader,nounits -lms 250` output with the script's phase lines (`PHASE <name>`) appended in between.
Prints per phase: samples, median and minimum SM clock (MHz), median power (W), maximum temperature (C), then the
busy samples only (power above BUSY_W watts, default 500: a phase also holds its process start and exit, when the GPU
idles at full clock) with their count, mean SM clock and mean power, and the throttle-reason bitmasks seen (0x4:
software power cap, 0x20/0x40: thermal slowdown; nvidia-smi's clocks_throttle_reasons)."""
import os
import statistics
import sys


def main(path):
    phases, name = {}, "start"
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("PHASE "):
            name = line[6:]
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        try:
            sm, power, temp = float(parts[1]), float(parts[2]), float(parts[3])
        except ValueError:
            continue
        phases.setdefault(name, []).append((sm, power, temp, parts[4]))
    busy_w = float(os.environ.get("BUSY_W", "500"))
    print(f"{'phase':40} {'n':>4} {'sm MHz med':>10} {'min':>6} {'power W':>8} {'max C':>6} | {'busy n':>6} "
          f"{'MHz':>6} {'W':>5}  throttle reasons")
    for name, rows in phases.items():
        sm = [r[0] for r in rows]
        busy = [r for r in rows if r[1] > busy_w]
        busy_cols = f"{0:6d} {'-':>6} {'-':>5}"
        if busy:
            busy_cols = (f"{len(busy):6d} {statistics.mean(r[0] for r in busy):6.0f} "
                         f"{statistics.mean(r[1] for r in busy):5.0f}")
        print(f"{name[:40]:40} {len(rows):4d} {statistics.median(sm):10.0f} {min(sm):6.0f} "
              f"{statistics.median(r[1] for r in rows):8.0f} {max(r[2] for r in rows):6.0f} | {busy_cols}  "
              f"{' '.join(sorted({r[3] for r in rows}))}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
