#!/bin/bash
# megaton-plot draws a run from its --metrics-file: a 1000 x 700 PNG with training and validation loss, learning rate,
# grad norm and throughput with TFLOP/s (the series it reports are counted); a resumed run's file draws each iteration
# once; a malformed line is refused naming the file and line.   $1 = build dir, $2 = source dir
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work
fail() { echo "FAIL: $*"; exit 1; }
plot=$SRC/scripts/megaton-plot
PY=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import matplotlib" 2>/dev/null; then PY=$candidate; break; fi
done
[ -n "$PY" ] || fail "no python3 imports matplotlib (make deps installs python3-matplotlib)"

model=($(tiny_model_args | sed 's/--eval-interval 1000/--eval-interval 4/') $(tiny_lr_args) --micro-batch-size 2
       --global-batch-size 4 --data-path "$work/synth_text_document" --metrics-file "$work/run.jsonl")
run_train 1 "${model[@]}" --train-iters 8 --save "$work/ckpt" --save-interval 4 > "$work/train.log" 2>&1 ||
  { tail -20 "$work/train.log"; fail "training"; }
# Resume from iteration 4 with the same metrics file: iterations 5..8 are logged twice.
echo 4 > "$work/ckpt/latest"
echo 4 > "$work/ckpt/latest_checkpointed_iteration.txt"
run_train 1 "${model[@]}" --train-iters 8 --load "$work/ckpt" > "$work/resume.log" 2>&1 ||
  { tail -20 "$work/resume.log"; fail "resume"; }

"$PY" "$plot" "$work/run.jsonl" -o "$work/out/run.png" > "$work/plot.log" 2>&1 || { cat "$work/plot.log"; fail "plot"; }
for want in "loss: 2 series" "learning rate: 1 series" "grad norm: 1 series" "throughput: 2 series" \
  "wrote $work/out/run.png"; do
  grep -q "megaton-plot: $want" "$work/plot.log" || { cat "$work/plot.log"; fail "no '$want'"; }
done
"$PY" - "$work/out/run.png" <<'PY' || fail "the PNG"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (1000, 700), (w, h)
PY
# Each iteration and each validation once, though the resumed run logged iterations 5..8 and validation 8 again.
"$PY" - "$plot" "$work/run.jsonl" <<'PY' || fail "resumed rows"
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("megaton_plot", sys.argv[1])
spec = importlib.util.spec_from_loader("megaton_plot", loader)
m = importlib.util.module_from_spec(spec)
loader.exec_module(m)
train, valid = m.read_metrics(sys.argv[2])
its = [r["iteration"] for r in train]
assert its == list(range(1, 9)), its
assert [r["iteration"] for r in valid] == [4, 8], [r["iteration"] for r in valid]
assert all("consumed_tokens" in r for r in valid), valid
PY
printf '{"iteration": 1, "lm_loss": 3.0}\nnot json\n' > "$work/bad.jsonl"
if "$PY" "$plot" "$work/bad.jsonl" -o "$work/bad.png" > "$work/bad.log" 2>&1; then fail "a malformed file was drawn"; fi
grep -q "bad.jsonl:2: not JSON" "$work/bad.log" || { cat "$work/bad.log"; fail "the error does not name the line"; }
echo "PASS"
