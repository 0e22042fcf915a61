#!/bin/bash
# perf/gpu/protocol_compare.py reads megaton's real --metrics-file rows and the peer's two output lines: the short
# protocol is the mean of the log lines at iterations 10 and 15, the sustained one the median of the lines after 10,
# the peer's ms come from its tokens/s, and TFLOP/s on both sides from the same Megatron formula. (The GPU batch runs
# it; here a tiny CPU run stands in for megaton's files, named as the 124M ones, and the peer lines are written.)
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/scripts/train_lib.sh"
setup_work
args=($(tiny_model_args | sed "s/--log-interval 1 //") $(tiny_lr_args) --data-path "$work/synth_text_document" --micro-batch-size 2
  --global-batch-size 2)
run_train 1 "${args[@]}" --train-iters 15 --log-interval 5 --metrics-file "$work/short_124M.jsonl" > "$work/s.log" 2>&1 ||
  { tail "$work/s.log"; exit 1; }
run_train 1 "${args[@]}" --train-iters 30 --log-interval 5 --metrics-file "$work/ab_124M_base.jsonl" > "$work/a.log" 2>&1 ||
  { tail "$work/a.log"; exit 1; }
# The anchor's line (whole ms; 3,000,000 tok/s of 32 x 1024 tokens = 10.9227 ms) and the sustained mode's.
echo "gpt2-124M compile=False params=124M B=32 S=1024: 11 ms/it, 3,000,000 tok/s, 9999 TFLOP/s model, mem 30.4 GiB, loss 1.0" > "$work/peer.log"
echo "sustained gpt2-124M compile=False params=124M B=32 S=1024: 12.5 ms/it, 2,621,440 tok/s, 9999 TFLOP/s model, mem 30.4 GiB, loss 1.0, windows ms 1 2 3" > "$work/peer_sustained.log"
python3 "$SRC/perf/gpu/protocol_compare.py" "$work" 124M > "$work/out.txt"
cat "$work/out.txt"
python3 - "$work" <<'PY'
import json, statistics, sys
d = sys.argv[1]
def ms(path):
    return {r["iteration"]: r["elapsed_ms_per_iteration"] for r in map(json.loads, open(path)) if "elapsed_ms_per_iteration" in r}
short, sust = ms(f"{d}/short_124M.jsonl"), ms(f"{d}/ab_124M_base.jsonl")
want_short = (short[10] + short[15]) / 2
want_sust = statistics.median(v for k, v in sust.items() if k > 10)
flops = 72 * 32 * 1024 * 12 * 768**2 * (1 + 1024 / (6 * 768) + 50304 / (12 * 12 * 768))
rows = {l.split("|")[0].split()[1]: l for l in open(f"{d}/out.txt") if l.startswith("124M")}
def cols(line):  # megaton ms, TFLOP/s, peer ms, TFLOP/s, speedup
    a, b, c = line.split("|")[1:4]
    return [float(x) for x in a.split() + b.split()] + [float(c.strip().rstrip("x"))]
for name, want, peer in (("short", want_short, 32 * 1024 / 3e6 * 1e3), ("sustained", want_sust, 12.5)):
    m, mt, p, pt, r = cols(rows[name])
    assert abs(m - want) <= 0.05 + 1e-3 * want, (name, m, want)
    assert abs(p - peer) <= 0.05, (name, p, peer)
    assert abs(mt - flops / (want * 1e-3) / 1e12) <= 0.5 + 1e-3 * mt, (name, mt)
    assert abs(pt - flops / (peer * 1e-3) / 1e12) <= 0.5 + 1e-3 * pt, (name, pt)
    assert abs(r - peer / want) <= 1e-3 + 1e-3 * r, (name, r)
print("protocol_compare.py: both protocols, both programs: OK")
PY
