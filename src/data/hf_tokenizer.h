// Hugging Face `tokenizer.json` (the `tokenizers` library's serialization) for BPE models: byte-level (GPT-2, BLOOM,
// Llama-3, Qwen and GPT-4o style) and SentencePiece-style over characters with byte fallback (Llama-2: no ByteLevel
// pre-tokenizer). Supported pieces (anything else is refused with a DataError naming the field):
//   added_tokens      matched in the raw text first (leftmost, longest), honouring lstrip/rstrip; emitted as their id
//   normalizer        null, Prepend, Replace (String), Sequence of those: applied to the text between added tokens
//   pre_tokenizer     ByteLevel {add_prefix_space, use_regex}, Split {pattern: Regex|String, behavior: Isolated|
//                     Removed|MergedWithPrevious|MergedWithNext|Contiguous, invert}, Sequence of those
//   model             BPE {vocab, merges ("a b" or ["a","b"]), ignore_merges, byte_fallback, unk_token, fuse_unk};
//                     no dropout/suffixes
//   decoder           (character-level) Replace, ByteFallback, Fuse, Strip
//   post_processor    null, ByteLevel (no-op on ids), TemplateProcessing ("single" template: special tokens + $A)
// eod() is the eos token of tokenizer_config.json (as Megatron's PretrainedFromHF: `eos_token_id`), else a known
// end-of-text added token; pad() its pad_token.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/bpe_model.h"
#include "data/gpt2_pretokenizer.h"
#include "data/regex_splitter.h"
#include "data/tokenizer.h"

namespace megaton::data {

class HfTokenizer : public Tokenizer {
 public:
  /// `path` is a directory holding tokenizer.json (and optionally tokenizer_config.json), or the tokenizer.json file.
  explicit HfTokenizer(const std::string& path);

  void encode_to(std::string_view text, std::vector<int32_t>& out) override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override;
  int32_t eod() const override;
  int32_t pad() const override;
  std::unique_ptr<Tokenizer> clone() const override;
  std::string name() const override { return "PretrainedFromHF"; }

  struct Shared;

 private:
  explicit HfTokenizer(std::shared_ptr<const Shared> s);
  void encode_segment(std::string_view text, std::vector<int32_t>& out);
  std::shared_ptr<const Shared> shared_;
  std::vector<std::unique_ptr<RegexSplitter::Matcher>> matchers_;  // one per regex pre-tokenizer step
  BpeCache cache_;
  std::vector<std::string> pieces_, next_pieces_;
};

}  // namespace megaton::data
