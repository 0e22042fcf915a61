#!/bin/bash
# perf/gpu/check_graph_rampup.sh OUTDIR — --cuda-graph where the step's shape changes: GPT-2 124M with
# --rampup-batch-size 16 16 320 (global batch 16 -> 64, 1 -> 4 micro-batches of 16: four captures, each of several
# micro-batches), eager and graphed, their losses compared iteration by iteration (compare_runs.py, and printed).
# Builds with session_batch.sh (nothing else of it runs). With this workplace's device tool:
#   run(command="bash perf/gpu/check_graph_rampup.sh $OUT", carry=[".deps/debs", ".deps/fallback", ".deps/src.tar"])
OUT=$1
SKIP="bench train ckpt peer generate unit sweep" AB_FLAGS="" bash perf/gpu/session_batch.sh "$OUT" 250 > "$OUT/console.log" 2>&1
grep -E "build exit|StepGraph|kernel tests exit" "$OUT/console.log"
M=/tmp/megaton-src/build-gpu/megaton
a=(train --vocab-size 50257 --data-path /tmp/synth_text_document --split 99,1,0 --bf16 --lr 1e-4 --min-lr 1e-5
  --hidden-dropout 0 --attention-dropout 0 --eval-interval 100000 --eval-iters 1 --device cuda --distributed-backend nccl
  --seed 1234 --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 --max-position-embeddings 1024
  --micro-batch-size 16 --global-batch-size 64 --rampup-batch-size 16 16 320 --train-samples 800 --log-interval 1)
for t in eager graph; do
  f=(); [ $t = graph ] && f=(--cuda-graph)
  timeout 120 "$M" "${a[@]}" "${f[@]}" --metrics-file "$OUT/$t.jsonl" > "$OUT/$t.log" 2>&1
  echo "$t rc $?"; grep -E "cuda-graph|error" "$OUT/$t.log" | head -8
done
python3 /tmp/megaton-src/perf/gpu/compare_runs.py "$OUT/eager.jsonl" "$OUT/graph.jsonl" 2>&1 | tail -3
python3 - "$OUT" <<'P'
import json,sys
o=sys.argv[1]
E=[json.loads(l) for l in open(o+'/eager.jsonl')]; G=[json.loads(l) for l in open(o+'/graph.jsonl')]
for e,g in zip(E,G):
  if 'lm_loss' in e and 'lm_loss' in g: print(e['iteration'], e['global_batch_size'], e['lm_loss'], g['lm_loss'], e['lm_loss']-g['lm_loss'])
P
