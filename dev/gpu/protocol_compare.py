#!/usr/bin/env python3
"""Megaton's training step beside the peer's under each of two measurement protocols, from one session_batch.sh
results folder (its `protocol` step):

  short      the peer anchor's own protocol (../shared/peers/torch_gpt_bench.py: 3 warm-up steps, then the mean of 10),
             megaton run as close to it as its log allows and never in its favour: 15 iterations with a log line every 5
             (the loop reads the loss only there), the mean of the lines at 10 and 15 (iterations 6-15: 5 warm-up ones).
             Files: short_<name>.jsonl, and peer.log's line for the config.
  sustained  session_batch.sh's headline protocol: 30 iterations, a log line every 5, the median of the lines at 15-30
             (iterations 11-30: the H200 at its 700 W power limit). Files: ab_<name>_base.jsonl, and
             peer_sustained.log's "sustained " line (torch_gpt_bench.py under PEER_SUSTAINED=1, the same windows).

TFLOP/s on both sides from the same Megatron formula, 72·B·s·l·h²·(1 + s/6h + V/12lh) with V = 50304 (GPT-2's vocab
padded to 128, both programs' embedding size).

usage: protocol_compare.py RESULTS_DIR [NAME ...]   (names: 124M 1.3B; default both)"""
import json
import os
import statistics
import sys

from compare_peer import LINE, PEER, peer_step_ms  # the peer's line, its names per config, its ms from tokens/s

DIMS = {"124M": (12, 768, 1024, 32), "1.3B": (24, 2048, 2048, 8)}  # layers, hidden, seq, micro-batch
V = 50304


def tflops(name, ms):
    L, h, s, b = DIMS[name]
    return 72 * b * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h)) / (ms * 1e-3) / 1e12


def megaton_ms(path, pick):
    """ms/iteration from a --metrics-file: pick(list of (iteration, ms)) -> ms, or None when the file is missing."""
    if not os.path.exists(path):
        return None
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    its = [(r["iteration"], r["elapsed_ms_per_iteration"]) for r in rows if "elapsed_ms_per_iteration" in r]
    return pick(its)


def short_pick(its):
    ms = [m for i, m in its if i in (10, 15)]
    return statistics.mean(ms) if len(ms) == 2 else None


def sustained_pick(its):
    ms = [m for i, m in its if i > 10]
    return statistics.median(ms) if ms else None


def peer_ms(path, prefix):
    """The peer's ms/iteration from its line starting with prefix."""
    if not os.path.exists(path):
        return None
    for line in open(path):
        m = LINE.search(line)
        if line.startswith(prefix) and m:
            return peer_step_ms(m)
    return None


def main(d, names):
    print(f"{'model':6} {'protocol':10} | {'megaton ms':>10} {'TFLOP/s':>8} | {'peer ms':>8} {'TFLOP/s':>8} | speedup")
    for name in names:
        cases = [("short", megaton_ms(os.path.join(d, f"short_{name}.jsonl"), short_pick),
                  peer_ms(os.path.join(d, "peer.log"), PEER[name])),
                 ("sustained", megaton_ms(os.path.join(d, f"ab_{name}_base.jsonl"), sustained_pick),
                  peer_ms(os.path.join(d, "peer_sustained.log"), "sustained " + PEER[name]))]
        for protocol, ours, peer in cases:
            o = f"{ours:10.1f} {tflops(name, ours):8.0f}" if ours else f"{'-':>10} {'-':>8}"
            p = f"{peer:8.1f} {tflops(name, peer):8.0f}" if peer else f"{'-':>8} {'-':>8}"
            ratio = f"{peer / ours:.3f}x" if ours and peer else "-"
            print(f"{name:6} {protocol:10} | {o} | {p} | {ratio}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:] or ["124M", "1.3B"])
