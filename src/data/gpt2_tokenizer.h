// GPT-2 byte-level BPE (Megatron's GPT2BPETokenizer = openai/gpt-2 encoder.py) from vocab.json (encoder.json) and
// merges.txt (vocab.bpe). Text is split with GPT-2's regex, each piece is BPE-merged over its UTF-8 bytes.
// "<|endoftext|>" inside text is not special (as in the reference); eod() is its id.
#pragma once
#include <memory>
#include <string>

#include "data/bpe_model.h"
#include "data/gpt2_pretokenizer.h"
#include "data/tokenizer.h"

namespace megaton::data {

class Gpt2Tokenizer : public Tokenizer {
 public:
  Gpt2Tokenizer(const std::string& vocab_file, const std::string& merge_file);

  void encode_to(std::string_view text, std::vector<int32_t>& out) override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(shared_->model.size()); }
  int32_t eod() const override { return shared_->eod; }
  std::unique_ptr<Tokenizer> clone() const override;
  std::string name() const override { return "GPT2BPETokenizer"; }

 private:
  struct Shared {
    Shared(BpeModel m, int32_t e) : model(std::move(m)), eod(e) {}
    BpeModel model;
    Gpt2PreTokenizer splitter;
    int32_t eod;
  };
  explicit Gpt2Tokenizer(std::shared_ptr<const Shared> s);
  std::shared_ptr<const Shared> shared_;
  BpeCache cache_;
};

/// Reads a vocab.json object {"token": id, ...} into id -> raw bytes (byte-level keys decoded); DataError on problems.
std::vector<std::string> read_gpt2_vocab(const std::string& path, int32_t* eod);
/// Reads merges.txt ("#version" first line, then "left right" per line) as raw-byte pairs; DataError names file:line.
std::vector<std::pair<std::string, std::string>> read_gpt2_merges(const std::string& path);

}  // namespace megaton::data
