#!/usr/bin/env python3
"""Writes a Megatron-DeepSpeed checkpoint as the fork's --deepspeed runs save it, from a DeepSpeed universal checkpoint.

    make_deepspeed_fixture.py UNIVERSAL_DIR OUT_DIR --tp 2 --pp 2 --dp 2 [--optimizer bf16|zero]
    make_deepspeed_fixture.py UNIVERSAL_DIR OUT_DIR --format megatron --tp 2 --pp 2 [--checkpoint-version 0|1|3]

The structures follow DeepSpeed's save code of the fork's era (runtime/engine.py _save_checkpoint and
_save_zero_checkpoint, runtime/pipe/module.py save_state_dict, runtime/bf16_optimizer.py and
runtime/zero/stage_1_and_2.py state_dict) and the fork's megatron/checkpointing.py client state:
  OUT/latest                                        "global_stepN"
  OUT/global_stepN/layer_LL-model_TT-model_states.pt one pipeline layer's weights on TP rank TT (bf16)
  OUT/global_stepN/mp_rank_MM_model_states.pt       engine + client state of model-parallel rank MM = stage * tp + t
  OUT/global_stepN/[bf16_]zero_pp_rank_D_mp_rank_MM_optim_states.pt  ZeRO-1 partitions of data-parallel rank D
With --format megatron, the fork's checkpoints without --deepspeed (megatron/checkpointing.py save_checkpoint, the
Float16OptimizerWithFloat16Params state_dict, _get_params_for_weight_decay_optimization's parameter groups):
  OUT/latest_checkpointed_iteration.txt             "N"
  OUT/iter_000000N/mp_rank_TT[_SSS]/model_optim_rng.pt
The universal checkpoint is read with torch.load, so this also checks that megaton writes files torch reads.
Also writes OUT/bad/ with damaged files for the error tests.
"""
import argparse
import collections
import enum
import os
import random
import sys
import types

import numpy as np
import torch


def fake_module(name, **attrs):
    """Modules the pickles refer to (megatron.enums, DeepSpeed's records) without installing them."""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    mod = sys.modules[name]
    for k, v in attrs.items():
        v.__module__ = name
        setattr(mod, k, v)
    return mod


class PositionEmbeddingType(enum.Enum):
    rotary = 1
    absolute = 2
    alibi = 3


fragment_address = collections.namedtuple("fragment_address", ["numel", "start"])


class DynamicLossScaler:
    def __init__(self):
        self.cur_scale = 4096.0
        self.cur_iter = 7
        self.last_overflow_iter = -1
        self.scale_factor = 2.0
        self.scale_window = 1000
        self.min_scale = 1.0
        self.delayed_shift = 2
        self.cur_hysteresis = 2
        self.consecutive_hysteresis = False


class Evil:
    """A class no checkpoint holds: the reader must refuse it, not build it."""


fake_module("megatron.enums", PositionEmbeddingType=PositionEmbeddingType)
fake_module("deepspeed.utils.tensor_fragment", fragment_address=fragment_address)
fake_module("deepspeed.runtime.fp16.loss_scaler", DynamicLossScaler=DynamicLossScaler)
fake_module("os_helpers", Evil=Evil)

TP_SPLIT_DIM0 = ("word_embeddings.weight", "query_key_value.weight", "query_key_value.bias",
                 "dense_h_to_4h.weight", "dense_h_to_4h.bias")
TP_SPLIT_DIM1 = ("self_attention.dense.weight", "dense_4h_to_h.weight")


def split_dim(name):
    if name.endswith(TP_SPLIT_DIM1):
        return 1
    if name.endswith(TP_SPLIT_DIM0) and not name.endswith("norm.weight"):
        return 0
    return None


def layer_of(name):
    if name.startswith("tied_modules.embed."):
        return 1, name[len("tied_modules.embed."):]
    idx, rest = name.split(".", 1)
    return int(idx), rest


def is_weight_decay(name):
    return not (name.endswith("bias") or "layernorm" in name or "norm." in name or
                (name.split(".", 1)[1] == "weight" and name.split(".")[0].isdigit()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("universal")
    ap.add_argument("out")
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--optimizer", choices=["bf16", "zero"], default="bf16")
    ap.add_argument("--format", choices=["deepspeed", "megatron"], default="deepspeed")
    ap.add_argument("--checkpoint-version", type=float, default=3.0)
    a = ap.parse_args()
    tp, pp, dp = a.tp, a.pp, a.dp

    mp0 = torch.load(os.path.join(a.universal, "mp_rank_00_model_states.pt"), weights_only=False)
    args = mp0["args"]
    assert isinstance(args, argparse.Namespace), type(args)
    assert isinstance(args.position_embedding_type, PositionEmbeddingType), args.position_embedding_type
    iteration = mp0["iteration"]
    zero = os.path.join(a.universal, "zero")
    names = sorted(os.listdir(zero), key=lambda n: (layer_of(n)[0], n))
    full = {}
    step = None
    for n in names:
        d = {s: torch.load(os.path.join(zero, n, s + ".pt")) for s in ("fp32", "exp_avg", "exp_avg_sq")}
        full[n] = {s: d[s]["param"] for s in d}
        for s in d:
            assert d[s]["param"].dtype == torch.float32
            assert ("cat_dim" in d[s]) == (split_dim(n) is not None), (n, d[s].keys())
        st = torch.load(os.path.join(zero, n, "step.pt"))
        step = int(st) if step is None else step
        assert int(st) == step
    # the stages: GPTModelPipe's layers 3 .. 3+L-1 are the transformer layers, spread evenly
    L = args.num_layers
    per = [L // pp + (1 if s < L % pp else 0) for s in range(pp)]
    first = [3 + sum(per[:s]) for s in range(pp)]

    def stage_has(n, s):
        layer, _ = layer_of(n)
        if layer == 1:
            return s == 0 or s == pp - 1
        if layer == L + 4:
            return s == pp - 1
        return first[s] <= layer < first[s] + per[s]

    def local(n, t, state="fp32"):
        x = full[n][state]
        dim = split_dim(n)
        return x if dim is None else x.chunk(tp, dim)[t].contiguous()

    if a.format == "megatron":
        write_megatron(a, args, mp0, names, full, local, step, iteration, per)
        write_bad(a.out, os.path.join(a.out, f"iter_{iteration:07d}", "mp_rank_00_000" if pp > 1 else "mp_rank_00",
                                      "model_optim_rng.pt"))
        return
    tag = f"global_step{iteration}"
    out = os.path.join(a.out, tag)
    os.makedirs(out, exist_ok=True)
    dtype = torch.bfloat16 if args.bf16 else (torch.float16 if args.fp16 else torch.float32)

    # layer files: each layer's weights per TP rank (the embedding only on the first stage: the head's copy is a
    # TiedLayerSpec with forward_fn, which DeepSpeed does not save)
    layers = collections.OrderedDict()
    for n in names:
        layer, rest = layer_of(n)
        layers.setdefault(layer, []).append((rest, n))
    for layer, items in layers.items():
        for t in range(tp):
            sd = collections.OrderedDict((rest, local(n, t).to(dtype)) for rest, n in items)
            torch.save(sd, os.path.join(out, f"layer_{layer:02d}-model_{t:02d}-model_states.pt"))

    new_args = argparse.Namespace(**vars(args))
    new_args.tensor_model_parallel_size, new_args.pipeline_model_parallel_size = tp, pp
    new_args.data_parallel_size = dp
    for s in range(pp):
        for t in range(tp):
            m = s * tp + t
            mine = [n for n in names if stage_has(n, s)]
            groups = [[n for n in mine if is_weight_decay(n)], [n for n in mine if not is_weight_decay(n)]]
            param_shapes = [collections.OrderedDict((n, local(n, t).shape) for n in g) for g in groups]
            state = dict(module=None, buffer_names=[], optimizer=None, param_shapes=param_shapes,
                         lr_scheduler=mp0["lr_scheduler"], sparse_tensor_module_names=set(), skipped_steps=0,
                         global_steps=iteration, global_samples=mp0["global_samples"], dp_world_size=dp,
                         mp_world_size=tp * pp, ds_config={"train_batch_size": args.global_batch_size,
                                                           "bf16": {"enabled": bool(args.bf16)},
                                                           "zero_optimization": {"stage": 1}},
                         ds_version="0.7.3")
            state.update(args=new_args, checkpoint_version=3.0, iteration=iteration, tokens=mp0["tokens"],
                         checkpoint_info=mp0["checkpoint_info"], random_rng_state=random.getstate(),
                         np_rng_state=np.random.get_state(), torch_rng_state=torch.get_rng_state(),
                         cuda_rng_state=torch.get_rng_state(),
                         rng_tracker_states={"model-parallel-rng": torch.get_rng_state()})
            torch.save(state, os.path.join(out, f"mp_rank_{m:02d}_model_states.pt"))

            # ZeRO-1: each group flattened in param_shapes order, padded at the end to a multiple of 2 * dp
            # (DeepSpeed's nccl_start_alignment_factor), then split in dp equal partitions.
            flats = {}
            for key in ("fp32", "exp_avg", "exp_avg_sq"):
                flats[key] = []
                for g in groups:
                    x = torch.cat([local(n, t, key).reshape(-1) for n in g])
                    align = 2 * dp
                    pad = (-x.numel()) % align
                    flats[key].append((torch.cat([x, torch.zeros(pad)]), pad))
            for d in range(dp):
                parts = {k: [f.chunk(dp)[d].clone() for f, _ in v] for k, v in flats.items()}
                pads = [pad if d == dp - 1 else 0 for _, pad in flats["fp32"]]
                if a.optimizer == "bf16":
                    mappings = []
                    for gi, g in enumerate(groups):
                        size = parts["fp32"][gi].numel()
                        lo, hi, off, mp = d * size, (d + 1) * size, 0, collections.OrderedDict()
                        for n in g:
                            k = local(n, t).numel()
                            s0, e0 = max(off, lo), min(off + k, hi)
                            if s0 < e0:
                                mp[n] = fragment_address(numel=e0 - s0, start=s0 - lo)
                            off += k
                        mappings.append(mp)
                    base = {"state": {gi: {"step": torch.tensor(float(step)), "exp_avg": parts["exp_avg"][gi],
                                           "exp_avg_sq": parts["exp_avg_sq"][gi]} for gi in range(len(groups))},
                            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8,
                                              "weight_decay": 0.01 if gi == 0 else 0.0, "params": [gi]}
                                             for gi in range(len(groups))]}
                    osd = {"clip_grad": 1.0, "base_optimizer_state": base,
                           "single_partition_of_fp32_groups": parts["fp32"], "group_paddings": pads,
                           "partition_count": [dp] * len(groups), "ds_version": "0.7.3",
                           "param_slice_mappings": mappings}
                    name = f"bf16_zero_pp_rank_{d}_mp_rank_{m:02d}_optim_states.pt"
                else:  # DeepSpeedZeroOptimizer (stage 1): lean partitions, padding removed, and the loss scaler
                    def lean(x, pad):
                        return x[: x.numel() - pad] if pad else x
                    base = [{"step": step, "exp_avg": lean(parts["exp_avg"][gi], pads[gi]),
                             "exp_avg_sq": lean(parts["exp_avg_sq"][gi], pads[gi])} for gi in range(len(groups))]
                    osd = {"loss_scaler": DynamicLossScaler(), "dynamic_loss_scale": True, "overflow": False,
                           "clip_grad": 1.0, "base_optimizer_state": base,
                           "single_partition_of_fp32_groups": [lean(p, pads[gi]) for gi, p in enumerate(parts["fp32"])],
                           "zero_stage": 1, "group_paddings": pads, "partition_count": [dp] * len(groups),
                           "ds_version": "0.7.3"}
                    name = f"zero_pp_rank_{d}_mp_rank_{m:02d}_optim_states.pt"
                torch.save({"optimizer_state_dict": osd, "ds_config": state["ds_config"], "ds_version": "0.7.3"},
                           os.path.join(out, name))
    with open(os.path.join(a.out, "latest"), "w") as f:
        f.write(tag)

    write_bad(a.out, os.path.join(out, "mp_rank_00_model_states.pt"))
    print(f"wrote {out}: TP={tp} PP={pp} DP={dp}, {a.optimizer} optimizer, iteration {iteration}, step {step}")


def write_bad(root, src):
    """Damaged and foreign files for the error tests."""
    bad = os.path.join(root, "bad")
    os.makedirs(bad, exist_ok=True)
    data = open(src, "rb").read()
    open(os.path.join(bad, "truncated.pt"), "wb").write(data[: len(data) // 2])
    torch.save({"x": torch.ones(2), "payload": Evil()}, os.path.join(bad, "foreign.pt"))
    torch.save({"x": torch.ones(2)}, os.path.join(bad, "legacy.pt"), _use_new_zipfile_serialization=False)


def megatron_key(n, lo, L):
    """The model state dict path of DeepSpeed parameter name n: (top-level keys..., flat key)."""
    if n.startswith("tied_modules.embed."):
        rest = n[len("tied_modules.embed."):]
        module, key = rest.split(".", 1)  # word_embeddings / position_embeddings
        return ("language_model", "embedding", module), key
    layer, rest = n.split(".", 1)
    if int(layer) == L + 4:
        return ("language_model", "encoder"), "final_layernorm." + rest
    return ("language_model", "encoder"), f"layers.{int(layer) - 3 - lo}.{rest}"


def write_megatron(a, args, mp0, names, full, local, step, iteration, per):
    tp, pp, L = a.tp, a.pp, args.num_layers
    dtype = torch.bfloat16 if args.bf16 else (torch.float16 if args.fp16 else torch.float32)
    np_local, hn = args.num_attention_heads // tp, args.hidden_size // args.num_attention_heads
    within = ["input_layernorm.weight", "input_layernorm.bias", "self_attention.query_key_value.weight",
              "self_attention.query_key_value.bias", "self_attention.dense.weight", "self_attention.dense.bias",
              "post_attention_layernorm.weight", "post_attention_layernorm.bias", "mlp.dense_h_to_4h.weight",
              "mlp.dense_h_to_4h.bias", "mlp.dense_4h_to_h.weight", "mlp.dense_4h_to_h.bias"]

    def old_qkv(x):  # checkpoint_version 3's [np, 3, hn] rows -> the older orders
        if a.checkpoint_version >= 2:
            return x
        rest = list(x.shape[1:])
        y = x.reshape([np_local, 3, hn] + rest)
        y = y.transpose(0, 1) if a.checkpoint_version == 0 else y.transpose(1, 2)
        return y.contiguous().reshape(x.shape)

    d = os.path.join(a.out, f"iter_{iteration:07d}")
    for s in range(pp):
        lo = s * (L // pp)
        first, last = s == 0, s == pp - 1
        order = []  # (ds name, weight decay, is head copy) in module traversal order
        if first:
            for n in ("tied_modules.embed.word_embeddings.weight", "tied_modules.embed.word_embeddings.norm.weight",
                      "tied_modules.embed.word_embeddings.norm.bias",
                      "tied_modules.embed.position_embeddings.weight"):
                if n in full:
                    order.append((n, not n.endswith(("norm.weight", "norm.bias")), False))
        for i in range(lo, lo + L // pp):
            for w in within:
                order.append((f"{3 + i}.{w}", w.endswith("weight") and "layernorm" not in w, False))
        if last:
            order += [(f"{L + 4}.weight", False, False), (f"{L + 4}.bias", False, False)]
            if not first:
                order.append(("tied_modules.embed.word_embeddings.weight", True, True))
        wd = [o for o in order if o[1]]
        groups = [wd[: len(wd) // 2], wd[len(wd) // 2:], [o for o in order if not o[1]]]
        for t in range(tp):
            model = {"language_model": {"embedding": {}, "encoder": collections.OrderedDict()}}
            if first:
                model["language_model"]["embedding"] = {"word_embeddings": collections.OrderedDict(),
                                                        "position_embeddings": collections.OrderedDict()}
            state, pgroups, masters, idx = {}, [], [], 0

            def value(n, key="fp32"):
                x = local(n, t, key)
                return old_qkv(x) if "query_key_value" in n else x
            for gi, g in enumerate(groups):
                ids, ms = [], []
                for n, _, head in g:
                    if head:
                        model["word_embeddings_for_head"] = {"weight": value(n).to(dtype)}
                    else:
                        path, key = megatron_key(n, lo, L)
                        node = model
                        for k in path:
                            node = node.setdefault(k, collections.OrderedDict())
                        node[key] = value(n).to(dtype)
                    state[idx] = {"exp_avg": value(n, "exp_avg"), "exp_avg_sq": value(n, "exp_avg_sq"),
                                  "step": torch.tensor(float(step))}
                    ids.append(idx)
                    ms.append(value(n))
                    idx += 1
                pgroups.append({"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.0 if gi == 2 else 0.01,
                                "params": ids})
                masters.append(ms)
            if not first:
                del model["language_model"]["embedding"]
            optimizer = {"optimizer": {"state": state, "param_groups": pgroups}, "fp32_from_fp16_params": masters}
            sd = {"args": args, "checkpoint_version": a.checkpoint_version, "iteration": iteration,
                  "tokens": mp0["tokens"], "checkpoint_info": mp0["checkpoint_info"], "model": model,
                  "optimizer": optimizer, "lr_scheduler": mp0["lr_scheduler"], "random_rng_state": random.getstate(),
                  "np_rng_state": np.random.get_state(), "torch_rng_state": torch.get_rng_state(),
                  "cuda_rng_state": torch.get_rng_state(),
                  "rng_tracker_states": {"model-parallel-rng": torch.get_rng_state()}}
            rank = f"mp_rank_{t:02d}" if pp == 1 else f"mp_rank_{t:02d}_{s:03d}"
            os.makedirs(os.path.join(d, rank), exist_ok=True)
            torch.save(sd, os.path.join(d, rank, "model_optim_rng.pt"))
    with open(os.path.join(a.out, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(iteration))
    print(f"wrote {d}: Megatron format, TP={tp} PP={pp}, checkpoint_version {a.checkpoint_version}")


if __name__ == "__main__":
    main()
