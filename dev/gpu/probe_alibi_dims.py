"""Which q/k head size should ALiBi's fold pad to? Causal SDPA forward + backward (bf16, cuDNN's choice) with v at the
model's head size d and q, k at d' = d + 8 and wider (the fold's extra columns padded with zeros), at the 124M and
1.3B attention shapes, against d' = d (no ALiBi). Prints ms per call and the kernels' names.
    python3 perf/gpu/probe_alibi_dims.py
"""
import torch

from probe_util import timed

print("torch", torch.__version__, torch.cuda.get_device_name(0))
for b, s, h, d in ((32, 1024, 12, 64), (8, 2048, 16, 128)):
    v = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    do = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    for dq in sorted({d, d + 8, d + 16, d + 32, d + 64, 2 * d} - {0}):
        q = torch.randn(b, h, s, dq, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, h, s, dq, device="cuda", dtype=torch.bfloat16, requires_grad=True)

        def step():
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=d ** -0.5)
            o.backward(do)

        try:
            ms = timed(step, reps=30, warmup=3)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            names = sorted({e.name[:60] for e in prof.events() if "sdpa" in e.name or "flash" in e.name
                            or "fmha" in e.name or "attention" in e.name.lower()})
            print(f"b{b} s{s} h{h} d{d} q/k head {dq}: {ms:.2f} ms", names)
        except Exception as e:  # noqa: BLE001
            print(f"b{b} s{s} h{h} d{d} q/k head {dq}: FAILED", str(e).splitlines()[0][:200])
