// megaton serve through the official `openai` npm client (and plain fetch for Megatron's PUT /api):
//   node openai_client_test.js BASE_URL MODEL CASES.json OUT.json
// CASES.json: {"prompts": [...], "score_text": "...", "max_tokens": N}. Checks what a client alone can check and
// writes what the shell test compares with megaton generate / eval and across layouts to OUT.json.
const fs = require("fs");
const OpenAI = require("openai");

const [base, model, casesFile, outFile] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0, timeout: 120000 });
const out = {};
let checks = 0;
function check(cond, what, detail) {
  if (!cond) {
    console.error("FAIL: " + what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
    process.exit(1);
  }
  ++checks;
}
async function expectError(status, param, fn, what) {
  try {
    await fn();
  } catch (e) {
    check(e.status === status, what + ": status " + status, { status: e.status, message: e.message });
    if (param) check(e.param === param || (e.error && e.error.param === param), what + ": names " + param, e.error);
    return e;
  }
  check(false, what + ": no error");
}
const sum = (a) => a.reduce((x, y) => x + y, 0);

(async () => {
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === model, "GET /v1/models lists the served model", models.data);

  // Greedy completions, one request per prompt, then all prompts in one request: the same texts.
  const N = cases.max_tokens;
  out.greedy = [];
  for (const p of cases.prompts) {
    const r = await client.completions.create({ model, prompt: p, max_tokens: N, temperature: 0 });
    check(r.object === "text_completion" && r.choices.length === 1, "one choice", r);
    check(["length", "stop"].includes(r.choices[0].finish_reason), "finish_reason", r.choices[0]);
    check(r.usage.completion_tokens <= N && r.usage.prompt_tokens > 0, "usage counts", r.usage);
    out.greedy.push(r.choices[0].text);
  }
  const batched = await client.completions.create({ model, prompt: cases.prompts, max_tokens: N, temperature: 0 });
  const byIndex = batched.choices.slice().sort((a, b) => a.index - b.index).map((c) => c.text);
  check(JSON.stringify(byIndex) === JSON.stringify(out.greedy), "prompts decoded together = one by one",
        { batched: byIndex, single: out.greedy });

  // Concurrent requests (batched by the server) answer as sequential ones.
  const concurrent = await Promise.all(
      cases.prompts.concat(cases.prompts).map((p) => client.completions.create({ model, prompt: p, max_tokens: N, temperature: 0 })));
  concurrent.forEach((r, i) => check(r.choices[0].text === out.greedy[i % cases.prompts.length],
                                     "concurrent request " + i + " = sequential", r.choices[0].text));

  // Greedy tokens are the argmax of their position (logprobs = 1 gives the best alternative).
  const lp = await client.completions.create({ model, prompt: cases.prompts[0], max_tokens: N, temperature: 0, logprobs: 1 });
  const l = lp.choices[0].logprobs;
  check(lp.choices[0].text === out.greedy[0], "logprobs do not change the text");
  check(l.tokens.length === l.token_logprobs.length && l.tokens.length === l.top_logprobs.length &&
        l.tokens.length === l.text_offset.length, "logprobs arrays have one entry per token", l);
  l.token_logprobs.forEach((v, i) => check(Math.abs(v - Math.max(...Object.values(l.top_logprobs[i]))) < 1e-6,
                                            "greedy token " + i + " is the most likely", [v, l.top_logprobs[i]]));

  // Scoring (lm-eval-harness's loglikelihood): echo + max_tokens 0 gives every prompt token's log-probability.
  const sc = await client.completions.create({ model, prompt: cases.score_text, max_tokens: 0, echo: true, logprobs: 0 });
  const s = sc.choices[0].logprobs;
  check(sc.choices[0].text === cases.score_text, "echo returns the prompt", sc.choices[0].text);
  check(s.token_logprobs[0] === null && s.token_logprobs.slice(1).every((v) => v < 0), "first token null, others < 0", s.token_logprobs);
  check(s.text_offset[0] === 0 && s.tokens.join("") === cases.score_text, "tokens spell the prompt", s.tokens);
  out.score = { tokens: s.tokens.length, logprob_sum: sum(s.token_logprobs.slice(1)), token_logprobs: s.token_logprobs };
  // The harness's own request: token ids, echo, max_tokens 1, logprobs 1, slicing [ctxlen:-1].
  const ids = (await (await fetch(base + "/tokenize", { method: "POST", body: JSON.stringify({ prompt: cases.score_text }) })).json()).tokens;
  check(ids.length === s.tokens.length, "/tokenize counts the echoed tokens", ids);
  const detok = await (await fetch(base + "/detokenize", { method: "POST", body: JSON.stringify({ tokens: ids }) })).json();
  check(detok.prompt === cases.score_text, "/detokenize inverts /tokenize", detok);
  const ctxlen = 3;
  const h = await client.completions.create({ model, prompt: [ids], max_tokens: 1, echo: true, logprobs: 1, temperature: 0, seed: 1234 });
  const hl = h.choices[0].logprobs;
  const cont = hl.token_logprobs.slice(ctxlen, -1);
  check(cont.length === ids.length - ctxlen, "harness slice holds the continuation", hl.token_logprobs.length);
  cont.forEach((v, i) => check(Math.abs(v - s.token_logprobs[ctxlen + i]) < 1e-5, "token ids score as text", [v, i]));

  // Stop sequences: the greedy text cut before the first occurrence.
  const g = out.greedy.find((t) => t.length >= 6);
  check(g !== undefined, "a greedy completion of >= 6 characters to cut", out.greedy);
  const gi = out.greedy.indexOf(g);
  const stop = g.slice(3, 5);
  const st = await client.completions.create({ model, prompt: cases.prompts[gi], max_tokens: N, temperature: 0, stop: [stop, "\u0000never"] });
  check(st.choices[0].text === g.slice(0, g.indexOf(stop)) && st.choices[0].finish_reason === "stop", "stop cuts the text",
        { got: st.choices[0].text, stop, g });

  // Streaming: the chunks add up to the same text; the usage chunk comes last.
  const stream = await client.completions.create({ model, prompt: cases.prompts[gi], max_tokens: N, temperature: 0, stream: true,
                                                   stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    ++chunks;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  check(text === g && finish !== null && usage !== null && chunks > 2, "stream adds up to the completion", { text, g, finish, usage, chunks });
  const sstop = await client.completions.create({ model, prompt: cases.prompts[gi], max_tokens: N, temperature: 0, stream: true, stop: [stop] });
  text = "";
  for await (const c of sstop) for (const ch of c.choices) text += ch.text;
  check(text === st.choices[0].text, "a streamed stop sequence never leaks", { text, want: st.choices[0].text });

  // Sampling: a seed repeats; n choices per prompt.
  const a = await client.completions.create({ model, prompt: cases.prompts[0], max_tokens: N, temperature: 1.0, top_p: 0.9, seed: 7, n: 3 });
  const b = await client.completions.create({ model, prompt: cases.prompts[0], max_tokens: N, temperature: 1.0, top_p: 0.9, seed: 7, n: 3 });
  check(a.choices.length === 3 && JSON.stringify(a.choices.map((c) => c.text)) === JSON.stringify(b.choices.map((c) => c.text)),
        "the same seed samples the same texts", [a.choices, b.choices]);

  // Malformed requests: 4xx naming the field.
  await expectError(400, "temperature", () => client.completions.create({ model, prompt: "x", temperature: -1 }), "negative temperature");
  await expectError(400, "max_tokens", () => client.completions.create({ model, prompt: "x", max_tokens: 100000 }), "over the context");
  await expectError(400, "prompt", () => client.completions.create({ model, prompt: [[1, 99999]] }), "token id outside the vocabulary");
  await expectError(400, "prompt", () => client.completions.create({ model, prompt: [] }), "empty prompt list");
  await expectError(400, "stop", () => client.completions.create({ model, prompt: "x", stop: Array.from({ length: 33 }, (_, i) => "s" + i) }), "33 stops");
  await expectError(400, "logprobs", () => client.completions.create({ model, prompt: "x", logprobs: 21 }), "logprobs over 20");
  await expectError(404, "model", () => client.completions.create({ model: "no-such-model", prompt: "x" }), "unknown model");
  const raw = async (method, path, body) => fetch(base + path, { method, body, headers: { "Content-Type": "application/json" } });
  let r = await raw("POST", "/v1/completions", "{not json");
  check(r.status === 400 && (await r.json()).error.message.includes("JSON"), "invalid JSON is 400");
  r = await raw("POST", "/v1/completions", JSON.stringify({ model, prompt: "x".repeat(cases.max_request_bytes) }));
  check(r.status === 413, "a body over --max-request-bytes is 413", r.status);
  r = await raw("GET", "/v1/nothing");
  check(r.status === 404 && (await r.json()).error, "unknown route is a JSON 404");

  // Megatron-LM's PUT /api: greedy is top_k = 1; logprobs of every token after the first.
  r = await raw("PUT", "/api", JSON.stringify({ prompts: [cases.prompts[gi]], tokens_to_generate: N, top_k: 1, logprobs: true }));
  check(r.status === 200, "PUT /api answers", r.status);
  const m = await r.json();
  check(m.text[0].startsWith(cases.prompts[gi] + g), "PUT /api's greedy text is prompt + completion", { m: m.text[0], g });
  check(m.logprobs[0].length === m.segments[0].length - 1, "one log-probability per token after the first", m);
  r = await raw("PUT", "/api", JSON.stringify({ tokens_to_generate: 4 }));
  check(r.status === 400 && (await r.json()) === "prompts argument required", "Megatron's error for a missing prompts");
  r = await raw("PUT", "/api", JSON.stringify({ prompts: ["x"], tokens_to_generate: 0 }));
  check(r.status === 400 && (await r.json()).includes("logprobs"), "tokens_to_generate=0 needs logprobs");

  fs.writeFileSync(outFile, JSON.stringify(out));
  console.log("openai client: " + checks + " checks passed");
})().catch((e) => {
  console.error("FAIL: " + (e.stack || e));
  process.exit(1);
});
