#!/usr/bin/env python3
"""The HF export's end-to-end check in transformers itself, on the GPU node (run.sh calls it):
  1. the directory `megaton export-hf` wrote loads with AutoModelForCausalLM, and its tensors equal the HF model
     megaton imported (import-hf -> megaton checkpoint -> export-hf is lossless);
  2. the two models' logits on the same random tokens agree (max |diff|, fp32);
  3. transformers' greedy decoding from the exported weights produces the text `megaton generate --greedy` wrote
     (same model, same start token): megaton's forward pass gives the same argmax at every step.

usage: compare_hf.py HF_INIT HF_EXPORT MEGATON_GENFILE --vocab-dir DIR --new-tokens N [--bos 50256]
Prints one line per check ("ok"/"FAIL ...") and exits 1 if any check fails.
"""
import argparse
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def byte_level_decoder(vocab_json):
    """GPT-2's byte-level BPE decode (ids -> text, invalid UTF-8 replaced) from vocab.json alone, so the check does not
    depend on how a transformers version builds tokenizers from vocab/merges files."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    extra = [b for b in range(256) if b not in printable]
    byte_of = {chr(b): b for b in printable}
    byte_of.update({chr(256 + i): b for i, b in enumerate(extra)})
    with open(vocab_json, encoding="utf-8") as f:
        token_of = {i: t for t, i in json.load(f).items()}
    return lambda ids: bytes(byte_of[c] for i in ids for c in token_of[i]).decode("utf-8", errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_init")
    ap.add_argument("hf_export")
    ap.add_argument("genfile")
    ap.add_argument("--vocab-dir", required=True)
    ap.add_argument("--new-tokens", type=int, required=True)
    ap.add_argument("--bos", type=int, default=50256)
    a = ap.parse_args()
    failed = 0

    init = load_file(f"{a.hf_init}/model.safetensors")
    export = load_file(f"{a.hf_export}/model.safetensors")
    missing = [k for k in init if k not in export and not k.endswith(".attn.bias") and k != "lm_head.weight"]
    unequal = [k for k in init if k in export and not torch.equal(init[k], export[k])]
    ok = not missing and not unequal
    failed += not ok
    print(f"tensors: {'ok' if ok else 'FAIL'}: {len(export)} exported, {len(init)} in the original; "
          f"missing {missing[:5]}, unequal {unequal[:5]}")

    m_init = AutoModelForCausalLM.from_pretrained(a.hf_init, torch_dtype=torch.float32).cuda().eval()
    m_export = AutoModelForCausalLM.from_pretrained(a.hf_export, torch_dtype=torch.float32).cuda().eval()
    ids = torch.randint(0, m_init.config.vocab_size, (2, 64), generator=torch.Generator().manual_seed(0)).cuda()
    with torch.inference_mode():
        diff = (m_init(ids).logits - m_export(ids).logits).abs().max().item()
    ok = diff <= 1e-5
    failed += not ok
    print(f"logits: {'ok' if ok else 'FAIL'}: max |HF(original) - HF(megaton export)| = {diff:.3e} on [2, 64] tokens")

    with open(a.genfile) as f:
        record = json.loads(f.readline())
    # megaton writes tokens[1 : length - 1] of each row (Megatron's unconditional format), "length" = length - 1.
    theirs, n = record["text"], record["length"] - 1
    decode = byte_level_decoder(f"{a.vocab_dir}/vocab.json")
    start = torch.full((1, 1), a.bos, dtype=torch.long, device="cuda")
    with torch.inference_mode():
        # An explicit mask: with pad_token_id == the start token, transformers would otherwise mask the start token out.
        out = m_export.generate(start, attention_mask=torch.ones_like(start), max_new_tokens=a.new_tokens,
                                min_new_tokens=a.new_tokens, do_sample=False,
                                use_cache=True, pad_token_id=a.bos, eos_token_id=None)
    ours = decode(out[0, 1:1 + n].tolist())
    same = 0
    while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
        same += 1
    ok = ours == theirs or ours.replace("\ufffd", "") == theirs.replace("\ufffd", "")  # invalid UTF-8 spelt alike?
    failed += not ok
    print(f"greedy text: {'ok' if ok else 'FAIL'}: transformers and megaton generate agree on {same} of "
          f"{len(ours)}/{len(theirs)} characters ({n} tokens)")
    if not ok:
        print(f"  transformers: {ours[max(0, same - 40):same + 40]!r}\n  megaton:      {theirs[max(0, same - 40):same + 40]!r}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
