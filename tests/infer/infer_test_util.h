// Helpers of the generation/evaluation tests: a byte-level tokenizer (one token a byte, EOD = 256) and the tiny GPT
// sized for it.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/tokenizer.h"
#include "model/model_test_util.h"

namespace megaton::infertest {

class ByteTokenizer : public data::Tokenizer {
 public:
  void encode_to(std::string_view text, std::vector<int32_t>& out) override {
    for (unsigned char c : text) out.push_back(c);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id == 256) continue;
      MEGATON_CHECK(id >= 0 && id < 256, DataError, "byte token ", id, " out of range");
      s.push_back(static_cast<char>(id));
    }
    return s;
  }
  int64_t vocab_size() const override { return 257; }
  int32_t eod() const override { return 256; }
  std::unique_ptr<data::Tokenizer> clone() const override { return std::make_unique<ByteTokenizer>(); }
  std::string name() const override { return "bytes"; }
};

/// tiny_config with the byte vocabulary (257, padded to 264) and 16 positions.
inline model::GptConfig byte_config(const std::string& positions = "absolute", const std::string& glu = "") {
  auto c = modeltest::tiny_config(positions, glu);
  c.vocab_size = 257;
  c.padded_vocab_size = 264;
  c.model.seq_length = 16;
  c.model.max_position_embeddings = 16;
  return c;
}

}  // namespace megaton::infertest
