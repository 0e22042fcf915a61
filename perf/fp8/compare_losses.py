#!/usr/bin/env python3
"""Compares an FP8 run's loss curve with the run-to-run spread of bf16 (perf/fp8/run.sh's numerics phase).

    compare_losses.py BF16_A.jsonl BF16_B.jsonl FP8.jsonl

Each file is a `megaton train --metrics-file`. BF16_A and FP8 share seed and data; BF16_B differs only in its seed.
Training losses (one per log interval) are smoothed over windows of 10 log lines; the spread is the largest
|BF16_A - BF16_B| of the smoothed curves after the first 10% of iterations, and the FP8 deviation the largest
|FP8 - BF16_A| there. Prints both, the validation losses side by side, and a verdict: the FP8 run stays within the
spread when its deviation is at most the spread, and diverges when a loss is not finite or ends above the first.
Exit code 0 within the spread, 1 outside it.
"""
import json
import math
import sys


def load(path):
    train, valid = {}, {}
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            if "lm_loss" in o:
                train[o["iteration"]] = o["lm_loss"]
            if "valid_lm_loss" in o:
                valid[o["iteration"]] = o["valid_lm_loss"]
    return train, valid


def smooth(curve, its, window=10):
    values = [curve[i] for i in its]
    return [sum(values[max(0, k - window + 1):k + 1]) / len(values[max(0, k - window + 1):k + 1])
            for k in range(len(values))]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    (a, va), (b, vb), (q, vq) = (load(p) for p in argv[1:])
    its = sorted(set(a) & set(b) & set(q))
    if not its:
        sys.exit("compare_losses.py: the three runs share no logged iteration")
    sa, sb, sq = smooth(a, its), smooth(b, its), smooth(q, its)
    start = next(k for k, i in enumerate(its) if i >= its[-1] * 0.1)
    spread = max(abs(x - y) for x, y in zip(sa[start:], sb[start:]))
    dev = max(abs(x - y) for x, y in zip(sq[start:], sa[start:]))
    diverged = any(not math.isfinite(v) for v in q.values()) or q[its[-1]] > q[its[0]]
    print(f"iterations {its[0]}-{its[-1]}: final smoothed train loss bf16 {sa[-1]:.4f}, bf16 second seed "
          f"{sb[-1]:.4f}, fp8 {sq[-1]:.4f}")
    print(f"largest smoothed |bf16 - bf16 second seed| after iteration {its[start]}: {spread:.4f}")
    print(f"largest smoothed |fp8 - bf16| after iteration {its[start]}: {dev:.4f}")
    for i in sorted(set(va) & set(vb) & set(vq)):
        print(f"validation at {i}: bf16 {va[i]:.4f}  bf16 second seed {vb[i]:.4f}  fp8 {vq[i]:.4f}")
    within = dev <= spread and not diverged
    print("fp8: " + ("diverged" if diverged else "within the bf16 spread" if within else "outside the bf16 spread"))
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
