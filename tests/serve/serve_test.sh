#!/bin/bash
# megaton serve end to end, against a tiny GPT trained here (byte-level tokenizer.json):
#   * the official openai npm client (tests/serve/openai_client_test.js): completions, batching, concurrency,
#     echo + logprobs, stop sequences, streaming, seeds, malformed requests, Megatron's PUT /api;
#   * greedy completions equal `megaton generate --greedy`'s continuations, and the echoed prompt's log-probabilities
#     add up to `megaton eval`'s loss on the same text;
#   * at TP=2 x PP=2 (4 ranks) the same completions and log-probabilities within 1e-5;
#   * SIGTERM stops the server with exit 0; a port in use and DP > 1 are refused by name.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work 256
node_modules="$SRC/data/downloaded/npm/node_modules"
[ -d "$node_modules/openai" ] || { echo "FAIL: the openai npm package is missing: run make tokenizer"; exit 1; }
make_byte_tokenizer "$work/tok"
fail() { echo "FAIL: $*"; exit 1; }

model=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
       --make-vocab-size-divisible-by 8 --hidden-dropout 0 --attention-dropout 0 --seed 1234
       --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok" --distributed-backend mpi --device cpu)
run_train 1 "${model[@]}" --lr 3e-3 --lr-warmup-iters 2 --train-iters 40 --micro-batch-size 4 --global-batch-size 8 \
  --data-path "$work/synth_text_document" --split 95,5,0 --eval-iters 1 --eval-interval 1000 --log-interval 20 \
  --save "$work/ckpt" --save-interval 40 > "$work/train.log" 2>&1 || { tail -30 "$work/train.log"; exit 1; }

# Prompts in the data's alphabet (runs of byte values with a fixed step), the text to score, the limits.
python3 - "$work/cases.json" "$work/prompts.txt" "$work/score.txt" <<'PY'
import json, sys
prompts = ["ABCDEFGH", "acegikmo", "0123", "KPUZ_dinsx", "HIJKLMNOPQ"]
score = "abcd efgh ijkl mnop qrst uvwx yz"
json.dump({"prompts": prompts, "score_text": score, "max_tokens": 12, "max_request_bytes": 70000}, open(sys.argv[1], "w"))
open(sys.argv[2], "w").write("\n".join(prompts) + "\n")
open(sys.argv[3], "w").write(score)
PY

pid=""
start_server() {  # start_server NP LOG ARGS...: sets $url once it listens
  local np=$1 log=$2
  shift 2
  if [ "$np" = 1 ]; then
    "$MEGATON" serve "${model[@]}" --load "$work/ckpt" --port 0 --max-request-bytes 65536 "$@" > "$log" 2>&1 &
  else
    "$MPIRUN" --oversubscribe --bind-to none -np "$np" "$MEGATON" serve "${model[@]}" --load "$work/ckpt" --port 0 \
      --max-request-bytes 65536 "$@" > "$log" 2>&1 &
  fi
  pid=$!
  url=""
  for _ in $(seq 1 600); do  # a loaded machine may take a while to start the ranks
    url=$(grep -o "on http://[0-9.]*:[0-9]*" "$log" | head -1 | cut -c4-) || true
    [ -n "$url" ] && break
    kill -0 "$pid" 2> /dev/null || { cat "$log"; fail "the server exited before listening"; }
    sleep 0.2
  done
  [ -n "$url" ] || { cat "$log"; fail "the server did not listen"; }
}
stop_server() {  # stop_server LOG: SIGTERM, then exit 0 within the wait
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || { tail -20 "$1"; fail "the server exited $rc on SIGTERM"; }
  grep -q "megaton serve stopped" "$1" || { tail -20 "$1"; fail "no stop line"; }
}

start_server 1 "$work/serve1.log"
NODE_PATH="$node_modules" node "$SRC/tests/serve/openai_client_test.js" "$url" ckpt "$work/cases.json" "$work/one.json" ||
  { tail -20 "$work/serve1.log"; fail "openai client checks (1 rank)"; }
# A second client while the first server runs: the port is taken.
port=${url##*:}
if "$MEGATON" serve "${model[@]}" --load "$work/ckpt" --port "$port" > "$work/busy.log" 2>&1; then
  fail "a second server on a port in use started"
fi
grep -q "cannot listen on 127.0.0.1:$port" "$work/busy.log" || { cat "$work/busy.log"; fail "port-in-use message"; }
stop_server "$work/serve1.log"
echo "1 rank: openai client checks pass; SIGTERM exits 0; a port in use is refused"

# Independent references: megaton generate's greedy continuations (Megatron's loop writes --out-seq-length + 1
# tokens: 11 for serve's max_tokens 12) and megaton eval's loss.
"$MEGATON" generate "${model[@]}" --load "$work/ckpt" --greedy --sample-input-file "$work/prompts.txt" \
  --out-seq-length 11 > "$work/gen.log" 2>&1 || { tail -20 "$work/gen.log"; fail "generate"; }
"$MEGATON" eval "${model[@]}" --load "$work/ckpt" --task WIKITEXT103 --valid-data "$work/score.txt" \
  --overlapping-eval 64 --results-file "$work/eval.json" > "$work/eval.log" 2>&1 || { tail -20 "$work/eval.log"; fail "eval"; }

start_server 4 "$work/serve4.log" --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
NODE_PATH="$node_modules" node "$SRC/tests/serve/openai_client_test.js" "$url" ckpt "$work/cases.json" "$work/four.json" ||
  { tail -20 "$work/serve4.log"; fail "openai client checks (TP=2 x PP=2)"; }
kill -TERM "$pid"; wait "$pid" || true  # mpirun ends its ranks on SIGTERM its own way

python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
one, four = json.load(open(f"{w}/one.json")), json.load(open(f"{w}/four.json"))
# megaton generate's conditional blocks: "\nContext:" + prompt + "\n\nMegatron-LM:" + continuation + "\n".
blocks = open(f"{w}/prompts.txt.out").read().split("\nContext:")[1:]
gen = [b.split("\n\nMegatron-LM:", 1)[1][:-1] for b in blocks]
assert gen == one["greedy"], ("serve's greedy completions differ from megaton generate's", gen, one["greedy"])
ev = json.load(open(f"{w}/eval.json"))
n = ev["num_tokenized_tokens"]
assert n == one["score"]["tokens"], (n, one["score"]["tokens"])
want = -ev["avg_loss"] * (n - 1)
got = one["score"]["logprob_sum"]
assert abs(got - want) <= 1e-5 * abs(want), ("echo log-probabilities vs megaton eval's loss", got, want)
assert four["greedy"] == one["greedy"], ("TP=2 x PP=2 completions differ", four["greedy"], one["greedy"])
worst = max(abs(a - b) / abs(b) for a, b in zip(four["score"]["token_logprobs"][1:], one["score"]["token_logprobs"][1:]))
assert worst <= 1e-5, ("TP=2 x PP=2 log-probabilities differ", worst)
print(f"greedy completions = megaton generate's; echoed log-probabilities sum {got:.6f} = -eval loss {want:.6f}; "
      f"TP=2 x PP=2 equal, log-probabilities within {worst:.1e}")
PY

# One replica only: data parallelism is refused up front.
if "$MPIRUN" --oversubscribe --bind-to none -np 2 "$MEGATON" serve "${model[@]}" --load "$work/ckpt" --port 0 \
  > "$work/dp.log" 2>&1; then fail "serve with DP=2 started"; fi
grep -q "megaton serve runs one model replica" "$work/dp.log" || { cat "$work/dp.log"; fail "DP refusal message"; }
echo "DP > 1 refused"
