"""How fast can a bf16 GPT training step be on this GPU with cuBLAS's GEMMs and cuDNN's attention, at its power cap?

Runs only the step's matrix products and attention -- every GEMM of the forward and backward passes (QKV, attention
output, fc1, fc2 and the LM head, each with its input and weight gradients) and cuDNN's causal flash attention
forward and backward, layer by layer in the step's order -- with nothing else between them: no LayerNorm, GELU,
bias, loss, optimizer, gradient norm or copies. The weight gradients are written in bf16 (training writes fp32 main
grads: more bytes), so each number here is a floor on the real step's time, and a ceiling on its model-TFLOP/s
(Megatron's formula, the one `megaton train` and the peer print).

Phases, each run back to back for WARM_S seconds (the GPU reaches its power limit and lowers its clock, as in a long
training run) and then timed over TIMED_S seconds: `gemms` (the step's GEMMs alone), `attention` (its attention
alone), `gemms+attention` (both, in the step's order). `cool` times the same work in short bursts after an idle
pause, at the boost clock. nvidia-smi's power and SM clock are sampled every 100 ms over each timed window.

    python3 dev/gpu/probe_step_bound.py [--config 1.3B|124M] [--warm 12] [--timed 6]
"""
import argparse
import subprocess
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

DIMS = {"124M": (12, 768, 1024, 32), "1.3B": (24, 2048, 2048, 8)}  # layers, hidden, seq, micro-batch
V = 50304  # GPT-2's vocabulary padded to a multiple of 128


def tflops(name, ms):
    """Megatron's model TFLOP/s of one step of `name` taking `ms`: 72 B s l h^2 (1 + s/6h + V/12lh)."""
    L, h, s, b = DIMS[name]
    return 72 * b * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h)) / (ms * 1e-3) / 1e12

HEADS = {"124M": 12, "1.3B": 16}


class Step:
    """The step's GEMMs and attention on preallocated bf16 buffers; gemms/attention switch each part on."""

    def __init__(self, l, h, heads, b, s):
        self.l = l
        t = b * s
        bf = dict(device="cuda", dtype=torch.bfloat16)
        r = lambda *shape: torch.randn(*shape, **bf) * 0.02  # noqa: E731
        self.w = {"qkv": r(3 * h, h), "proj": r(h, h), "fc1": r(4 * h, h), "fc2": r(h, 4 * h)}
        self.head = r(V, h)
        self.x = {"qkv": r(t, h), "proj": r(t, h), "fc1": r(t, h), "fc2": r(t, 4 * h)}  # each linear's input
        self.dy = {"qkv": r(t, 3 * h), "proj": r(t, h), "fc1": r(t, 4 * h), "fc2": r(t, h)}  # its output's gradient
        self.y = {k: torch.empty(t, w.shape[0], **bf) for k, w in self.w.items()}
        self.dx = {k: torch.empty_like(v) for k, v in self.x.items()}
        self.dw = {k: torch.empty_like(w) for k, w in self.w.items()}
        self.logits = torch.empty(t, V, **bf)
        self.dlogits = r(t, V)
        self.dhead = torch.empty_like(self.head)
        self.dfinal = torch.empty(t, h, **bf)
        d = h // heads
        self.q, self.k, self.v = (r(b, heads, s, d).mul_(50).requires_grad_(True) for _ in range(3))  # [b, np, s, d]
        self.do = r(b, heads, s, d)

    def linear_fwd(self, name):
        torch.mm(self.x[name], self.w[name].t(), out=self.y[name])  # [t, in] x [in, out] -> [t, out]

    def linear_bwd(self, name):
        torch.mm(self.dy[name], self.w[name], out=self.dx[name])  # [t, out] x [out, in] -> [t, in]
        torch.mm(self.dy[name].t(), self.x[name], out=self.dw[name])  # [out, t] x [t, in] -> [out, in]

    def attention(self, backward):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)
            if backward:
                torch.autograd.grad(o, (self.q, self.k, self.v), self.do)

    def run(self, gemms, attention):
        for _ in range(self.l):  # forward
            if gemms:
                self.linear_fwd("qkv")
            if attention:
                with torch.no_grad():
                    self.attention(False)
            if gemms:
                for name in ("proj", "fc1", "fc2"):
                    self.linear_fwd(name)
        if gemms:  # the LM head, its input and weight gradients
            torch.mm(self.x["proj"], self.head.t(), out=self.logits)
            torch.mm(self.dlogits, self.head, out=self.dfinal)
            torch.mm(self.dlogits.t(), self.x["proj"], out=self.dhead)
        for _ in range(self.l):  # backward; attention's backward reruns its forward (what autograd needs)
            if gemms:
                for name in ("fc2", "fc1", "proj"):
                    self.linear_bwd(name)
            if attention:
                self.attention(True)
            if gemms:
                self.linear_bwd("qkv")


def attention_fwd_only_ms(step, reps=5):
    """ms of one layer's attention forward (to take the backward's rerun of it out of the attention phases)."""
    torch.cuda.synchronize()
    a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        step.attention(False)
        a.record()
        for _ in range(reps):
            step.attention(False)
        z.record()
    torch.cuda.synchronize()
    return a.elapsed_time(z) / reps


class PowerSampler:
    """nvidia-smi's power draw and SM clock every 100 ms while open."""

    def __enter__(self):
        self.p = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=power.draw,clocks.sm", "--format=csv,noheader,nounits", "-lms", "100"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *_):
        self.p.terminate()
        out, _ = self.p.communicate()
        rows = [[float(x) for x in line.split(",")] for line in out.splitlines() if line.count(",") == 1]
        self.watts = sum(r[0] for r in rows) / len(rows) if rows else float("nan")
        self.mhz = sum(r[1] for r in rows) / len(rows) if rows else float("nan")


def timed_steps(fn, seconds):
    """ms per fn() over at least `seconds` (whole calls, CUDA events)."""
    torch.cuda.synchronize()
    a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    n, t0 = 0, time.perf_counter()
    while n < 2 or time.perf_counter() - t0 < seconds:
        fn()
        n += 1
        if n % 2 == 0:  # at most two steps queued ahead
            torch.cuda.synchronize()
    z.record()
    torch.cuda.synchronize()
    return a.elapsed_time(z) / n, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="1.3B", choices=sorted(DIMS))
    ap.add_argument("--warm", type=float, default=12.0, help="seconds of back-to-back work before timing")
    ap.add_argument("--timed", type=float, default=6.0)
    args = ap.parse_args()
    l, h, s, b = DIMS[args.config]
    heads = HEADS[args.config]
    flops = tflops(args.config, 1e3) * 1e12  # per step: the rate of one step a second
    step = Step(l, h, heads, b, s)
    print(f"probe_step_bound {args.config} on {torch.cuda.get_device_name(0)}, torch {torch.__version__}: "
          f"{l} layers, hidden {h}, {heads} heads, micro-batch {b}, seq {s}; model FLOPs {flops:.4e} a step")
    fwd_ms = attention_fwd_only_ms(step)
    phases = (("gemms", True, False), ("attention", False, True), ("gemms+attention", True, True))
    cool = {}
    for name, g, a in phases:  # bursts at the boost clock: once to build cuDNN's plans, 3 s idle, then 2 calls
        step.run(g, a)
        time.sleep(3)
        cool[name], _ = timed_steps(lambda: step.run(g, a), 0)
    print(f"attention forward, one layer: {fwd_ms:.3f} ms (the backward phases rerun it: "
          f"{fwd_ms * l:.1f} ms a step, taken out of the 'step-equivalent' column)")
    print("phase              cool ms  sustained ms  step-equiv ms  W (mean)  SM MHz  ceiling model-TFLOP/s (sustained)")
    for name, g, a in phases:
        timed_steps(lambda: step.run(g, a), args.warm)
        with PowerSampler() as p:
            ms, n = timed_steps(lambda: step.run(g, a), args.timed)
        eq = ms - (fwd_ms * l if a else 0.0)  # the rerun of attention's forward is not in the real step
        print(f"{name:17s} {cool[name]:8.1f} {ms:13.1f} {eq:14.1f} {p.watts:9.0f} {p.mhz:7.0f}"
              f"  {tflops(args.config, eq):8.0f}   ({n} steps timed)")
    print("(ceiling = model FLOPs / step-equivalent ms of that phase: the real step also runs LayerNorm, GELU, "
          "biases, the loss, Adam and the gradient norm, and writes fp32 weight gradients)")


if __name__ == "__main__":
    main()
