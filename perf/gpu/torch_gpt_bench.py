# The PyTorch baseline of docs/performance.md: a plain PyTorch GPT training step (bf16 autocast, SDPA flash attention,
# fused AdamW), eager. The configs to
# run can be picked on the command line, e.g. `python3 perf/gpu/torch_gpt_bench.py 124M 1.3B`; names: 124M, 350M,
# 1.3B, 1.3B-compile, 124M-compile, 2.7B (32 x 2560, micro-batch 2), 2.7B-compile, or custom:L,h,heads,S,B for any
# dims; no argument runs the first five, in the peer's order. PEER_PROFILE_DIR=DIR also records 2 more steps of each config with torch.profiler and writes
# DIR/peer_<name>.summary.txt: CUDA kernels by total time, in the format of `megaton train --profile`'s summary.
# PEER_SUSTAINED=1 measures with megaton's sustained protocol instead (30 steps, windows of 5, the median of steps
# 11-30: the GPU at its power limit; a line starting "sustained "), for a comparison under one protocol.
# Anchor: a plain PyTorch GPT (Megatron-style dims) training step, bf16, SDPA flash attention, fused AdamW.
import math, os, statistics, time, sys, torch, torch.nn as nn, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = True
class Block(nn.Module):
    def __init__(s, h, nh):
        super().__init__(); s.nh = nh
        s.ln1 = nn.LayerNorm(h); s.qkv = nn.Linear(h, 3*h); s.proj = nn.Linear(h, h)
        s.ln2 = nn.LayerNorm(h); s.fc1 = nn.Linear(h, 4*h); s.fc2 = nn.Linear(4*h, h)
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, s.nh, C//s.nh).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + s.proj(y)
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x)), approximate='tanh'))
class GPT(nn.Module):
    def __init__(s, L, h, nh, V, S):
        super().__init__()
        s.wte = nn.Embedding(V, h); s.wpe = nn.Embedding(S, h)
        s.blocks = nn.ModuleList([Block(h, nh) for _ in range(L)]); s.lnf = nn.LayerNorm(h)
    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in s.blocks: x = b(x)
        logits = F.linear(s.lnf(x), s.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))
def profile(name, step, out_dir, steps=2):
    from torch.profiler import profile as tprofile, ProfilerActivity
    with tprofile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(steps): step()
        torch.cuda.synchronize()
    rows = {}
    for e in p.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            r = rows.setdefault(e.name, [0, 0.0]); r[0] += 1; r[1] += e.time_range.elapsed_us()
    total = sum(r[1] for r in rows.values())
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"peer_{name}.summary.txt"), "w") as f:
        f.write(f"# cuda: {total / 1000 / steps:.3f} ms per step over {steps} profiled step(s) (kernels and copies, summed)\n")
        f.write(f"{'device':<6} {'calls':>10} {'total_ms':>12} {'ms/step':>12} {'share':>7}  name\n")
        for n, (c, t) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
            f.write(f"{'cuda':<6} {c:>10} {t / 1000:>12.3f} {t / 1000 / steps:>12.3f} {100 * t / max(total, 1e-9):>6.1f}%  {n[:200]}\n")
def run(name, L, h, nh, S, B, V=50304, compile=False, steps=10):
    torch.manual_seed(0)
    m = GPT(L, h, nh, V, S).cuda()
    N = sum(p.numel() for p in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    f = torch.compile(m) if compile else m
    idx = torch.randint(0, V, (B, S), device='cuda'); tgt = torch.randint(0, V, (B, S), device='cuda')
    def step():
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = f(idx, tgt)
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        return loss
    # Megatron formula (no recompute): 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) per iteration
    flops = 72 * B * S * L * h * h * (1 + S / (6 * h) + V / (12 * L * h))
    if os.environ.get("PEER_SUSTAINED"):
        # megaton's sustained protocol instead of the anchor's: 30 steps from the first (no separate warm-up), timed in
        # windows of 5 (a synchronisation at each window's end, as megaton's log line every 5 iterations reads the
        # loss), the median of the windows that end at steps 15, 20, 25, 30. The line starts with "sustained ".
        windows = []
        torch.cuda.synchronize(); t0 = time.time()
        for i in range(1, 31):
            loss = step()
            if i % 5 == 0:
                torch.cuda.synchronize(); t1 = time.time(); windows.append((t1 - t0) / 5); t0 = t1
        dt = statistics.median(windows[2:])  # the 4 windows of steps 11-30
        print(f"sustained {name} compile={compile} params={N/1e6:.0f}M B={B} S={S}: {dt*1000:.1f} ms/it, "
              f"{B * S / dt:,.0f} tok/s, {flops/dt/1e12:.0f} TFLOP/s model, mem "
              f"{torch.cuda.max_memory_allocated()/2**30:.1f} GiB, loss {loss.item():.3f}, windows ms "
              + " ".join(f"{w * 1000:.1f}" for w in windows), flush=True)
        del m, opt, f; torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
        return
    for _ in range(3): step()
    torch.cuda.synchronize(); t0 = time.time()
    for _ in range(steps): loss = step()
    torch.cuda.synchronize(); dt = (time.time() - t0) / steps
    tok = B * S / dt
    print(f"{name} compile={compile} params={N/1e6:.0f}M B={B} S={S}: {dt*1000:.0f} ms/it, {tok:,.0f} tok/s, "
          f"{flops/dt/1e12:.0f} TFLOP/s model, mem {torch.cuda.max_memory_allocated()/2**30:.1f} GiB, loss {loss.item():.3f}", flush=True)
    if os.environ.get("PEER_PROFILE_DIR"):
        profile(name + ("-compile" if compile else ""), step, os.environ["PEER_PROFILE_DIR"])
    del m, opt, f; torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
CONFIGS = {  # name -> the peer's run(...) arguments, in the peer's order
    "124M": (("gpt2-124M", 12, 768, 12, 1024, 32), {}),
    "350M": (("gpt-350M", 24, 1024, 16, 1024, 16), {}),
    "1.3B": (("gpt-1.3B", 24, 2048, 16, 2048, 8), {}),
    "1.3B-compile": (("gpt-1.3B", 24, 2048, 16, 2048, 8), {"compile": True}),
    "124M-compile": (("gpt2-124M", 12, 768, 12, 1024, 32), {"compile": True}),
    "2.7B": (("gpt-2.7B", 32, 2560, 32, 2048, 2), {}),
    "2.7B-compile": (("gpt-2.7B", 32, 2560, 32, 2048, 2), {"compile": True}),
}
wanted = sys.argv[1:] or list(CONFIGS)[:5]
for w in wanted:  # custom:L,h,heads,S,B — any dims (used by perf/sweep/sweep.py)
    if w.startswith("custom:"):
        L, h, nh, S, B = (int(x) for x in w[len("custom:"):].split(","))
        CONFIGS[w] = ((f"custom-L{L}-h{h}", L, h, nh, S, B), {})
for w in wanted:
    if w not in CONFIGS:
        sys.exit(f"torch_gpt_bench.py: unknown config '{w}'; expected one of {', '.join(CONFIGS)}")
for w in wanted:
    args, kw = CONFIGS[w]
    run(*args, **kw)
