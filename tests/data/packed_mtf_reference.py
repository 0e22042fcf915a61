#!/usr/bin/env python3
"""The fork's DecoderPackedMTFDataset index and packing, written from decoder_packed_mtf_dataset.py with NumPy's own
RandomState, as an independent reference for megaton's data/packed_mtf.h.

  packed_mtf_reference.py CASE.json  ->  {"shuffle_idx": [...], "sample_idx": [[s, e], ...], "rows": [...]}
CASE: {"lengths": [[inputs, targets], ...], "num_samples": N, "seq_length": S, "seed": K, "pad": P, "rows": R}
Tokens of document d are 1000 * d + 1, 1000 * d + 2, ... (inputs, then targets), so rows can be rebuilt elsewhere.
"""
import json
import sys

import numpy as np


def build_index(sizes, num_samples, seq_length, seed):
    rng = np.random.RandomState(seed=seed)
    n = len(sizes)
    row_length, row_start, epoch = 0, 0, 0
    shuffle_idx, sample_idx = [], []
    while len(sample_idx) <= num_samples:
        ids = np.arange(start=0, stop=n, step=1, dtype=np.int64)
        rng.shuffle(ids)
        shuffle_idx.append(ids)
        offset = epoch * n
        for i, doc in enumerate(ids):
            end = offset + i
            length = sizes[doc][0] + sizes[doc][1]
            row_length += length
            if row_length > seq_length:
                if end > row_start:
                    sample_idx.append([row_start, end])
                row_start = end
                row_length = length
                if length > seq_length:
                    row_start = end + 1
                    row_length = 0
                    continue
        epoch += 1
    return np.concatenate(shuffle_idx).tolist(), sample_idx


def tokens(doc, sizes):
    n_in, n_tg = sizes[doc]
    all_tokens = [1000 * doc + k + 1 for k in range(n_in + n_tg)]
    return all_tokens[:n_in], all_tokens[n_in:]


def pack(docs, sizes, seq_length, pad):
    t = np.full((seq_length,), pad, dtype=np.int64)
    seg = np.zeros((seq_length,), dtype=np.int64)
    inp = np.full((seq_length,), False, dtype=bool)
    cur, item = 0, 1
    for d in docs:
        i, g = tokens(d, sizes)
        t[cur:cur + len(i)] = i
        t[cur + len(i):cur + len(i) + len(g)] = g
        seg[cur:cur + len(i) + len(g)] = item
        inp[cur:cur + len(i)] = 1
        item += 1
        cur += len(i) + len(g)
    return {"tokens": t.tolist(), "segment_ids": seg.tolist(), "is_inputs": inp.astype(int).tolist()}


case = json.load(open(sys.argv[1]))
shuffle_idx, sample_idx = build_index(case["lengths"], case["num_samples"], case["seq_length"], case["seed"])
rows = [pack(shuffle_idx[s:e], case["lengths"], case["seq_length"], case["pad"]) for s, e in sample_idx[:case["rows"]]]
json.dump({"shuffle_idx": shuffle_idx, "sample_idx": sample_idx, "rows": rows}, sys.stdout)
