#!/usr/bin/env python3
"""compare_runs.py A.jsonl B.jsonl [--tol T]: two `megaton train --metrics-file` runs of the same model, data and
seed that differ only in how they compute (a fused kernel on or off): per iteration the lm loss and grad norm of both,
the relative differences, and the median ms/iteration of each (log lines after the first two). Exits 1 when a loss
differs by more than T (relative; default 1e-3) or an iteration is missing from one side."""
import argparse
import json
import statistics
import sys


def read(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                if "lm_loss" in r:
                    rows[r["iteration"]] = r
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-3)
    args = ap.parse_args()
    a, b = read(args.a), read(args.b)
    iters = sorted(set(a) | set(b))
    if not iters:
        print(f"compare_runs: no iterations with lm_loss in {args.a} or {args.b}")
        return 1
    worst, ok = 0.0, True
    print(f"{'iter':>5} {'loss A':>12} {'loss B':>12} {'rel diff':>9} {'gnorm A':>9} {'gnorm B':>9}")
    for i in iters:
        if i not in a or i not in b:
            print(f"{i:>5} missing in {'A' if i not in a else 'B'}")
            ok = False
            continue
        la, lb = a[i]["lm_loss"], b[i]["lm_loss"]
        rel = abs(la - lb) / max(abs(lb), 1e-30)
        worst = max(worst, rel)
        print(f"{i:>5} {la:12.6f} {lb:12.6f} {rel:9.2e} {a[i].get('grad_norm', float('nan')):9.4f} "
              f"{b[i].get('grad_norm', float('nan')):9.4f}")

    def median_ms(rows):
        t = [r["elapsed_ms_per_iteration"] for _, r in sorted(rows.items())[2:]]
        return statistics.median(t) if t else float("nan")

    ma, mb = median_ms(a), median_ms(b)
    verdict = "ok" if ok and worst <= args.tol else "DIFFERENT"
    print(f"compare_runs: {verdict}: worst relative loss difference {worst:.2e} (tolerance {args.tol:g}); "
          f"median ms/iteration A {ma:.1f}, B {mb:.1f} (B/A {mb / ma:.3f})")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
