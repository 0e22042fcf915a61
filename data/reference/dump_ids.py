#!/usr/bin/env python3
"""Prints the items of a Megatron MMapIndexedDataset (PREFIX.bin/.idx) as JSON arrays, one per line, reading the
format independently of megaton (struct + array, no numpy): the cross-check used by tests/data/preprocess_gpt2_test.sh.
Optionally drops a trailing EOD id from each item (--strip-eod ID)."""
import argparse
import array
import struct
import sys

DTYPES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("--strip-eod", type=int, default=None)
    args = ap.parse_args()
    idx = open(args.prefix + ".idx", "rb").read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "bad magic"
    version, = struct.unpack_from("<Q", idx, 9)
    assert version == 1
    code = idx[17]
    n, d = struct.unpack_from("<QQ", idx, 18)
    assert len(idx) == 34 + 12 * n + 8 * d, "idx size"
    sizes = struct.unpack_from("<%di" % n, idx, 34)
    pointers = struct.unpack_from("<%dq" % n, idx, 34 + 4 * n)
    doc_idx = struct.unpack_from("<%dq" % d, idx, 34 + 12 * n)
    assert doc_idx[0] == 0 and doc_idx[-1] == n
    tokens = array.array(DTYPES[code])
    tokens.frombytes(open(args.prefix + ".bin", "rb").read())
    if sys.byteorder != "little":
        tokens.byteswap()
    item = tokens.itemsize
    out = sys.stdout
    for i in range(n):
        start = pointers[i] // item
        ids = list(tokens[start:start + sizes[i]])
        if args.strip_eod is not None:
            assert ids and ids[-1] == args.strip_eod, "item %d does not end with EOD" % i
            ids = ids[:-1]
        out.write("[" + ",".join(map(str, ids)) + "]\n")


if __name__ == "__main__":
    main()
