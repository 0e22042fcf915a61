#!/usr/bin/env node
// Reference token ids from independent JavaScript tokenizers, for megaton's token-exactness tests.
//   node encode_reference.js ENCODER INPUT.jsonl OUTPUT.jsonl [KEY]
// ENCODER: gpt-3-encoder | js-tiktoken (GPT-2 BPE) | lenml-gpt2 | lenml-llama3 | lenml-llama2 (HF tokenizer.json via
// @lenml) | lenml-dir:DIR (DIR/tokenizer.json and DIR/tokenizer_config.json through @lenml/tokenizers' loader).
// INPUT is read as UTF-8 the WHATWG way (each maximal invalid subpart -> U+FFFD), each non-blank line is
// JSON.parse'd and its KEY (default "text") encoded; OUTPUT gets one JSON array of ids per non-blank input line.
// Empty texts give []. Packages come from data/downloaded/npm (data/fetch_gpt2_tokenizer.sh).
const fs = require("fs");
const path = require("path");
const [, , which, input, output, key = "text"] = process.argv;
if (!which || !input || !output) {
  console.error("usage: node encode_reference.js ENCODER INPUT.jsonl OUTPUT.jsonl [KEY]");
  process.exit(2);
}
const mods = path.join(__dirname, "..", "downloaded", "npm", "node_modules");
let encode;
if (which === "gpt-3-encoder") {
  const enc = require(path.join(mods, "gpt-3-encoder"));
  encode = (t) => enc.encode(t);
} else if (which === "js-tiktoken") {
  const { getEncoding } = require(path.join(mods, "js-tiktoken"));
  const enc = getEncoding("gpt2");
  encode = (t) => Array.from(enc.encode(t, [], []));  // no special tokens: text is plain text, as in Megatron
} else if (["lenml-gpt2", "lenml-llama3", "lenml-llama2"].includes(which)) {
  const { fromPreTrained } = require(path.join(mods, "@lenml", "tokenizer-" + which.slice("lenml-".length)));
  const tok = fromPreTrained();
  // A lone surrogate becomes U+FFFD first, as megaton reads it (the UTF-8 round trip): a character-level tokenizer
  // would otherwise see the surrogate itself, which no UTF-8 text can hold.
  const wellFormed = (t) => Buffer.from(t, "utf8").toString("utf8");
  encode = (t) => Array.from(tok.encode(wellFormed(t), { add_special_tokens: true }));
} else if (which.startsWith("lenml-dir:")) {
  const dir = which.slice("lenml-dir:".length);
  const { TokenizerLoader } = require(path.join(mods, "@lenml", "tokenizers"));
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
  const wellFormed = (t) => Buffer.from(t, "utf8").toString("utf8");
  encode = (t) => Array.from(tok.encode(wellFormed(t), { add_special_tokens: false }));
} else {
  console.error(`unknown encoder ${which}`);
  process.exit(2);
}
const lines = fs.readFileSync(input, "utf8").split("\n");
const out = [];
for (const line of lines) {
  if (line.trim() === "") continue;
  const text = JSON.parse(line)[key];
  out.push(JSON.stringify(text.length ? encode(text) : []));
}
fs.writeFileSync(output, out.join("\n") + "\n");
