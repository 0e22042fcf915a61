// The zero-shot language-modelling datasets of Megatron's tasks/zeroshot_gpt/datasets.py:
//   * WikiText-103 (and any raw text): the whole file is one token stream, cut into windows of --seq-length + 1
//     tokens with stride --overlapping-eval; after the first window only the last `stride` targets of a window are
//     scored, so every target is scored once with up to seq_length - stride tokens of extra left context.
//   * LAMBADA: JSONL {"text": ...}; the context and its last word (strict) or last BPE token, the target scored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace megaton::eval {

/// The raw text of a WikiText-style file and Megatron's word count of it: len(text.strip().split(" ")).
struct RawText {
  std::string text;
  int64_t num_original_tokens = 0;
};

/// Reads `path` whole. DataError naming the file when it cannot be read, is empty, or is not valid UTF-8 (with the
/// byte offset).
RawText read_raw_text(const std::string& path);

/// Python's len(s.strip().split(" ")): strip ASCII/Unicode-C0 whitespace at both ends, count single-space fields.
int64_t count_space_separated(const std::string& text);

/// One window: seq_len + 1 tokens (padded) and the seq_len target mask (1 = scored).
struct Window {
  std::vector<int32_t> tokens;  // [seq_len + 1]
  std::vector<uint8_t> mask;    // [seq_len], aligned with tokens[1:]
};

/// Megatron's _LMDataset over a token stream.
class LmWindows {
 public:
  /// stride <= 0 means seq_len (no overlap); stride is clamped to >= 1. DataError for fewer than 2 tokens.
  LmWindows(std::vector<int32_t> tokens, int64_t seq_len, int32_t pad_id, int64_t stride);
  int64_t size() const { return num_windows_; }
  Window window(int64_t i) const;
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t seq_len() const { return seq_len_; }
  int64_t stride() const { return stride_; }

 private:
  std::vector<int32_t> tokens_;
  int64_t seq_len_, stride_, num_windows_;
  int32_t pad_;
};

/// LAMBADA examples: each a Window whose mask covers the target tokens.
struct LambadaSet {
  std::vector<Window> examples;
  int64_t skipped_blank = 0;  // blank lines (ignored)
};

/// Reads a LAMBADA JSONL file. Non-strict: target = the last BPE token of text; strict: the last whitespace-separated
/// word, tokenized as " " + word, after the context text[:rfind(word)].strip(). DataError naming file:line for a
/// line that is not a JSON object with a string "text", a text with no word, or an example longer than seq_len + 1.
LambadaSet read_lambada(const std::string& path, data::Tokenizer& tok, bool strict, int64_t seq_len, int32_t pad_id);

}  // namespace megaton::eval
