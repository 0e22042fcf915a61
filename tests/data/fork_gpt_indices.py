"""Megatron-DeepSpeed's GPT sample index (megatron/data/gpt_dataset.py, _build_index_mappings), written for this test
from the fork's description: doc_idx, sample_idx and shuffle_idx as np.save writes them.

  fork_gpt_indices.py DATA_PREFIX NUM_SAMPLES SEQ_LENGTH SEED OUT_PREFIX

reads DATA_PREFIX.idx (all its documents form the split), writes OUT_PREFIX_{doc,sample,shuffle}_idx.npy and prints
"epochs E separate S".
"""
import struct
import sys

import numpy as np

CUTOFF_LAST_EPOCH = 0.95  # the fork's default


def read_sizes(idx_path):
    with open(idx_path, "rb") as f:
        assert f.read(9) == b"MMIDIDX\x00\x00"
        _version, _dtype, n = struct.unpack("<QBQ", f.read(17))
        f.read(8)  # document count
        return np.frombuffer(f.read(4 * n), dtype=np.int32).copy()


def epochs_needed(tokens_per_epoch, seq_length, num_samples):
    epochs, total = 0, 0
    while True:
        epochs += 1
        total += tokens_per_epoch
        if (total - 1) // seq_length >= num_samples:
            return epochs


def shuffled_documents(documents, epochs, rng):
    d = np.tile(np.asarray(documents, dtype=np.int32), epochs)
    rng.shuffle(d)
    return d


def samples(sizes, doc_idx, seq_length, epochs, tokens_per_epoch):
    count = (epochs * tokens_per_epoch - 1) // seq_length
    out = np.zeros([count + 1, 2], dtype=np.int32)
    position, offset = 0, 0
    for s in range(1, count + 1):
        need = seq_length + 1
        while need != 0:
            length = sizes[doc_idx[position]] - offset
            need -= length
            if need <= 0:
                offset += need + length - 1
                need = 0
            else:
                position += 1
                offset = 0
        out[s] = (position, offset)
    return out


def main():
    prefix, num_samples, seq_length, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    sizes = read_sizes(prefix + ".idx")
    documents = np.arange(len(sizes), dtype=np.int32)
    tokens_per_epoch = int(np.sum(sizes[documents]))
    epochs = epochs_needed(tokens_per_epoch, seq_length, num_samples)
    rng = np.random.RandomState(seed=seed)
    separate = False
    if epochs > 1:
        before_last = ((epochs - 1) * tokens_per_epoch - 1) // seq_length
        per_epoch = (tokens_per_epoch - 1) // seq_length
        separate = (num_samples - before_last) < int(CUTOFF_LAST_EPOCH * per_epoch)
    if separate:
        doc_idx = np.concatenate((shuffled_documents(documents, epochs - 1, rng), shuffled_documents(documents, 1, rng)))
    else:
        doc_idx = shuffled_documents(documents, epochs, rng)
    sample_idx = samples(sizes, doc_idx, seq_length, epochs, tokens_per_epoch)
    total = sample_idx.shape[0] - 1
    first = before_last if separate else total
    dtype = np.uint32 if total < np.iinfo(np.uint32).max - 1 else np.int64
    head = np.arange(0, first, dtype=dtype)
    rng.shuffle(head)
    if first < total:
        tail = np.arange(first, total, dtype=dtype)
        rng.shuffle(tail)
        head = np.concatenate((head, tail))
    np.save(out + "_doc_idx.npy", doc_idx, allow_pickle=True)
    np.save(out + "_sample_idx.npy", sample_idx, allow_pickle=True)
    np.save(out + "_shuffle_idx.npy", head, allow_pickle=True)
    print("epochs %d separate %d" % (epochs, int(separate)))


main()
