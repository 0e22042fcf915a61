#!/usr/bin/env python3
"""The fork's DecoderPackedMTFDataset index and packing, written from decoder_packed_mtf_dataset.py with NumPy's own
RandomState, as an independent reference for megaton's data/packed_mtf.h.

  packed_mtf_reference.py CASE.json  ->  {"shuffle_idx": [...], "sample_idx": [[s, e], ...], "rows": [...]}
Each row also carries what get_batch_pipe (finetune_t0_non_causal_decoder.py) and megatron/utils.py's
get_packed_attention_mask make of it: "loss_mask" and the attention masks "attend_causal" and "attend_prefix" (1 =
attends), for rows of seq_length + 1 tokens, no --reset-attention-mask, no --eod-mask-loss.
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


def batch(row, pad):
    """get_batch_pipe on one row, then get_packed_attention_mask for the causal and the non-causal decoder."""
    t = np.asarray(row["tokens"])[None, :]
    seg = np.asarray(row["segment_ids"])[None, :]
    is_in = np.asarray(row["is_inputs"]).astype(bool)[None, :]
    tokens = t[:, :-1]
    segment_ids = seg[:, :-1]
    decoder_is_inputs = is_in[:, :-1]
    s = tokens.shape[1]
    # get_ltor_masks_and_position_ids without resets: causal_mask True above the diagonal (masked), loss_mask ones.
    causal_masked = np.triu(np.ones((s, s), dtype=bool), k=1)[None, None]
    loss_mask = np.ones(tokens.shape, dtype=np.float32)
    loss_mask *= ~is_in[:, 1:] * (tokens != pad)
    out = {"loss_mask": loss_mask[0].tolist()}
    for name, is_causal in (("attend_causal", True), ("attend_prefix", False)):
        causal_mask = ~causal_masked
        if is_causal:
            causal_inputs_mask = causal_mask
        else:
            inputs_mask = decoder_is_inputs[:, None, :, None] * decoder_is_inputs[:, None, None, :]
            causal_inputs_mask = causal_mask + inputs_mask
        padding_mask = (segment_ids != 0)[:, None, :, None] * (segment_ids != 0)[:, None, None, :]
        segment_mask = segment_ids[:, None, :, None] == segment_ids[:, None, None, :]
        attention_mask = causal_inputs_mask * padding_mask * segment_mask
        masked = attention_mask < 0.5
        out[name] = (~masked[0, 0]).astype(int).tolist()
    return out


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
    row = {"tokens": t.tolist(), "segment_ids": seg.tolist(), "is_inputs": inp.astype(int).tolist()}
    row.update(batch(row, pad))
    return row


case = json.load(open(sys.argv[1]))
shuffle_idx, sample_idx = build_index(case["lengths"], case["num_samples"], case["seq_length"], case["seed"])
rows = [pack(shuffle_idx[s:e], case["lengths"], case["seq_length"], case["pad"]) for s, e in sample_idx[:case["rows"]]]
json.dump({"shuffle_idx": shuffle_idx, "sample_idx": sample_idx, "rows": rows}, sys.stdout)
