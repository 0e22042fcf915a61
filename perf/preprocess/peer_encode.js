#!/usr/bin/env node
// Peer throughput: encodes every "text" of a JSONL file with an npm GPT-2 encoder, single-threaded (Node), and
// prints one JSON line {peer, bytes, tokens, wall_s, cpu_s} covering parse + encode (not the module load).
//   node peer_encode.js js-tiktoken|gpt-3-encoder INPUT.jsonl [REPEAT]
const fs = require("fs");
const path = require("path");
const [, , which, input, repeatArg] = process.argv;
const repeat = parseInt(repeatArg || "1", 10);
const mods = path.join(__dirname, "..", "..", "data", "downloaded", "npm", "node_modules");
let encode;
if (which === "js-tiktoken") {
  const enc = require(path.join(mods, "js-tiktoken")).getEncoding("gpt2");
  encode = (t) => enc.encode(t, [], []);
} else if (which === "gpt-3-encoder") {
  const enc = require(path.join(mods, "gpt-3-encoder"));
  encode = (t) => enc.encode(t);
} else {
  console.error("usage: node peer_encode.js js-tiktoken|gpt-3-encoder INPUT.jsonl [REPEAT]");
  process.exit(2);
}
const raw = fs.readFileSync(input);
const text = raw.toString("utf8");
encode("warm up the module");
const t0 = process.hrtime.bigint();
const c0 = process.cpuUsage();
let tokens = 0;
for (let r = 0; r < repeat; ++r) {
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const t = JSON.parse(line).text;
    tokens += t.length ? encode(t).length + 1 : 0;  // +1: the EOD megaton appends
  }
}
const wall = Number(process.hrtime.bigint() - t0) / 1e9;
const c = process.cpuUsage(c0);
console.log(JSON.stringify({ peer: which, bytes: raw.length * repeat, tokens, wall_s: wall, cpu_s: (c.user + c.system) / 1e6 }));
