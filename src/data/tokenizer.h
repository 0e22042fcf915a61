// The tokenizer interface used by preprocessing, training (vocab size, EOD), generation and evaluation, and the
// factory that builds one from Megatron's flags (--tokenizer-type, --vocab-file, --merge-file,
// --tokenizer-name-or-path). Two implementations: GPT-2 byte-level BPE from vocab.json + merges.txt
// (gpt2_tokenizer.h) and Hugging Face tokenizer.json BPE models (hf_tokenizer.h).
//
// Example:
//   auto tok = data::make_tokenizer("GPT2BPETokenizer", "encoder.json", "vocab.bpe", "");
//   std::vector<int32_t> ids = tok->encode("Hello world");   // {15496, 995}
//   std::string text = tok->decode(ids);                      // "Hello world"
//
// A Tokenizer object is not thread-safe (it memoizes BPE results); call clone() for each thread. Clones share the
// immutable vocabulary and merges.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer_options.h"

namespace megaton::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Appends the ids of `text` to `out`. Invalid UTF-8 is first replaced by U+FFFD per maximal subpart (docs/data.md).
  virtual void encode_to(std::string_view text, std::vector<int32_t>& out) = 0;
  std::vector<int32_t> encode(std::string_view text) {
    std::vector<int32_t> out;
    encode_to(text, out);
    return out;
  }
  /// The bytes the ids stand for (may be invalid UTF-8 when a multi-byte character is cut). Throws DataError on an
  /// id outside the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  /// Megatron's `tokenizer.vocab_size` (GPT-2: 50257; HF: len(tokenizer), added tokens included).
  virtual int64_t vocab_size() const = 0;
  /// The end-of-document id appended by `--append-eod` (GPT-2 <|endoftext|>; HF: eos token).
  virtual int32_t eod() const = 0;
  /// The padding id of packed prompt rows (Megatron's `tokenizer.pad`; HF: tokenizer_config.json's pad_token).
  /// DataError when the tokenizer has none (GPT-2's BPE files name none, as in Megatron).
  virtual int32_t pad() const;
  virtual std::unique_ptr<Tokenizer> clone() const = 0;
  virtual std::string name() const = 0;
};

/// Builds `type` ("GPT2BPETokenizer" or "PretrainedFromHF"); throws UsageError naming the missing flag, DataError
/// naming the file for unreadable or malformed tokenizer files.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& type, const std::string& vocab_file,
                                          const std::string& merge_file, const std::string& name_or_path);
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);

/// Megatron's best_fitting_dtype: the dtype code of .bin tokens (8 = uint16 when vocab < 65500, else 4 = int32).
uint8_t best_fitting_dtype_code(int64_t vocab_size);

}  // namespace megaton::data
