#!/usr/bin/env python3
"""Peer throughput with Python tokenizers (on the GPU machine, which has tiktoken and HF tokenizers but no node):
encodes every "text" of a JSONL file on ONE thread and prints one JSON line {peer, bytes, tokens, wall_s, cpu_s}.
  python3 peer_python.py tiktoken|hf-tokenizers INPUT.jsonl VOCAB.json MERGES.txt [HF_TOKENIZER.json]
tiktoken's "gpt2" encoding is built from the same vocab/merges files (placed in its cache, no network needed)."""
import hashlib
import json
import os
import sys
import tempfile
import time


def main():
    which, path, vocab, merges = sys.argv[1:5]
    if which == "tiktoken":
        cache = tempfile.mkdtemp()
        base = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
        for name, src in (("vocab.bpe", merges), ("encoder.json", vocab)):
            key = hashlib.sha1((base + name).encode()).hexdigest()
            with open(src, "rb") as f, open(os.path.join(cache, key), "wb") as g:
                g.write(f.read())
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        import tiktoken
        enc = tiktoken.get_encoding("gpt2")
        encode = enc.encode_ordinary
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(sys.argv[5])
        encode = lambda t: tok.encode(t, add_special_tokens=False).ids
    raw = open(path, "rb").read()
    lines = raw.decode("utf-8", errors="replace").split("\n")
    encode("warm up")
    t0, c0 = time.perf_counter(), time.process_time()
    tokens = 0
    for line in lines:
        if not line.strip():
            continue
        text = json.loads(line)["text"]
        tokens += len(encode(text)) + 1 if text else 0
    print(json.dumps({"peer": which, "bytes": len(raw), "tokens": tokens, "wall_s": time.perf_counter() - t0,
                      "cpu_s": time.process_time() - c0}))


if __name__ == "__main__":
    main()
