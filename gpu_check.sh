#!/bin/bash
# One-off GPU check (not committed): 8-bit Adam on CUDA and the CodeCarbon log with NVML.
set -uo pipefail
cd "$(dirname "$0")"
T0=$(date +%s)
TARGETS="megaton megaton_unit_tests bench_adam8bit" JOBS=16 bash perf/gpu/setup.sh > "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - T0 )) s"
source build-gpu/env.sh
nvidia-smi --query-gpu=name,power.draw --format=csv,noheader
ls /sys/class/powercap/ 2>&1 | head -3; cat /sys/class/powercap/intel-rapl:0/energy_uj 2>&1 | head -1
build-gpu/tests/megaton_unit_tests --gtest_filter='Adam8bit*:Codecarbon*:Rapl*' 2>&1 | tail -2
build-gpu/perf/bench_adam8bit --benchmark_min_time=2 2>&1 | tail -4
python3 perf/gpu/synth_data.py /tmp/synth 600 2000
A="--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --max-position-embeddings 1024
 --micro-batch-size 16 --global-batch-size 16 --train-iters 60 --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine
 --lr-warmup-iters 10 --bf16 --data-path /tmp/synth --vocab-size 50257 --split 98,2,0 --eval-interval 1000
 --eval-iters 1 --log-interval 20 --device cuda --seed 1 --embed-layernorm"
for v in fp32 bnb; do
  extra=""
  [ $v = bnb ] && extra="--use-bnb-optimizer --codecarbon-dir $OUT/cc --save /tmp/ck --save-interval 30"
  build-gpu/megaton train $A $extra > "$OUT/$v.log" 2>&1 || tail -20 "$OUT/$v.log"
  echo "== $v"; grep -E "iteration +(20|40|60)/" "$OUT/$v.log" | sed -E 's/.*(elapsed time per iteration \(s\): [0-9.]+).*(lm loss: [0-9.E+-]+).*/\1 \2/'
  grep -E "memory per rank|codecarbon" "$OUT/$v.log" | head -3
done
cat "$OUT/cc/emissions.csv"
