"""What this torch offers ALiBi attention on the GPU node: the schemas of ATen's flash entry points, whether its flash
kernel takes ALiBi slopes (forward and backward), and the time of each way at the 124M and 1.3B shapes (bf16,
forward + backward): SDPA with megaton's additive [1, heads, s, s] mask (what --position-embedding-type alibi runs
now), SDPA causal without ALiBi (the floor), and the flash kernel with slopes; the flash results checked against
the masked SDPA. Prints one line per finding.
    python3 perf/gpu/probe_alibi_flash.py
"""
import math

import torch

from probe_util import timed

aten = torch.ops.aten
print("torch", torch.__version__, torch.cuda.get_device_name(0))
for name in ("_flash_attention_forward", "_flash_attention_backward"):
    print("schema", getattr(aten, name).default._schema)


def slopes(n):
    # Megatron-DeepSpeed's get_slopes for a power-of-two head count
    start = 2 ** (-(2 ** -(math.log2(n) - 3)))
    return torch.tensor([start * start**i for i in range(n)], dtype=torch.float32)


for b, s, h, d in ((32, 1024, 12, 64), (8, 2048, 16, 128)):
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
    sl = slopes(h).cuda()
    bias = sl.view(h, 1, 1) * torch.arange(s, device="cuda").view(1, 1, s)  # [h, 1, s]: slope * key position
    mask = (bias + torch.full((s, s), -math.inf, device="cuda").triu(1)).to(torch.bfloat16).unsqueeze(0)

    def sdpa_masked():
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
        return o.transpose(1, 2)

    def sdpa_causal():
        o = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return o.transpose(1, 2)

    # The reference: fp32 arithmetic with the fp32 bias.
    q32, k32, v32 = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    sc = torch.einsum("bihd,bjhd->bhij", q32, k32) / math.sqrt(d) + bias.unsqueeze(0)
    sc = sc.masked_fill(torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1), -math.inf)
    ref = torch.einsum("bhij,bjhd->bihd", sc.softmax(-1), v32)
    ref.backward(do.float())
    gref = [t.grad.clone() for t in (q32, k32, v32)]
    del sc, q32, k32, v32
    tag = f"b{b} s{s} h{h} d{d}"
    out = sdpa_masked()
    out.backward(do)
    errs = [((t.grad.float() - r).abs().max() / r.abs().max()).item() for t, r in zip((q, k, v), gref)]
    err = ((out.float() - ref.detach()).abs().max() / ref.detach().abs().max()).item()
    print(tag, f"masked (bf16 bias) rel err out {err:.2e} dq dk dv", " ".join(f"{e:.2e}" for e in errs))
    for t in (q, k, v):
        t.grad = None
    ms = timed(lambda: sdpa_masked().backward(do))
    print(tag, f"sdpa masked fwd+bwd {ms:.2f} ms")
    ms = timed(lambda: sdpa_causal().backward(do))
    print(tag, f"sdpa causal fwd+bwd {ms:.2f} ms")
    for t in (q, k, v):  # the timing loops' accumulated gradients
        t.grad = None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        sdpa_masked().backward(do)
        torch.cuda.synchronize()
    names = sorted({e.name[:90] for e in prof.events() if "attention" in e.name.lower() or "fmha" in e.name.lower()
                    or "sdpa" in e.name.lower() or "flash" in e.name.lower()})
    print(tag, "masked kernels:", names)
    # ALiBi folded into 8 extra head dimensions (the slope * sqrt(d) split into two bf16 parts, the key position into
    # j mod 256 and 256 * (j div 256), all exact in bf16): causal SDPA of [q, a] and [k, c] with the scale 1 / sqrt(d)
    # gives q k / sqrt(d) + slope * j without a mask, so the kernel skips the upper triangle.
    sd = sl * math.sqrt(d)
    hi = sd.to(torch.bfloat16)
    lo = (sd - hi.float()).to(torch.bfloat16)
    j = torch.arange(s, device="cuda")
    j1 = torch.div(j, 256, rounding_mode="floor")
    j0 = j - 256 * j1
    zq = torch.zeros(h, 4, device="cuda", dtype=torch.bfloat16)
    qa = torch.cat([hi.view(h, 1), hi.view(h, 1), lo.view(h, 1), lo.view(h, 1), zq], 1)  # [h, 8]
    kc = torch.stack([j0, 256 * j1, j0, 256 * j1] + [torch.zeros_like(j)] * 4, 1).to(torch.bfloat16)  # [s, 8]
    for pad_v in (False, True):
        def aug():
            qq = torch.cat([q, qa.view(1, 1, h, 8).expand(b, s, h, 8)], -1)
            kk = torch.cat([k, kc.view(1, s, 1, 8).expand(b, s, h, 8)], -1)
            vv = torch.cat([v, torch.zeros(b, s, h, 8, device="cuda", dtype=v.dtype)], -1) if pad_v else v
            o = torch.nn.functional.scaled_dot_product_attention(
                qq.transpose(1, 2), kk.transpose(1, 2), vv.transpose(1, 2), is_causal=True, scale=1 / math.sqrt(d))
            o = o.transpose(1, 2)
            return o[..., :d] if pad_v else o
        try:
            for t in (q, k, v):
                t.grad = None
            out = aug()
            out.backward(do)
            g = [t.grad.clone() for t in (q, k, v)]
            for t in (q, k, v):
                t.grad = None
            err = ((out.float() - ref.detach().float()).abs().max() / ref.detach().float().abs().max()).item()
            errs = [((a.float() - b.float()).abs().max() / b.float().abs().max()).item() for a, b in zip(g, gref)]
            ms = timed(lambda: aug().backward(do))
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                aug().backward(do)
                torch.cuda.synchronize()
            names = sorted({e.name[:70] for e in prof.events() if "sdpa" in e.name.lower() or "flash" in e.name.lower()
                            or "fmha" in e.name.lower() or "attention" in e.name.lower()})
            print(tag, f"augmented (v padded {pad_v}) fwd+bwd {ms:.2f} ms; rel err out {err:.2e} dq dk dv",
                  " ".join(f"{e:.2e}" for e in errs), names)
        except Exception as e:  # noqa: BLE001
            print(tag, f"augmented (v padded {pad_v}): FAILED", str(e).splitlines()[0][:300])
