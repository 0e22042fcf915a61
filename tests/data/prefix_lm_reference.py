#!/usr/bin/env python3
"""The fork's prefix-LM batch (pretrain_prefix_lm.py's get_batch_pipe: megatron/utils.py's get_prefix_indices,
get_ltor_masks_and_position_ids and reweight_loss_mask_), ported to NumPy with Python's own `random`, as an
independent reference for megaton's data/prefix_lm.h.

  prefix_lm_reference.py CASE.json -> [{"prefix": [...], "attends": [[...]], "loss_mask": [...], "position_ids": [...]}]
CASE: {"seed": K, "eod": E, "rows": [[tokens...], ...], "reset_position_ids": b, "reset_attention_mask": b,
       "eod_mask_loss": b, "loss_on_targets_only": b, "reweight": b}
"""
import json
import random
import sys

import numpy as np


def get_prefix_indices(row, eod, reset_attention_mask):
    seq_length = len(row)
    if reset_attention_mask:
        eod_indices = [i for i, t in enumerate(row) if t == eod]
        if row[-1] != eod:
            eod_indices.append(len(row))
        out, prev_index = [], 0
        for eod_index in eod_indices:
            out.append(random.randint(prev_index + 1, eod_index))
            prev_index = eod_index + 1
        return out
    return random.randint(1, seq_length)


def masks(row, eod, prefix, c):
    data = np.asarray(row)
    s = len(row)
    attention_mask = np.tril(np.ones((s, s), dtype=np.float32))
    loss_mask = np.ones((s,), dtype=np.float32)
    if c["eod_mask_loss"]:
        loss_mask[data == eod] = 0.0
    position_ids = np.arange(s, dtype=np.int64)
    eod_index = list(position_ids[data == eod])
    if data[-1] != eod:
        eod_index.append(s)
    prev_index = 0
    for j, i in enumerate(eod_index):
        if c["reset_attention_mask"]:
            attention_mask[(i + 1):, :(i + 1)] = 0
            attention_mask[prev_index:prefix[j], prev_index:prefix[j]] = 1
            if c["loss_on_targets_only"]:
                loss_mask[prev_index:prefix[j] - 1] = 0.0
        if c["reset_position_ids"]:
            position_ids[(i + 1):] -= (i + 1 - prev_index)
        prev_index = i + 1
    if not c["reset_attention_mask"]:
        attention_mask[:prefix, :prefix] = 1
        if c["loss_on_targets_only"]:
            loss_mask[:prefix - 1] = 0.0
    if c["reweight"]:
        weight = np.arange(s, 0, -1, dtype=np.float32) / np.float32(s + 1) * np.float32(2)
        loss_mask *= weight
    return {"attends": (attention_mask >= 0.5).astype(int).tolist(), "loss_mask": loss_mask.tolist(),
            "position_ids": position_ids.tolist()}


case = json.load(open(sys.argv[1]))
random.seed(case["seed"])
out = []
for row in case["rows"]:
    prefix = get_prefix_indices(row, case["eod"], case["reset_attention_mask"])
    r = masks(row, case["eod"], prefix, case)
    r["prefix"] = prefix if isinstance(prefix, list) else [prefix]
    out.append(r)
json.dump(out, sys.stdout)
