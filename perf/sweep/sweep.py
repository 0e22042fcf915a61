#!/usr/bin/env python3
"""perf/sweep/sweep.py — run `megaton train` over a list of configurations and tabulate what each achieved.

  sweep.py run CONFIGS OUTDIR     run every configuration of CONFIGS (format: perf/sweep/README.md), write
                                  OUTDIR/sweep.csv, sweep.json, sweep.png and one log + metrics JSONL per config
  sweep.py plot OUTDIR            (re)write sweep.json and sweep.png from OUTDIR/sweep.csv
  sweep.py _rss OUT -- CMD...     (internal) run CMD, write the peak RSS of its largest process (KiB) to OUT

Environment: MEGATON (the binary, default build/megaton), MPIRUN (default mpirun), DATA (a Megatron dataset prefix;
default: random tokens below the smallest vocab of CONFIGS, in a temporary directory), PEER (the PyTorch peer script, default perf/gpu/torch_gpt_bench.py), PEER_PYTHON (the Python with torch), MACHINE (a name for the
results directory). Python standard library only, plus matplotlib (Debian python3-matplotlib) for the PNG.
"""
import csv
import datetime
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time

# The columns of sweep.csv, in order. `megaton plan --check FILE` and `--calibration FILE` read them.
COLUMNS = [
    "date", "machine", "device", "peak_tflops", "gpus_per_node", "nodes", "intra_node_gbps", "inter_node_gbps",
    "gpu_memory_gib", "config", "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "seq_length",
    "vocab_size", "padded_vocab", "global_batch_size", "micro_batch_size", "tp", "pp", "dp", "zero_stage",
    "recompute", "precision", "hidden_dropout", "attention_dropout", "extra_args", "status", "iters_timed", "ms_per_iter", "model_tflops_per_gpu", "tokens_per_s",
    "peak_mem_mib", "peak_mem_source", "peer_ms_per_iter", "peer_tflops", "peer_tokens_per_s", "peer_peak_mem_gib",
    "note",
]

# Keys of a configuration line and their defaults (a `defaults` line changes these for the lines after it).
DEFAULTS = {
    "name": "", "layers": "2", "hidden": "64", "heads": "4", "ffn": "0", "seq": "64", "vocab": "50257",
    "padded_vocab": "0", "divisible_by": "128", "gbs": "0", "mb": "1", "tp": "1", "pp": "1", "dp": "1",
    "zero": "0", "recompute": "0", "precision": "fp32", "iters": "8", "skip": "2", "log_interval": "1", "device": "cpu",
    "backend": "mpi", "peak_tflops": "1", "gpus_per_node": "0", "nodes": "1", "intra_node_gbps": "10",
    "inter_node_gbps": "10", "gpu_memory_gib": "0", "peer": "auto", "timeout": "600", "extra": "",
    "hidden_dropout": "0", "attention_dropout": "0",
}


def parse_configs(path):
    """Lines of key=value pairs; `defaults k=v ...` sets defaults; # comments; blank lines ignored."""
    defaults, out = dict(DEFAULTS), []
    for n, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = shlex.split(line)
        is_defaults = words[0] == "defaults"
        kv = {}
        for w in words[1:] if is_defaults else words:
            if "=" not in w:
                sys.exit(f"{path}:{n}: expected key=value, got '{w}'")
            k, v = w.split("=", 1)
            if k not in DEFAULTS:
                sys.exit(f"{path}:{n}: unknown key '{k}' (known: {' '.join(DEFAULTS)})")
            kv[k] = v
        if is_defaults:
            defaults.update(kv)
            continue
        c = dict(defaults)
        c.update(kv)
        if not c["name"]:
            c["name"] = f"L{c['layers']}h{c['hidden']}s{c['seq']}"
        world = int(c["tp"]) * int(c["pp"]) * int(c["dp"])
        if c["gbs"] == "0":
            c["gbs"] = str(int(c["mb"]) * int(c["dp"]))
        if c["gpus_per_node"] == "0":
            c["gpus_per_node"] = str(world)
        c["world"] = world
        c["line"] = n
        out.append(c)
    return out


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def train_command(c, metrics):
    megaton = os.environ.get("MEGATON", "build/megaton")
    args = [megaton, "train",
            "--num-layers", c["layers"], "--hidden-size", c["hidden"], "--num-attention-heads", c["heads"],
            "--seq-length", c["seq"], "--max-position-embeddings", c["seq"],
            "--micro-batch-size", c["mb"], "--global-batch-size", c["gbs"],
            "--tensor-model-parallel-size", c["tp"], "--pipeline-model-parallel-size", c["pp"],
            "--zero-stage", c["zero"], "--train-iters", c["iters"], "--log-interval", c["log_interval"],
            "--eval-interval", "100000", "--eval-iters", "1", "--split", "99,1,0",
            "--vocab-size", c["vocab"], "--make-vocab-size-divisible-by", c["divisible_by"],
            "--data-path", os.environ["DATA"], "--lr", "1e-4", "--min-lr", "1e-5",
            "--hidden-dropout", c["hidden_dropout"], "--attention-dropout", c["attention_dropout"], "--seed", "1234",
            "--device", c["device"], "--distributed-backend", c["backend"], "--metrics-file", metrics]
    if c["ffn"] != "0":
        args += ["--ffn-hidden-size", c["ffn"]]
    if c["padded_vocab"] != "0":
        args += ["--pad-vocab-size-to", c["padded_vocab"]]
    if c["precision"] in ("bf16", "fp16"):
        args.append("--" + c["precision"])
    if c["recompute"] in ("1", "on", "true"):
        args.append("--checkpoint-activations")
    args += shlex.split(c["extra"])
    if c["world"] > 1:
        mpirun = shlex.split(os.environ.get("MPIRUN", "mpirun"))
        args = mpirun + ["--oversubscribe", "--bind-to", "none", "-np", str(c["world"])] + args
    return args


class GpuMemorySampler:
    """Peak over GPUs of `nvidia-smi` memory.used (MiB) minus what each used before: what the run reserved per GPU."""

    def __init__(self):
        self.peak, self.base, self.ok = 0.0, [], False
        self._stop = threading.Event()

    def _sample(self):
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return [float(x) for x in out.split()]

    def __enter__(self):
        try:
            self.base = self._sample()
            self.ok = True
        except Exception:
            return self
        def loop():
            while not self._stop.is_set():
                try:
                    self.peak = max([self.peak] + [u - b for u, b in zip(self._sample(), self.base)])
                except Exception:
                    pass
                self._stop.wait(0.2)
        self._t = threading.Thread(target=loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        if self.ok:
            self._t.join()


def summarize_metrics(path, skip):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            try:
                o = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "elapsed_ms_per_iteration" in o:
                rows.append(o)
    timed = [r for r in rows if r["iteration"] > skip] or rows[-1:]
    if not timed:
        return None
    med = lambda k: statistics.median(r[k] for r in timed if k in r) if any(k in r for r in timed) else None
    return {"iters_timed": len(timed), "ms_per_iter": med("elapsed_ms_per_iteration"),
            "model_tflops_per_gpu": med("tflops"), "tokens_per_s": med("tokens_per_second")}


def torch_cuda_available():
    try:
        r = subprocess.run([PEER_PYTHON, "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 3)"],
                           capture_output=True, timeout=120)
        return r.returncode == 0, ("" if r.returncode == 0 else
                                   "torch importable but no CUDA" if r.returncode == 3 else "torch not importable")
    except Exception as e:
        return False, f"torch check failed: {e}"


PEER_PYTHON = os.environ.get("PEER_PYTHON", sys.executable)  # the Python that has torch (on the GPU node)
PEER_LINE = re.compile(r"(?P<ms>[\d.]+) ms/it, (?P<tok>[\d,]+) tok/s, (?P<tf>[\d.]+) TFLOP/s model, mem (?P<mem>[\d.]+) GiB")


def run_peer(c, outdir):
    peer = os.environ.get("PEER", os.path.join(os.path.dirname(__file__), "..", "gpu", "torch_gpt_bench.py"))
    spec = f"custom:{c['layers']},{c['hidden']},{c['heads']},{c['seq']},{c['gbs']}"
    log = os.path.join(outdir, f"peer_{c['name']}.log")
    with open(log, "w") as f:
        subprocess.run([PEER_PYTHON, peer, spec], stdout=f, stderr=subprocess.STDOUT, timeout=int(c["timeout"]))
    m = None
    for line in open(log):
        m = PEER_LINE.search(line) or m
    if not m:
        return {"note": f"peer failed (see {os.path.basename(log)})"}
    return {"peer_ms_per_iter": m["ms"], "peer_tflops": m["tf"], "peer_tokens_per_s": m["tok"].replace(",", ""),
            "peer_peak_mem_gib": m["mem"]}


def make_data(prefix, vocab, n_docs=600, doc_len=2000):
    """Random tokens in [0, vocab - 1), each document ended by EOD = vocab - 1: a Megatron mmap .bin/.idx pair."""
    import random
    import struct
    rng = random.Random(0)
    with open(prefix + ".bin", "wb") as f:
        for _ in range(n_docs):
            doc = [rng.randrange(vocab - 1) for _ in range(doc_len - 1)] + [vocab - 1]
            f.write(struct.pack("<%dH" % doc_len, *doc))
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, n_docs, n_docs + 1))
        f.write(struct.pack("<%di" % n_docs, *([doc_len] * n_docs)))
        f.write(struct.pack("<%dq" % n_docs, *[i * doc_len * 2 for i in range(n_docs)]))
        f.write(struct.pack("<%dq" % (n_docs + 1), *range(n_docs + 1)))


def run(configs_path, outdir):
    configs = parse_configs(configs_path)
    os.makedirs(outdir, exist_ok=True)
    if not os.environ.get("DATA"):
        import atexit
        import shutil
        import tempfile
        vocab = min(min(int(c["vocab"]) for c in configs), 65535)
        tmp = tempfile.mkdtemp(prefix="megaton-sweep-data-")
        atexit.register(shutil.rmtree, tmp, True)
        os.environ["DATA"] = os.path.join(tmp, "synth_text_document")
        make_data(os.environ["DATA"], vocab)
    machine = os.environ.get("MACHINE", "unknown")
    today = datetime.date.today().isoformat()
    cores = cpu_count()
    have_torch, torch_note = torch_cuda_available()
    if not have_torch:
        print(f"sweep: peer skipped on this machine ({torch_note})", flush=True)
    rows = []
    for c in configs:
        name = c["name"]
        metrics = os.path.join(outdir, f"train_{name}.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = train_command(c, metrics)
        peak = float(c["peak_tflops"])
        if c["device"] == "cpu" and c["world"] > cores:
            peak = peak * cores / c["world"]  # oversubscribed ranks share the cores: a rank's share of the peak
        row = {k: "" for k in COLUMNS}
        row.update({
            "date": today, "machine": machine, "device": c["device"], "peak_tflops": f"{peak:.6g}",
            "gpus_per_node": c["gpus_per_node"], "nodes": c["nodes"], "intra_node_gbps": c["intra_node_gbps"],
            "inter_node_gbps": c["inter_node_gbps"], "gpu_memory_gib": c["gpu_memory_gib"], "config": name,
            "num_layers": c["layers"], "hidden_size": c["hidden"], "num_attention_heads": c["heads"],
            "ffn_hidden_size": c["ffn"] if c["ffn"] != "0" else str(4 * int(c["hidden"])), "seq_length": c["seq"],
            "vocab_size": c["vocab"], "padded_vocab": c["padded_vocab"] if c["padded_vocab"] != "0" else "",
            "global_batch_size": c["gbs"], "micro_batch_size": c["mb"], "tp": c["tp"], "pp": c["pp"], "dp": c["dp"],
            "zero_stage": c["zero"], "recompute": "1" if c["recompute"] in ("1", "on", "true") else "0",
            "precision": c["precision"], "hidden_dropout": c["hidden_dropout"],
            "attention_dropout": c["attention_dropout"], "extra_args": c["extra"],
        })
        log = os.path.join(outdir, f"train_{name}.log")
        rss_file = os.path.join(outdir, f".rss_{name}")
        t0 = time.time()
        print(f"sweep: {name}: {' '.join(shlex.quote(a) for a in cmd)}", flush=True)
        with open(log, "w") as f, GpuMemorySampler() if c["device"] == "cuda" else open(os.devnull) as gpu:
            try:
                rc = subprocess.run([sys.executable, os.path.abspath(__file__), "_rss", rss_file, "--"] + cmd,
                                    stdout=f, stderr=subprocess.STDOUT, timeout=int(c["timeout"])).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        s = summarize_metrics(metrics, int(c["skip"]))
        if rc == 0 and s and s["ms_per_iter"]:
            row["status"] = "ok"
            row.update({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in s.items() if v is not None})
        else:
            row["status"] = f"failed({rc})"
            row["note"] = f"see {os.path.basename(log)}"
        if c["device"] == "cuda" and getattr(gpu, "ok", False):
            row["peak_mem_mib"], row["peak_mem_source"] = f"{gpu.peak:.0f}", "nvidia-smi memory.used (busiest GPU)"
        elif os.path.exists(rss_file):
            row["peak_mem_mib"] = f"{int(open(rss_file).read()) / 1024:.1f}"
            row["peak_mem_source"] = "peak RSS of the largest rank"
            os.remove(rss_file)
        if c["peer"] != "off" and row["status"] == "ok":
            if c["world"] != 1 or c["gbs"] != c["mb"]:
                row["note"] = (row["note"] + " " if row["note"] else "") + \
                    "peer: one GPU without gradient accumulation only"
            elif have_torch and c["device"] == "cuda":
                r = run_peer(c, outdir)
                note = r.pop("note", "")
                row.update(r)
                if note:
                    row["note"] = (row["note"] + " " if row["note"] else "") + note
            else:
                row["note"] = (row["note"] + " " if row["note"] else "") + f"peer skipped: {torch_note or 'cpu run'}"
        print(f"sweep: {name}: {row['status']} {row['ms_per_iter']} ms/it, {row['model_tflops_per_gpu']} TFLOP/s, "
              f"{row['tokens_per_s']} tok/s, peak {row['peak_mem_mib']} MiB ({time.time() - t0:.1f} s)", flush=True)
        rows.append(row)
        write_csv(rows, outdir)
    finish(outdir)
    failed = [r["config"] for r in rows if r["status"] != "ok"]
    if failed:
        print(f"sweep: failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def write_csv(rows, outdir):
    with open(os.path.join(outdir, "sweep.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: str(r.get(k, "")).replace(",", ";") for k in COLUMNS})


def finish(outdir):
    rows = list(csv.DictReader(open(os.path.join(outdir, "sweep.csv"))))
    with open(os.path.join(outdir, "sweep.json"), "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sweep: no matplotlib (apt-get install python3-matplotlib): sweep.png not written", file=sys.stderr)
        return
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return
    labels = [f"{r['config']}\nTP{r['tp']} PP{r['pp']} DP{r['dp']} mb{r['micro_batch_size']}"
              + (" rc" if r["recompute"] == "1" else "") for r in ok]
    fig, axes = plt.subplots(3, 1, figsize=(max(7, 0.75 * len(ok) + 2), 12))
    x = range(len(ok))
    for ax, key, peer_key, title, scale in (
            (axes[0], "ms_per_iter", "peer_ms_per_iter", "ms / iteration", 1),
            (axes[1], "model_tflops_per_gpu", "peer_tflops", "model TFLOP/s per GPU", 1),
            (axes[2], "peak_mem_mib", "peer_peak_mem_gib", "peak memory per GPU/rank (GiB)", 1 / 1024)):
        vals = [float(r[key]) * scale if r[key] else 0 for r in ok]
        has_peer = peer_key and any(r[peer_key] for r in ok)
        w = 0.4 if has_peer else 0.8
        ax.bar([i - (w / 2 if has_peer else 0) for i in x], vals, width=w, label="megaton")
        if has_peer:
            pv = [float(r[peer_key]) if r[peer_key] else 0 for r in ok]
            ax.bar([i + w / 2 for i in x], pv, width=w, label="PyTorch peer")
            ax.legend(fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=6)
    fig.suptitle(f"megaton train sweep — {ok[0]['machine']} {ok[0]['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "sweep.png"), dpi=110)


def rss_main(out, cmd):
    rc = subprocess.run(cmd).returncode
    with open(out, "w") as f:
        f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
    return rc


def main(argv):
    if len(argv) >= 4 and argv[1] == "_rss" and argv[3] == "--":
        return rss_main(argv[2], argv[4:])
    if len(argv) == 4 and argv[1] == "run":
        return run(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "plot":
        finish(argv[2])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
