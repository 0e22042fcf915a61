#!/usr/bin/env python3
"""Prints megaton's training step beside the peer's, with the ratio, from one session_batch.sh / train_step_batch.sh
results folder: megaton's median ms/iteration from the A/B runs' defaults (ab_<name>_base.jsonl: no profiler, a log
line every few iterations, so the loop never waits for the GPU in between; log lines after iteration 10), else from
the profiled run (train_<name>.jsonl: unprofiled iterations after the first; iterations in PROFILED, default "6 7",
are left out); the peer's line of peer.log, its step time from its tokens/s and B x S (the peer prints whole ms, ~1%
at 124M).

usage: compare_peer.py RESULTS_DIR [NAME ...]   (names: 124M 1.3B; default both)"""
import json
import os
import re
import statistics
import sys

PEER = {"124M": "gpt2-124M compile=False", "1.3B": "gpt-1.3B compile=False"}
LINE = re.compile(r"B=(?P<b>\d+) S=(?P<s>\d+): (?P<ms>[\d.]+) ms/it, (?P<tok>[\d,]+) tok/s, (?P<tf>[\d.]+) TFLOP/s model, "
                  r"mem (?P<mem>[\d.]+) GiB")


def peer_step_ms(m):
    """The peer's ms/iteration from a LINE match: from its tokens/s and B x S (the anchor prints whole ms)."""
    tok = float(m["tok"].replace(",", ""))
    return int(m["b"]) * int(m["s"]) / tok * 1e3 if tok > 0 else float(m["ms"])


def main(d, names):
    profiled = {int(x) for x in os.environ.get("PROFILED", "6 7").split()}
    peer = open(os.path.join(d, "peer.log")).read() if os.path.exists(os.path.join(d, "peer.log")) else ""
    print(f"{'model':6} {'megaton ms':>10} {'TFLOP/s':>8} {'mem GiB':>8} | {'peer ms':>8} {'TFLOP/s':>8} "
          f"{'mem GiB':>8} | speedup")
    for name in names:
        base, path = os.path.join(d, f"ab_{name}_base.jsonl"), os.path.join(d, f"train_{name}.jsonl")
        first, skip = (10, set()) if os.path.exists(base) else (1, profiled)
        path = base if os.path.exists(base) else path
        if not os.path.exists(path):
            continue
        rows = [json.loads(l) for l in open(path)]
        its = [r for r in rows
               if "elapsed_ms_per_iteration" in r and r["iteration"] > first and r["iteration"] not in skip]
        if not its:
            continue
        ms = statistics.median(r["elapsed_ms_per_iteration"] for r in its)
        tf = statistics.median(r["tflops"] for r in its)
        mem = max((r.get("mem_max_allocated_mib", 0) for r in rows), default=0) / 1024
        m = next((LINE.search(l) for l in peer.splitlines() if l.startswith(PEER[name]) and LINE.search(l)), None)
        if m:
            peer_ms = peer_step_ms(m)
            print(f"{name:6} {ms:10.1f} {tf:8.0f} {mem:8.1f} | {peer_ms:8.1f} {float(m['tf']):8.0f} "
                  f"{float(m['mem']):8.1f} | {peer_ms / ms:.2f}x")
        else:
            print(f"{name:6} {ms:10.1f} {tf:8.0f} {mem:8.1f} | (no peer line)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:] or ["124M", "1.3B"])
