"""Does cuDNN have a faster causal-attention kernel than the one torch's heuristic picks? Through cuDNN's Python
frontend (`import cudnn`, the nvidia-cudnn-frontend wheel), builds the SDPA forward and backward graphs at the 1.3B
and 124M attention shapes (bf16, causal, q, k, v in megaton's [s, b, np, 3, d] layout), builds every execution plan
cuDNN offers for each (heuristics A and FALLBACK, policy ALL) and times each plan, beside torch's SDPA on the same
tensors. When the frontend is not installed it says so, lists the cuDNN pieces it found, and exits 0: what calling
cuDNN directly from megaton would need on the node.
    python3 perf/gpu/probe_cudnn_plans.py
"""
import glob
import os
import sys

import torch

from probe_util import timed

print("torch", torch.__version__, torch.cuda.get_device_name(0), "cuDNN", torch.backends.cudnn.version())
try:
    import cudnn
except ImportError as e:
    print("no cuDNN Python frontend:", e)
    for root in sys.path:
        for hit in glob.glob(os.path.join(root, "nvidia", "cudnn*")) + glob.glob(os.path.join(root, "cudnn*")):
            inc = os.path.join(hit, "include")
            headers = sorted(os.listdir(inc)) if os.path.isdir(inc) else []
            print(" found", hit, "headers:", " ".join(headers[:12]) or "none")
    sys.exit(0)

print("cudnn frontend", getattr(cudnn, "__version__", "?"), "backend", cudnn.backend_version())
handle = cudnn.create_handle()
cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
BF16, F32 = cudnn.data_type.BFLOAT16, cudnn.data_type.FLOAT


def graph():
    return cudnn.pygraph(io_data_type=BF16, intermediate_data_type=F32, compute_data_type=F32, handle=handle)


def finish(g):
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans(cudnn.build_plan_policy.ALL)
    return g.get_execution_plan_count()


def time_plans(g, pack, label, flops):
    count = g.get_execution_plan_count()
    for i in range(count):
        try:
            ws = torch.empty(max(1, g.get_workspace_size_plan_at_index(i)), device="cuda", dtype=torch.uint8)
            ms = timed(lambda: g.execute_plan_at_index(pack, ws, i, handle=handle), reps=20, warmup=2)
            print(f"  {label} plan {i}{' (heuristic first)' if i == 0 else ''}: {ms:.3f} ms, "
                  f"{flops / ms * 1e-9:.0f} TFLOP/s")
        except Exception as e:  # noqa: BLE001
            print(f"  {label} plan {i}: FAILED", str(e).splitlines()[0][:160])


for b, s, h, d in ((8, 2048, 16, 128), (32, 1024, 12, 64)):
    qkv = torch.randn(s, b, h, 3, d, device="cuda", dtype=torch.bfloat16)  # megaton's [s, b, np, 3, d]
    q, k, v = (qkv[:, :, :, i].permute(1, 2, 0, 3) for i in range(3))  # [b, np, s, d] views
    o = torch.empty(s, b, h, d, device="cuda", dtype=torch.bfloat16).permute(1, 2, 0, 3)  # [b, np, s, d] of [s, b, np, d]
    stats = torch.empty(b, h, s, 1, device="cuda", dtype=torch.float32)
    do = torch.randn_like(o)
    dqkv = torch.empty_like(qkv)  # the gradients written straight into the QKV gradient's layout
    dq, dk, dv = (dqkv[:, :, :, i].permute(1, 2, 0, 3) for i in range(3))
    scale = d ** -0.5
    fwd_flops = 2 * 2 * b * h * s * s * d / 2  # causal: half the scores
    print(f"b{b} s{s} np{h} d{d}")
    try:
        gf = graph()
        tq, tk, tv = gf.tensor_like(q), gf.tensor_like(k), gf.tensor_like(v)
        to, ts = gf.sdpa(name="sdpa", q=tq, k=tk, v=tv, is_inference=False, attn_scale=scale, use_causal_mask=True)
        to.set_output(True).set_dim(o.size()).set_stride(o.stride())
        ts.set_output(True).set_dim(stats.size()).set_stride(stats.stride()).set_data_type(F32)
        print(f"  forward: {finish(gf)} plans")
        time_plans(gf, {tq: q, tk: k, tv: v, to: o, ts: stats}, "forward", fwd_flops)
        gb = graph()
        bq, bk, bv, bo, bdo, bs = (gb.tensor_like(t) for t in (q, k, v, o, do, stats))
        bdq, bdk, bdv = gb.sdpa_backward(name="sdpa_backward", q=bq, k=bk, v=bv, o=bo, dO=bdo, stats=bs,
                                         attn_scale=scale, use_causal_mask=True)
        for t, ref in ((bdq, dq), (bdk, dk), (bdv, dv)):
            t.set_output(True).set_dim(ref.size()).set_stride(ref.stride())
        print(f"  backward: {finish(gb)} plans")
        time_plans(gb, {bq: q, bk: k, bv: v, bo: o, bdo: do, bs: stats, bdq: dq, bdk: dk, bdv: dv}, "backward",
                   2.5 * fwd_flops)
    except Exception as e:  # noqa: BLE001
        print("  graph FAILED:", str(e).splitlines()[0][:200])
    qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))

    def torch_step():
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True, scale=scale)
        out.backward(do)

    print(f"  torch SDPA forward + backward: {timed(torch_step, reps=20, warmup=2):.3f} ms")
