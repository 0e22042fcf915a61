#!/usr/bin/env python3
"""An independent NumPy GPT-2 (Hugging Face layout: Conv1D [in, out] weights, fused c_attn q|k|v, tanh GELU, tied
lm_head) for tests/checkpoint/hf_forward_test.sh.

  hf_gpt2_reference.py make DIR            writes DIR/config.json + DIR/model.safetensors (random, 2 x 64, 4 heads)
  hf_gpt2_reference.py greedy DIR N VOCAB_JSON   prints the text of N greedy tokens after <|endoftext|>, decoded as
                                           megaton's unconditional genfile holds it (tokens 1 .. N-1 of the row)
"""
import json
import os
import struct
import sys

import numpy as np

L, H, NH, P, V = 2, 64, 4, 64, 50257
EOD = 50256


def make(out):
    rng = np.random.default_rng(1)
    t = {}

    def n(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    t["transformer.wte.weight"] = n(V, H)
    t["transformer.wpe.weight"] = n(P, H, std=0.01)
    for i in range(L):
        q = f"transformer.h.{i}."
        for name in ("ln_1", "ln_2"):
            t[q + name + ".weight"], t[q + name + ".bias"] = 1 + n(H, std=0.1), n(H, std=0.1)
        t[q + "attn.c_attn.weight"], t[q + "attn.c_attn.bias"] = n(H, 3 * H, std=0.2), n(3 * H, std=0.1)
        t[q + "attn.c_proj.weight"], t[q + "attn.c_proj.bias"] = n(H, H, std=0.2), n(H, std=0.1)
        t[q + "mlp.c_fc.weight"], t[q + "mlp.c_fc.bias"] = n(H, 4 * H, std=0.2), n(4 * H, std=0.1)
        t[q + "mlp.c_proj.weight"], t[q + "mlp.c_proj.bias"] = n(4 * H, H, std=0.2), n(H, std=0.1)
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = 1 + n(H, std=0.1), n(H, std=0.1)
    os.makedirs(out, exist_ok=True)
    header, offset, blobs = {}, 0, []
    for k, v in t.items():
        b = v.tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    hj = json.dumps(header).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": H, "n_layer": L, "n_head": NH,
                   "n_positions": P, "vocab_size": V, "activation_function": "gelu_new",
                   "layer_norm_epsilon": 1e-5, "n_inner": None}, f)


def load(d):
    raw = open(os.path.join(d, "model.safetensors"), "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
            .reshape(v["shape"]) for k, v in header.items() if k != "__metadata__"}


def forward(t, ids):  # [S] -> logits [S, V], float64
    def ln(x, w, b):
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    t = {k: v.astype(np.float64) for k, v in t.items()}
    S, hd = len(ids), H // NH
    x = t["transformer.wte.weight"][ids] + t["transformer.wpe.weight"][np.arange(S)]
    for i in range(L):
        q = f"transformer.h.{i}."
        a = ln(x, t[q + "ln_1.weight"], t[q + "ln_1.bias"]) @ t[q + "attn.c_attn.weight"] + t[q + "attn.c_attn.bias"]
        qs, ks, vs = (m.reshape(S, NH, hd).transpose(1, 0, 2) for m in np.split(a, 3, -1))  # [NH, S, hd]
        scores = qs @ ks.transpose(0, 2, 1) / np.sqrt(hd) + np.triu(np.full((S, S), -1e9), 1)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        ctx = ((p / p.sum(-1, keepdims=True)) @ vs).transpose(1, 0, 2).reshape(S, H)
        x = x + ctx @ t[q + "attn.c_proj.weight"] + t[q + "attn.c_proj.bias"]
        m = gelu(ln(x, t[q + "ln_2.weight"], t[q + "ln_2.bias"]) @ t[q + "mlp.c_fc.weight"] + t[q + "mlp.c_fc.bias"])
        x = x + m @ t[q + "mlp.c_proj.weight"] + t[q + "mlp.c_proj.bias"]
    return ln(x, t["transformer.ln_f.weight"], t["transformer.ln_f.bias"]) @ t["transformer.wte.weight"].T


def decoder(vocab_json):  # GPT-2 byte-level BPE: token strings -> bytes -> UTF-8 (invalid bytes replaced)
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    byte_of = {chr(b): b for b in printable}
    byte_of.update({chr(256 + i): b for i, b in enumerate(b for b in range(256) if b not in printable)})
    token = {i: s for s, i in json.load(open(vocab_json, encoding="utf-8")).items()}
    return lambda ids: bytes(byte_of[c] for i in ids for c in token[i]).decode("utf-8", errors="replace")


def greedy(d, steps, vocab_json):
    t, ids = load(d), [EOD]
    for _ in range(steps):
        logits = forward(t, np.array(ids))
        top2 = np.sort(logits[-1])[-2:]
        assert top2[1] - top2[0] > 1e-4, "near tie in the reference: the comparison would be fragile"
        ids.append(int(logits[-1].argmax()))
    print(json.dumps({"ids": ids[1:], "text": decoder(vocab_json)(ids[1:-1])}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        greedy(sys.argv[2], int(sys.argv[3]), sys.argv[4])
