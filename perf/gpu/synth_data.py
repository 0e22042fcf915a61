#!/usr/bin/env python3
"""Writes a random-token Megatron dataset (vocab 50257 like GPT-2, EOD 50256 ending each document) for GPU timing runs:
PREFIX.bin / PREFIX.idx (MMIDIDX v1, uint16). usage: synth_data.py PREFIX [N_DOCS=600] [DOC_LEN=2000]"""
import struct
import sys

import numpy as np

prefix = sys.argv[1]
n_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 600
doc_len = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
rng = np.random.default_rng(0)
docs = rng.integers(0, 50256, size=(n_docs, doc_len), dtype=np.uint16)
docs[:, -1] = 50256  # EOD
with open(prefix + ".bin", "wb") as f:
    f.write(docs.tobytes())
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n_docs, n_docs + 1))
    f.write(np.full(n_docs, doc_len, dtype=np.int32).tobytes())
    f.write((np.arange(n_docs, dtype=np.int64) * doc_len * 2).tobytes())
    f.write(np.arange(n_docs + 1, dtype=np.int64).tobytes())
