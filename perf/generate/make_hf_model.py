#!/usr/bin/env python3
"""Writes a randomly initialised GPT-2 (transformers GPT2LMHeadModel, safetensors) of the given size: the common
starting point of the generation benchmark (megaton import-hf reads it; megaton export-hf writes it back for HF).

usage: make_hf_model.py OUT_DIR --layers L --hidden H --heads A --positions P [--vocab 50257] [--seed 1]
"""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--layers", type=int, default=24)
ap.add_argument("--hidden", type=int, default=1024)
ap.add_argument("--heads", type=int, default=16)
ap.add_argument("--positions", type=int, default=1024)
ap.add_argument("--vocab", type=int, default=50257)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
torch.manual_seed(a.seed)
cfg = GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads, n_positions=a.positions, vocab_size=a.vocab,
                 activation_function="gelu_new")
GPT2LMHeadModel(cfg).save_pretrained(a.out, safe_serialization=True)
print(f"wrote {a.out}: GPT-2 {a.layers}x{a.hidden}, {a.heads} heads, {a.positions} positions, vocab {a.vocab}")
