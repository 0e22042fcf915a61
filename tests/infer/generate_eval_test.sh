#!/bin/bash
# End to end: train a tiny GPT a few iterations with a byte-level tokenizer.json, then from its checkpoint
#   * megaton generate: greedy samples equal with the KV cache and --recompute, and at TP=2 / PP=2 (resharded on
#     load); the conditional and unconditional output formats;
#   * megaton eval: WIKITEXT103 perplexity and LAMBADA accuracy equal at TP=1 and TP=2 x PP=2;
#   * malformed inputs fail with an error naming the file and line.
set -euo pipefail
BUILD=$1 SRC=$2
source "$SRC/tests/support/train_lib.sh"
setup_work  # $work: a scratch directory (removed at exit) with the synthetic dataset

make_byte_tokenizer "$work/tok"  # <|endoftext|> = 256

model=(--num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --make-vocab-size-divisible-by 8 --hidden-dropout 0 --attention-dropout 0 --seed 1234
       --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$work/tok" --distributed-backend mpi --device cpu)
run_train 1 "${model[@]}" --lr 2e-3 --lr-warmup-iters 1 --train-iters 8 --micro-batch-size 2 --global-batch-size 4 \
  --data-path "$work/synth_text_document" --split 95,5,0 --eval-iters 1 --eval-interval 1000 --log-interval 4 \
  --save "$work/ckpt" --save-interval 8 > "$work/train.log" 2>&1 || { tail -30 "$work/train.log"; exit 1; }

gen() {  # gen NP OUT ARGS...
  local np=$1 out=$2
  shift 2
  "$MPIRUN" --oversubscribe --bind-to none -np "$np" "$BUILD/megaton" generate "${model[@]}" --load "$work/ckpt" \
    "$@" > "$work/$out.log" 2>&1 || { echo "generate $out failed:"; tail -20 "$work/$out.log"; exit 1; }
}
greedy=(--greedy --num-samples 3 --micro-batch-size 2 --out-seq-length 24)
gen 1 cache "${greedy[@]}" --genfile "$work/cache.jsonl"
gen 1 recompute "${greedy[@]}" --genfile "$work/recompute.jsonl" --recompute
gen 2 tp2 "${greedy[@]}" --genfile "$work/tp2.jsonl" --tensor-model-parallel-size 2
gen 2 pp2 "${greedy[@]}" --genfile "$work/pp2.jsonl" --pipeline-model-parallel-size 2
[ "$(wc -l < "$work/cache.jsonl")" = 3 ] || { echo "expected 3 samples"; cat "$work/cache.jsonl"; exit 1; }
python3 - "$work/cache.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    assert set(o) == {"text", "length", "finished"}, o
    assert isinstance(o["text"], str) and isinstance(o["length"], int) and isinstance(o["finished"], bool), o
PY
for v in recompute tp2 pp2; do
  cmp "$work/cache.jsonl" "$work/$v.jsonl" || { echo "greedy samples differ: cache vs $v"; exit 1; }
done
echo "greedy unconditional samples equal: KV cache, --recompute, TP=2, PP=2"

# The checkpoint knows the model: no model or tokenizer flags, the same samples; a flag given explicitly is still
# checked against the checkpoint.
"$BUILD/megaton" generate --load "$work/ckpt" --device cpu "${greedy[@]}" --genfile "$work/bare.jsonl" \
  > "$work/bare.log" 2>&1 || { echo "generate without model flags failed:"; tail -20 "$work/bare.log"; exit 1; }
cmp "$work/cache.jsonl" "$work/bare.jsonl" || { echo "samples differ without model flags"; exit 1; }
grep -q "from .*--num-layers 4 --hidden-size 32 .*--seq-length 32 --tokenizer-type \"PretrainedFromHF\"" \
  "$work/bare.log" || { echo "no note of what came from the checkpoint"; cat "$work/bare.log"; exit 1; }
if "$BUILD/megaton" generate --load "$work/ckpt" --device cpu --hidden-size 64 "${greedy[@]}" \
  --genfile "$work/bad.jsonl" > "$work/bad.log" 2>&1; then
  echo "a --hidden-size that contradicts the checkpoint was accepted"; exit 1
fi
grep -q "hidden_size: checkpoint has 32, this run has 64" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
echo "generate takes the architecture from the checkpoint; contradicting flags refused"

printf 'abc def\nhello\n' > "$work/prompts.txt"
gen 1 cond --greedy --sample-input-file "$work/prompts.txt" --out-seq-length 8
grep -q "^Context:abc def$" "$work/prompts.txt.out" && grep -q "^Megatron-LM:" "$work/prompts.txt.out" ||
  { echo "conditional output format:"; cat "$work/prompts.txt.out"; exit 1; }
[ "$(grep -c '^Context:' "$work/prompts.txt.out")" = 2 ] || { echo "expected 2 prompts"; exit 1; }
echo "conditional output has the Context:/Megatron-LM: blocks"

# Eval: a WikiText-style file (name contains "wiki": the detokenizer applies) and a LAMBADA JSONL.
python3 - "$work/wiki.test.tokens" "$work/lambada.jsonl" <<'PY'
import json, random, sys
r = random.Random(3)
words = ["the", "cat", "sat", "on", "mat", "@-@", ",", ".", "dog", "ran"]
with open(sys.argv[1], "w") as f:
    f.write(" = Heading = \n")
    for _ in range(6):
        f.write(" " + " ".join(r.choice(words) for _ in range(25)) + " \n")
with open(sys.argv[2], "w") as f:
    for _ in range(5):
        f.write(json.dumps({"text": " ".join(r.choice(words[:5] + words[8:]) for _ in range(6))}) + "\n")
PY
ev() {  # ev NP OUT ARGS...
  local np=$1 out=$2
  shift 2
  "$MPIRUN" --oversubscribe --bind-to none -np "$np" "$BUILD/megaton" eval "${model[@]}" --load "$work/ckpt" \
    --micro-batch-size 2 "$@" > "$work/$out.log" 2>&1 || { echo "eval $out failed:"; tail -20 "$work/$out.log"; exit 1; }
}
ev 1 wiki1 --task WIKITEXT103 --valid-data "$work/wiki.test.tokens" --overlapping-eval 8 --results-file "$work/w1.json"
ev 4 wiki4 --task WIKITEXT103 --valid-data "$work/wiki.test.tokens" --overlapping-eval 8 --results-file "$work/w4.json" \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
ev 2 wiki2 --task WIKITEXT103 --valid-data "$work/wiki.test.tokens" --overlapping-eval 8 --results-file "$work/w2.json" \
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1  # DP = 2
ev 1 lam1 --task LAMBADA --strict-lambada --valid-data "$work/lambada.jsonl" --results-file "$work/l1.json"
ev 4 lam4 --task LAMBADA --strict-lambada --valid-data "$work/lambada.jsonl" --results-file "$work/l4.json" \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
grep -q "validation results on WIKITEXT103 | avg loss: .* | ppl: .* | adjusted ppl: .* | token ratio: .* |" \
  "$work/wiki1.log" || { echo "no WIKITEXT103 result line"; cat "$work/wiki1.log"; exit 1; }
grep -q "validation results on LAMBADA | number correct: .* | total examples: 5.0000E+00 | avg accuracy: " \
  "$work/lam1.log" || { echo "no LAMBADA result line"; cat "$work/lam1.log"; exit 1; }
python3 - "$work" <<'PY'
import json, math, sys
w = sys.argv[1]
a, b, c = (json.load(open(f"{w}/{n}.json")) for n in ("w1", "w4", "w2"))
for o in (b, c):
    assert abs(o["avg_loss"] - a["avg_loss"]) <= 1e-5 * a["avg_loss"], (a, o)
    assert o["num_tokenized_tokens"] == a["num_tokenized_tokens"]
# Megatron's arithmetic on the reported numbers.
assert a["token_ratio"] == (a["num_tokenized_tokens"] - 1) / (a["num_original_tokens"] - 1)
assert math.isclose(a["adjusted_ppl"], math.exp(min(20, a["avg_loss"] * a["token_ratio"])), rel_tol=1e-12)
l1, l4 = json.load(open(f"{w}/l1.json")), json.load(open(f"{w}/l4.json"))
assert l1["total"] == 5 and l1["correct"] == l4["correct"], (l1, l4)
print(f"eval: avg loss {a['avg_loss']:.6f} equal at TP=1, TP=2xPP=2, DP=2; LAMBADA {l1['correct']}/5 at both layouts")
PY

# Malformed input: a clear error naming file:line, non-zero exit.
printf '{"text": "fine words"}\n{"text": 3}\n' > "$work/bad.jsonl"
if "$BUILD/megaton" eval "${model[@]}" --load "$work/ckpt" --task LAMBADA --valid-data "$work/bad.jsonl" \
  > "$work/bad.log" 2>&1; then
  echo "malformed LAMBADA accepted"; exit 1
fi
grep -q "bad.jsonl:2: expected a JSON object with a string \"text\"" "$work/bad.log" ||
  { echo "error does not name the line:"; cat "$work/bad.log"; exit 1; }
if "$BUILD/megaton" generate "${model[@]}" --num-samples 2 > "$work/nogen.log" 2>&1; then
  echo "--num-samples without --genfile accepted"; exit 1
fi
grep -q -- "--genfile" "$work/nogen.log" || { cat "$work/nogen.log"; exit 1; }
echo "malformed inputs rejected with file:line errors"
