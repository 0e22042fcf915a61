#!/usr/bin/env python3
"""The Hugging Face peer of the generation benchmark: greedy decoding with transformers' KV cache from the weights
megaton exported (megaton export-hf), timed the same way as megaton generate (the decode loop only, after a warm-up).

usage: hf_generate.py HF_DIR --batch B --new-tokens N [--repeats R] [--dtype fp32|bf16|fp16]
prints one line: hf batch=B new_tokens=N tokens_per_s=X ms_per_step=Y
"""
import argparse
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--bos", type=int, default=50256)
    a = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    model = AutoModelForCausalLM.from_pretrained(a.hf_dir, torch_dtype=dtype).cuda().eval()
    ids = torch.full((a.batch, 1), a.bos, dtype=torch.long, device="cuda")  # unconditional, as megaton's [EOD]
    # attention_mask explicit: pad_token_id is the start token, which transformers would otherwise take for padding.
    kw = dict(attention_mask=torch.ones_like(ids), max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
              do_sample=False, use_cache=True,
              pad_token_id=a.bos, eos_token_id=None)
    with torch.inference_mode():
        model.generate(ids, **dict(kw, max_new_tokens=8, min_new_tokens=8))  # warm-up
        best = None
        for _ in range(a.repeats):
            torch.cuda.synchronize()
            t = time.perf_counter()
            out = model.generate(ids, **kw)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
    new = (out.shape[1] - 1) * a.batch
    print(f"hf batch={a.batch} new_tokens={out.shape[1] - 1} tokens_per_s={new / best:.1f} "
          f"ms_per_step={1e3 * best / (out.shape[1] - 1):.3f}", flush=True)


if __name__ == "__main__":
    main()
