#!/usr/bin/env python3
"""perf/sweep/import_train_step.py RESULTS_DIR OUTDIR MACHINE DATE — turn the logs of perf/gpu/train_step_batch.sh
(train_1.3B.jsonl, train_124M.jsonl, peer.log) into the sweep's CSV/JSON/PNG, so `megaton plan --check` and
`--calibration` can use them. The configurations are those train_step_batch.sh runs (one GPU, bf16, 8 iterations;
the first 2 are left out as warm-up, the median of the rest is taken, as sweep.py does)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep  # noqa: E402

# name -> (layers, hidden, heads, seq, micro-batch = global batch, peer line prefix)
CONFIGS = {"1.3B": (24, 2048, 16, 2048, 8, "gpt-1.3B compile=False"),
           "124M": (12, 768, 12, 1024, 32, "gpt2-124M compile=False")}
MACHINES = {  # machine -> (peak bf16 dense TFLOP/s, GPU memory GiB)
    "h200": (989.0, 140.4), "h100": (989.0, 79.6)}


def main(src, out, machine, date):
    peak, mem = MACHINES[machine]
    rows = []
    peer = open(os.path.join(src, "peer.log")).read() if os.path.exists(os.path.join(src, "peer.log")) else ""
    for name, (L, h, nh, S, B, peer_prefix) in CONFIGS.items():
        jsonl = os.path.join(src, f"train_{name}.jsonl")
        if not os.path.exists(jsonl):
            continue
        s = sweep.summarize_metrics(jsonl, 2)
        row = {k: "" for k in sweep.COLUMNS}
        row.update({"date": date, "machine": machine, "device": "cuda", "peak_tflops": peak, "gpus_per_node": 1,
                    "nodes": 1, "intra_node_gbps": 360, "inter_node_gbps": 50, "gpu_memory_gib": mem,
                    "config": name, "num_layers": L, "hidden_size": h, "num_attention_heads": nh,
                    "ffn_hidden_size": 4 * h, "seq_length": S, "vocab_size": 50257, "padded_vocab": 50304,
                    "global_batch_size": B, "micro_batch_size": B, "tp": 1, "pp": 1, "dp": 1, "zero_stage": 0,
                    "recompute": 0, "precision": "bf16", "status": "ok",
                    "peak_mem_source": "not measured (train_step_batch.sh)",
                    "note": f"from {os.path.relpath(src, os.path.join(os.path.dirname(__file__), '..', '..'))}"})
        row.update({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in s.items()})
        for line in peer.splitlines():
            m = sweep.PEER_LINE.search(line)
            if line.startswith(peer_prefix) and m:
                row.update({"peer_ms_per_iter": m["ms"], "peer_tflops": m["tf"],
                            "peer_tokens_per_s": m["tok"].replace(",", ""), "peer_peak_mem_gib": m["mem"]})
        rows.append(row)
    os.makedirs(out, exist_ok=True)
    sweep.write_csv(rows, out)
    sweep.finish(out)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
